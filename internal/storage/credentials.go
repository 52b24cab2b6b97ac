package storage

import (
	"context"
	"time"
)

// CredentialKind says what a bearer secret is and therefore what it may do
// (SPEC §6).
type CredentialKind string

const (
	// APIKey is a workspace key: everything.
	APIKey CredentialKind = "api_key"
	// EnvironmentKey serves one environment's work queue.
	EnvironmentKey CredentialKind = "environment_key"
	// SessionsToken is minted into a work item's secret and reaches only that
	// session, its work item and its attached stores.
	SessionsToken CredentialKind = "sessions_token"
)

// Credential is a stored secret, known only by its hash. The scope fields are
// set according to Kind: EnvironmentID for environment keys; SessionID and
// WorkID for sessions tokens.
type Credential struct {
	ID            string
	Kind          CredentialKind
	Name          string
	EnvironmentID string
	SessionID     string
	WorkID        string
	CreatedAt     time.Time
	RevokedAt     *time.Time
}

// Credentials stores hashed secrets. Hash is the lowercase hex SHA-256 of the
// secret: the secret itself never reaches storage.
type Credentials interface {
	// CreateCredential stores c under hash. c.ID must be set.
	CreateCredential(ctx context.Context, c Credential, hash string) error
	// CredentialByHash returns the live (unrevoked) credential with that hash,
	// or ErrNotFound.
	CredentialByHash(ctx context.Context, hash string) (Credential, error)
	// CountCredentials counts live credentials of a kind (the server asks
	// whether an admin key exists yet).
	CountCredentials(ctx context.Context, kind CredentialKind) (int, error)
	// ListEnvironmentKeys returns the live environment keys of an
	// environment, newest first.
	ListEnvironmentKeys(ctx context.Context, environmentID string, q ListQuery) ([]Credential, error)
	// RevokeEnvironmentKey revokes a live key of an environment, so that
	// CredentialByHash no longer finds it. ErrNotFound when the environment
	// has no live key with that id.
	RevokeEnvironmentKey(ctx context.Context, environmentID, keyID string) error
}
