package api

import "time"

// Vault is a named set of credentials that sessions name in vault_ids:
// the secrets an agent's MCP servers want, kept apart from the agent so
// that one agent serves many users, each with their own vault.
type Vault struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"` // "vault"
	DisplayName string            `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ArchivedAt  *time.Time        `json:"archived_at"`
}

// VaultCredential is a credential as the API shows it: what it is for,
// never its secret.
type VaultCredential struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"` // "vault_credential"
	VaultID     string            `json:"vault_id"`
	DisplayName *string           `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
	Auth        CredentialAuth    `json:"auth"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ArchivedAt  *time.Time        `json:"archived_at"`
}

// CredentialAuth is a credential's auth without its secret.
type CredentialAuth struct {
	Type         string `json:"type"` // "static_bearer"
	MCPServerURL string `json:"mcp_server_url"`
}

// CredentialStaticBearer is the one credential type memstore keeps: a
// token sent as "Authorization: Bearer" to the MCP server at a URL.
const CredentialStaticBearer = "static_bearer"

// CreateVaultRequest is the body of POST /v1/vaults.
type CreateVaultRequest struct {
	DisplayName string            `json:"display_name"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// UpdateVaultRequest is the body of POST /v1/vaults/{id}: fields left out
// are kept; a metadata key mapped to null (or "") is deleted.
type UpdateVaultRequest struct {
	DisplayName *string            `json:"display_name,omitempty"`
	Metadata    map[string]*string `json:"metadata,omitempty"`
}

// CreateVaultCredentialRequest is the body of POST /v1/vaults/{id}/credentials.
type CreateVaultCredentialRequest struct {
	DisplayName *string           `json:"display_name,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Auth        CredentialParams  `json:"auth"`
}

// CredentialParams is a credential's auth as a client sends it, secret
// included.
type CredentialParams struct {
	Type         string  `json:"type"`
	MCPServerURL string  `json:"mcp_server_url,omitempty"`
	Token        *string `json:"token,omitempty"`
}

// UpdateVaultCredentialRequest is the body of POST
// /v1/vaults/{id}/credentials/{credential}: auth replaces the token (its
// type must stay; the URL cannot change).
type UpdateVaultCredentialRequest struct {
	DisplayName *string            `json:"display_name,omitempty"`
	Metadata    map[string]*string `json:"metadata,omitempty"`
	Auth        *CredentialParams  `json:"auth,omitempty"`
}
