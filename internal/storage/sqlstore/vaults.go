package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// CreateVault implements storage.Vaults.
func (s *Store) CreateVault(ctx context.Context, v api.Vault) error {
	if _, err := s.db().Exec(ctx, `INSERT INTO vaults (id, body, created_at, archived_at) VALUES (?, ?, ?, ?)`,
		v.ID, toJSON(v), v.CreatedAt, v.ArchivedAt); err != nil {
		return fmt.Errorf("create vault %s: %w", v.ID, err)
	}
	return nil
}

// GetVault implements storage.Vaults.
func (s *Store) GetVault(ctx context.Context, id string) (api.Vault, error) {
	return scanJSON[api.Vault](s.db().QueryRow(ctx, `SELECT body FROM vaults WHERE id = ?`, id))
}

// ListVaults implements storage.Vaults.
func (s *Store) ListVaults(ctx context.Context, q storage.ListQuery) ([]api.Vault, error) {
	return queryAll(ctx, s.db(), scanJSON[api.Vault], `SELECT body FROM vaults
		WHERE (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
}

// UpdateVault implements storage.Vaults.
func (s *Store) UpdateVault(ctx context.Context, id string, fn func(*api.Vault) error) (api.Vault, error) {
	var out api.Vault
	err := s.write(ctx, func(tx *tx) error {
		v, err := scanJSON[api.Vault](tx.QueryRow(ctx, `SELECT body FROM vaults WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return err
		}
		if err := fn(&v); err != nil {
			return err
		}
		v.ID = id
		if _, err := tx.Exec(ctx, `UPDATE vaults SET body = ?, archived_at = ? WHERE id = ?`, toJSON(v), v.ArchivedAt, id); err != nil {
			return err
		}
		out = v
		return nil
	})
	return out, err
}

// DeleteVault implements storage.Vaults; its credentials go with it (ON
// DELETE CASCADE).
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	n, err := s.db().Exec(ctx, `DELETE FROM vaults WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete vault %s: %w", id, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// CreateVaultCredential implements storage.Vaults. The vault's row lock
// orders it after an archive or delete of the vault.
func (s *Store) CreateVaultCredential(ctx context.Context, c api.VaultCredential, sealed []byte) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := scanJSON[api.Vault](tx.QueryRow(ctx, `SELECT body FROM vaults WHERE id = ?`+s.d.ForUpdate, c.VaultID)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO vault_credentials (id, vault_id, auth_type, mcp_server_url, body, secret, created_at, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.VaultID, c.Auth.Type, c.Auth.MCPServerURL, toJSON(c), sealed, c.CreatedAt, c.ArchivedAt); err != nil {
			return fmt.Errorf("create credential %s: %w", c.ID, err)
		}
		return nil
	})
}

// GetVaultCredential implements storage.Vaults.
func (s *Store) GetVaultCredential(ctx context.Context, vaultID, id string) (api.VaultCredential, error) {
	return scanJSON[api.VaultCredential](s.db().QueryRow(ctx, `SELECT body FROM vault_credentials WHERE vault_id = ? AND id = ?`, vaultID, id))
}

// ListVaultCredentials implements storage.Vaults. The vault's existence
// and its credentials are read in one snapshot.
func (s *Store) ListVaultCredentials(ctx context.Context, vaultID string, q storage.ListQuery) ([]api.VaultCredential, error) {
	var out []api.VaultCredential
	err := s.read(ctx, func(c Conn) error {
		if _, err := scanJSON[api.Vault](c.QueryRow(ctx, `SELECT body FROM vaults WHERE id = ?`, vaultID)); err != nil {
			return err
		}
		var err error
		out, err = queryAll(ctx, c, scanJSON[api.VaultCredential], `SELECT body FROM vault_credentials
			WHERE vault_id = ? AND (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
			vaultID, q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
		return err
	})
	return out, err
}

// UpdateVaultCredential implements storage.Vaults.
func (s *Store) UpdateVaultCredential(ctx context.Context, vaultID, id string, fn func(*api.VaultCredential) ([]byte, error)) (api.VaultCredential, error) {
	var out api.VaultCredential
	err := s.write(ctx, func(tx *tx) error {
		c, err := scanJSON[api.VaultCredential](tx.QueryRow(ctx, `SELECT body FROM vault_credentials WHERE vault_id = ? AND id = ?`+s.d.ForUpdate, vaultID, id))
		if err != nil {
			return err
		}
		sealed, err := fn(&c)
		if err != nil {
			return err
		}
		c.ID, c.VaultID = id, vaultID
		if sealed != nil {
			_, err = tx.Exec(ctx, `UPDATE vault_credentials SET body = ?, archived_at = ?, secret = ? WHERE id = ?`, toJSON(c), c.ArchivedAt, sealed, id)
		} else {
			_, err = tx.Exec(ctx, `UPDATE vault_credentials SET body = ?, archived_at = ? WHERE id = ?`, toJSON(c), c.ArchivedAt, id)
		}
		out = c
		return err
	})
	return out, err
}

// DeleteVaultCredential implements storage.Vaults.
func (s *Store) DeleteVaultCredential(ctx context.Context, vaultID, id string) error {
	n, err := s.db().Exec(ctx, `DELETE FROM vault_credentials WHERE vault_id = ? AND id = ?`, vaultID, id)
	if err != nil {
		return fmt.Errorf("delete credential %s: %w", id, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// VaultSecrets implements storage.Vaults.
func (s *Store) VaultSecrets(ctx context.Context, vaultIDs []string, typ, serverURL string) ([]storage.VaultSecret, error) {
	if len(vaultIDs) == 0 {
		return nil, nil
	}
	args := []any{typ, serverURL}
	for _, id := range vaultIDs {
		args = append(args, id)
	}
	return queryAll(ctx, s.db(), func(r Row) (storage.VaultSecret, error) {
		var v storage.VaultSecret
		err := r.Scan(&v.VaultID, &v.CredentialID, &v.Sealed)
		return v, err
	}, `SELECT c.vault_id, c.id, c.secret FROM vault_credentials c JOIN vaults v ON v.id = c.vault_id
		WHERE c.auth_type = ? AND c.mcp_server_url = ? AND c.archived_at IS NULL AND v.archived_at IS NULL
		AND c.vault_id IN (?`+strings.Repeat(", ?", len(vaultIDs)-1)+`) ORDER BY c.id DESC`, args...)
}
