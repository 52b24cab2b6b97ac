package api

import (
	"net/url"
	"strconv"
	"time"
)

// EnvironmentConfigSelfHosted is the only environment configuration memstore
// runs: sessions are served by a worker on the customer's host.
const EnvironmentConfigSelfHosted = "self_hosted"

// Environment is where sessions run. A self-hosted environment owns a work
// queue that workers poll with an environment key.
type Environment struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"` // "environment"
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Config      EnvironmentConfig `json:"config"`
	Metadata    map[string]string `json:"metadata"`
	Scope       string            `json:"scope,omitempty"` // "organization"
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ArchivedAt  *time.Time        `json:"archived_at"`
}

// EnvironmentConfig says how an environment runs its sessions; Type is
// "self_hosted" (the hosted "cloud" type is refused by memstore).
type EnvironmentConfig struct {
	Type string `json:"type"`
}

// CreateEnvironmentRequest is the body of POST /v1/environments. A missing
// config means self_hosted.
type CreateEnvironmentRequest struct {
	Name        string             `json:"name"`
	Description *string            `json:"description,omitempty"`
	Config      *EnvironmentConfig `json:"config,omitempty"`
	Scope       string             `json:"scope,omitempty"`
	Metadata    map[string]string  `json:"metadata,omitempty"`
}

// UpdateEnvironmentRequest is the body of POST /v1/environments/{id}.
// Omitted fields are left alone; description null clears it; a metadata key
// mapped to null (or to "") is deleted.
type UpdateEnvironmentRequest struct {
	Name        *string            `json:"name,omitempty"`
	Description NullableString     `json:"description,omitzero"`
	Config      *EnvironmentConfig `json:"config,omitempty"`
	Scope       string             `json:"scope,omitempty"`
	Metadata    map[string]*string `json:"metadata,omitempty"`
}

// EnvironmentDeleted is the response of DELETE /v1/environments/{id}:
// {id, type:"environment_deleted"}. It is a Deleted.
type EnvironmentDeleted = Deleted

// Deleted object types.
const (
	EnvironmentDeletedType = "environment_deleted"
	SessionDeletedType     = "session_deleted"
	// EnvironmentKeyDeletedType answers DELETE /v1/environments/{id}/keys/{key_id}:
	// the key is revoked.
	EnvironmentKeyDeletedType = "environment_key_deleted"
)

// EnvironmentKey is the response of POST /v1/environments/{id}/keys, and an
// item of GET /v1/environments/{id}/keys. Key is the secret itself, shown
// only in the response that minted it: memstore keeps its hash.
type EnvironmentKey struct {
	Type          string    `json:"type"` // "environment_key"
	ID            string    `json:"id"`
	EnvironmentID string    `json:"environment_id"`
	Name          string    `json:"name"`
	Key           string    `json:"key,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// CreateEnvironmentKeyRequest is the optional body of
// POST /v1/environments/{id}/keys.
type CreateEnvironmentKeyRequest struct {
	Name string `json:"name,omitempty"`
}

// EnvironmentKeyListParams are the query parameters of
// GET /v1/environments/{id}/keys.
type EnvironmentKeyListParams struct {
	Limit int
	Page  string
}

// Query encodes the parameters; zero values are left out.
func (p EnvironmentKeyListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	return q
}

// EnvironmentListParams are the query parameters of GET /v1/environments.
type EnvironmentListParams struct {
	Limit           int
	Page            string
	IncludeArchived bool
}

// Query encodes the parameters; zero values are left out.
func (p EnvironmentListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	if p.IncludeArchived {
		q.Set("include_archived", "true")
	}
	return q
}

func setLimitPage(q url.Values, limit int, page string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if page != "" {
		q.Set("page", page)
	}
}
