package app

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/sealbox"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Vault limits.
const (
	maxVaultNameChars   = 255
	maxVaultTokenBytes  = 16 << 10
	maxVaultURLChars    = 2048
	listVaults          = "GET /v1/vaults"
	listVaultCredential = "GET /v1/vaults/{vault_id}/credentials"
)

// Vaults keeps vaults and their credentials. A credential's token is
// sealed with the server's secrets key before it reaches storage and is
// opened only to be sent to the MCP server it is for (MCPBearer): no
// answer of the API, event or log line carries it.
type Vaults struct {
	app *App
	box *sealbox.Box // nil: the server has no secrets key
}

func newVaults(a *App) *Vaults {
	v := &Vaults{app: a}
	if len(a.cfg.SecretsKey) > 0 {
		box, err := sealbox.New(a.cfg.SecretsKey)
		if err != nil {
			a.log.Error("the secrets key is unusable, so vault credentials cannot be stored or read", "err", err)
		} else {
			v.box = box
		}
	}
	return v
}

// Create makes a vault.
func (s *Vaults) Create(ctx context.Context, req api.CreateVaultRequest, by Caller) (api.Vault, error) {
	if err := vaultName("display_name", req.DisplayName); err != nil {
		return api.Vault{}, err
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return api.Vault{}, err
	}
	now := s.app.now()
	v := api.Vault{ID: ids.NewAt(ids.Vault, now), Type: "vault", DisplayName: req.DisplayName, Metadata: req.Metadata, CreatedAt: now, UpdatedAt: now}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	if err := s.app.store.CreateVault(ctx, v); err != nil {
		return api.Vault{}, err
	}
	s.app.log.InfoContext(ctx, "vault created", "vault_id", v.ID, by.attr())
	return v, nil
}

// Get returns a vault, or a not_found refusal.
func (s *Vaults) Get(ctx context.Context, id string) (api.Vault, error) {
	v, err := s.app.store.GetVault(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return v, validate.Missing("", "vault", id, listVaults)
	}
	return v, err
}

// Update changes a vault's name or metadata.
func (s *Vaults) Update(ctx context.Context, id string, req api.UpdateVaultRequest, by Caller) (api.Vault, error) {
	if req.DisplayName != nil {
		if err := vaultName("display_name", *req.DisplayName); err != nil {
			return api.Vault{}, err
		}
	}
	v, err := s.app.store.UpdateVault(ctx, id, func(v *api.Vault) error {
		if v.ArchivedAt != nil {
			return api.Errorf(api.InvalidRequest, "vault %s is archived; it cannot change (create a new vault)", id)
		}
		md, err := patchMetadata("metadata", v.Metadata, req.Metadata)
		if err != nil {
			return err
		}
		if req.DisplayName != nil {
			v.DisplayName = *req.DisplayName
		}
		v.Metadata, v.UpdatedAt = md, s.app.now()
		return nil
	})
	if err != nil {
		return v, s.missing(err, id)
	}
	s.app.log.InfoContext(ctx, "vault updated", "vault_id", id, by.attr())
	return v, nil
}

// Archive retires a vault: sessions naming it no longer get its
// credentials, and new sessions cannot name it.
func (s *Vaults) Archive(ctx context.Context, id string, by Caller) (api.Vault, error) {
	v, err := s.app.store.UpdateVault(ctx, id, func(v *api.Vault) error {
		if v.ArchivedAt == nil {
			now := s.app.now()
			v.ArchivedAt, v.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return v, s.missing(err, id)
	}
	s.app.log.InfoContext(ctx, "vault archived", "vault_id", id, by.attr())
	return v, nil
}

// Delete deletes a vault with its credentials.
func (s *Vaults) Delete(ctx context.Context, id string, by Caller) error {
	if err := s.app.store.DeleteVault(ctx, id); err != nil {
		return s.missing(err, id)
	}
	s.app.log.InfoContext(ctx, "vault deleted", "vault_id", id, by.attr())
	return nil
}

// CreateCredential adds a static_bearer credential to a vault: the token
// sent to the MCP server at mcp_server_url. A vault holds one live
// credential per URL, so which token a server gets is never a guess.
func (s *Vaults) CreateCredential(ctx context.Context, vaultID string, req api.CreateVaultCredentialRequest, by Caller) (api.VaultCredential, error) {
	if s.box == nil {
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "this server has no secrets key, so it cannot keep credentials; start it with memstore serve (which keeps one in its data folder) or set MEMSTORE_SECRETS_KEY")
	}
	a := req.Auth
	switch {
	case a.Type != api.CredentialStaticBearer:
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.type must be %q (a token sent as Authorization: Bearer to an MCP server), got %q; memstore keeps no other kind of credential", api.CredentialStaticBearer, a.Type)
	case a.Token == nil || *a.Token == "":
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.token is required: the bearer token to send to the MCP server")
	case len(*a.Token) > maxVaultTokenBytes:
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.token is %d bytes; the limit is %d", len(*a.Token), maxVaultTokenBytes)
	}
	if err := serverURL(a.MCPServerURL); err != nil {
		return api.VaultCredential{}, err
	}
	if req.DisplayName != nil {
		if err := vaultName("display_name", *req.DisplayName); err != nil {
			return api.VaultCredential{}, err
		}
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return api.VaultCredential{}, err
	}
	v, err := s.Get(ctx, vaultID)
	if err != nil {
		return api.VaultCredential{}, err
	}
	if v.ArchivedAt != nil {
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "vault %s is archived; add the credential to a live vault", vaultID)
	}
	taken, err := s.app.store.VaultSecrets(ctx, []string{vaultID}, api.CredentialStaticBearer, a.MCPServerURL)
	if err != nil {
		return api.VaultCredential{}, err
	}
	if len(taken) > 0 {
		return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "vault %s already has credential %s for %s; update its token (POST /v1/vaults/%s/credentials/%s) or archive it first", vaultID, taken[0].CredentialID, a.MCPServerURL, vaultID, taken[0].CredentialID)
	}
	now := s.app.now()
	c := api.VaultCredential{ID: ids.NewAt(ids.VaultCredential, now), Type: "vault_credential", VaultID: vaultID, DisplayName: req.DisplayName,
		Metadata: req.Metadata, Auth: api.CredentialAuth{Type: a.Type, MCPServerURL: a.MCPServerURL}, CreatedAt: now, UpdatedAt: now}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	if err := s.app.store.CreateVaultCredential(ctx, c, s.box.Seal([]byte(*a.Token), c.ID)); err != nil {
		return api.VaultCredential{}, s.missing(err, vaultID)
	}
	s.app.log.InfoContext(ctx, "vault credential created", "vault_id", vaultID, "credential_id", c.ID, "mcp_server_url", a.MCPServerURL, by.attr())
	return c, nil
}

// GetCredential returns a credential (never its token), or a not_found
// refusal.
func (s *Vaults) GetCredential(ctx context.Context, vaultID, id string) (api.VaultCredential, error) {
	c, err := s.app.store.GetVaultCredential(ctx, vaultID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return c, validate.Missing("", "credential", id, listVaultCredential)
	}
	return c, err
}

// UpdateCredential changes a credential's name, metadata or token. Its
// type and URL stay: a credential for another server is a new one.
func (s *Vaults) UpdateCredential(ctx context.Context, vaultID, id string, req api.UpdateVaultCredentialRequest, by Caller) (api.VaultCredential, error) {
	if req.DisplayName != nil {
		if err := vaultName("display_name", *req.DisplayName); err != nil {
			return api.VaultCredential{}, err
		}
	}
	if a := req.Auth; a != nil {
		switch {
		case a.Type != api.CredentialStaticBearer:
			return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.type must stay %q, got %q", api.CredentialStaticBearer, a.Type)
		case a.MCPServerURL != "":
			return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.mcp_server_url cannot change; create a new credential for another server")
		case a.Token != nil && (*a.Token == "" || len(*a.Token) > maxVaultTokenBytes):
			return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "auth.token must be 1 to %d bytes", maxVaultTokenBytes)
		case a.Token != nil && s.box == nil:
			return api.VaultCredential{}, api.Errorf(api.InvalidRequest, "this server has no secrets key, so it cannot keep credentials; start it with memstore serve (which keeps one in its data folder) or set MEMSTORE_SECRETS_KEY")
		}
	}
	c, err := s.app.store.UpdateVaultCredential(ctx, vaultID, id, func(c *api.VaultCredential) ([]byte, error) {
		if c.ArchivedAt != nil {
			return nil, api.Errorf(api.InvalidRequest, "credential %s is archived; it cannot change (create a new one)", id)
		}
		md, err := patchMetadata("metadata", c.Metadata, req.Metadata)
		if err != nil {
			return nil, err
		}
		if req.DisplayName != nil {
			c.DisplayName = req.DisplayName
		}
		c.Metadata, c.UpdatedAt = md, s.app.now()
		if req.Auth != nil && req.Auth.Token != nil {
			return s.box.Seal([]byte(*req.Auth.Token), id), nil
		}
		return nil, nil
	})
	if err != nil {
		return c, s.missingCredential(err, id)
	}
	s.app.log.InfoContext(ctx, "vault credential updated", "vault_id", vaultID, "credential_id", id, "token_replaced", req.Auth != nil && req.Auth.Token != nil, by.attr())
	return c, nil
}

// ArchiveCredential retires a credential and forgets its token.
func (s *Vaults) ArchiveCredential(ctx context.Context, vaultID, id string, by Caller) (api.VaultCredential, error) {
	c, err := s.app.store.UpdateVaultCredential(ctx, vaultID, id, func(c *api.VaultCredential) ([]byte, error) {
		if c.ArchivedAt != nil {
			return nil, nil
		}
		now := s.app.now()
		c.ArchivedAt, c.UpdatedAt = &now, now
		return []byte{}, nil
	})
	if err != nil {
		return c, s.missingCredential(err, id)
	}
	s.app.log.InfoContext(ctx, "vault credential archived", "vault_id", vaultID, "credential_id", id, by.attr())
	return c, nil
}

// DeleteCredential deletes a credential.
func (s *Vaults) DeleteCredential(ctx context.Context, vaultID, id string, by Caller) error {
	if err := s.app.store.DeleteVaultCredential(ctx, vaultID, id); err != nil {
		return s.missingCredential(err, id)
	}
	s.app.log.InfoContext(ctx, "vault credential deleted", "vault_id", vaultID, "credential_id", id, by.attr())
	return nil
}

// MCPBearer implements agent.BearerSource: the token of the first of the
// session's vaults (in vault_ids order) with a live static_bearer
// credential for serverURL.
func (s *Vaults) MCPBearer(ctx context.Context, vaultIDs []string, serverURL string) (string, error) {
	found, err := s.app.store.VaultSecrets(ctx, vaultIDs, api.CredentialStaticBearer, serverURL)
	if err != nil || len(found) == 0 {
		return "", err
	}
	if s.box == nil {
		return "", errors.New("this server has no secrets key, so it cannot read vault credentials")
	}
	slices.SortStableFunc(found, func(a, b storage.VaultSecret) int {
		return slices.Index(vaultIDs, a.VaultID) - slices.Index(vaultIDs, b.VaultID)
	})
	token, err := s.box.Open(found[0].Sealed, found[0].CredentialID)
	if err != nil {
		return "", err
	}
	return string(token), nil
}

// CheckSessionVaults refuses vault_ids that name no live vault.
func (s *Vaults) CheckSessionVaults(ctx context.Context, vaultIDs []string) error {
	seen := map[string]bool{}
	for i, id := range vaultIDs {
		if !strings.HasPrefix(id, ids.Vault) {
			return api.Errorf(api.InvalidRequest, "vault_ids[%d]: %q is not a vault id (they look like %s…); GET /v1/vaults lists them", i, id, ids.Vault)
		}
		if seen[id] {
			return api.Errorf(api.InvalidRequest, "vault_ids[%d]: %s is named twice; name each vault once", i, id)
		}
		seen[id] = true
		v, err := s.app.store.GetVault(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			return validate.Missing("vault_ids["+itoa(i)+"]", "vault", id, listVaults)
		}
		if err != nil {
			return err
		}
		if v.ArchivedAt != nil {
			return api.Errorf(api.InvalidRequest, "vault_ids[%d]: vault %s is archived; name a live vault", i, id)
		}
	}
	return nil
}

func (s *Vaults) missing(err error, id string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return validate.Missing("", "vault", id, listVaults)
	}
	return err
}

func (s *Vaults) missingCredential(err error, id string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return validate.Missing("", "credential", id, listVaultCredential)
	}
	return err
}

func vaultName(field, name string) error {
	if name == "" {
		return api.Errorf(api.InvalidRequest, "%s is required: 1 to %d characters", field, maxVaultNameChars)
	}
	return validate.Text(field, name, maxVaultNameChars)
}

// serverURL checks a credential's mcp_server_url: an absolute http(s) URL
// without user info. Where it may point is the agent's concern, checked
// when an agent names it.
func serverURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return api.Errorf(api.InvalidRequest, "auth.mcp_server_url is required: the URL of the MCP server the token is for, exactly as the agent's mcp_servers entry gives it")
	case len(raw) > maxVaultURLChars:
		return api.Errorf(api.InvalidRequest, "auth.mcp_server_url is %d characters; the limit is %d", len(raw), maxVaultURLChars)
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return api.Errorf(api.InvalidRequest, "auth.mcp_server_url %q is not an absolute http(s) URL", raw)
	case u.User != nil:
		return api.Errorf(api.InvalidRequest, "auth.mcp_server_url must not carry user:password@; the token is the credential")
	}
	return nil
}
