package storage

import (
	"context"

	"github.com/memstore/memstore/api"
)

// Vaults persists vaults and their credentials. A credential's secret is
// stored sealed (internal/sealbox, by the service layer): storage never
// sees it in clear, and never returns it with the credential's public
// form, only through VaultSecrets.
type Vaults interface {
	CreateVault(ctx context.Context, v api.Vault) error
	GetVault(ctx context.Context, id string) (api.Vault, error)
	// ListVaults returns vaults newest first; After is the last id of the
	// previous page.
	ListVaults(ctx context.Context, q ListQuery) ([]api.Vault, error)
	// UpdateVault changes a vault under its row lock.
	UpdateVault(ctx context.Context, id string, fn func(*api.Vault) error) (api.Vault, error)
	// DeleteVault deletes a vault with its credentials.
	DeleteVault(ctx context.Context, id string) error

	// CreateVaultCredential stores a credential with its sealed secret;
	// ErrNotFound when the vault is gone.
	CreateVaultCredential(ctx context.Context, c api.VaultCredential, sealed []byte) error
	GetVaultCredential(ctx context.Context, vaultID, id string) (api.VaultCredential, error)
	// ListVaultCredentials returns a vault's credentials newest first;
	// ErrNotFound when the vault does not exist.
	ListVaultCredentials(ctx context.Context, vaultID string, q ListQuery) ([]api.VaultCredential, error)
	// UpdateVaultCredential changes a credential under its row lock; fn
	// returns the new sealed secret, or nil to keep the stored one.
	UpdateVaultCredential(ctx context.Context, vaultID, id string, fn func(*api.VaultCredential) ([]byte, error)) (api.VaultCredential, error)
	DeleteVaultCredential(ctx context.Context, vaultID, id string) error
	// VaultSecrets returns the sealed secrets of the live credentials of
	// type typ for serverURL in the live vaults among vaultIDs, newest
	// first within each vault, keyed by credential id.
	VaultSecrets(ctx context.Context, vaultIDs []string, typ, serverURL string) ([]VaultSecret, error)
}

// VaultSecret is a credential's sealed secret with where it came from.
type VaultSecret struct {
	VaultID      string
	CredentialID string
	Sealed       []byte
}
