package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
)

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CreateCredential implements storage.Credentials.
func (s *DB) CreateCredential(ctx context.Context, c storage.Credential, hash string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if c.CreatedAt.IsZero() {
			now, err := s.now(ctx, tx)
			if err != nil {
				return err
			}
			c.CreatedAt = now
		}
		if err := insertCredential(ctx, tx, c, hash); err != nil {
			return fmt.Errorf("create credential %s: %w", c.ID, err)
		}
		return nil
	})
}

func insertCredential(ctx context.Context, q querier, c storage.Credential, hash string) error {
	_, err := q.Exec(ctx, `INSERT INTO credentials (id, kind, name, hash, environment_id, session_id, work_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.ID, string(c.Kind), c.Name, hash, nullString(c.EnvironmentID), nullString(c.SessionID), nullString(c.WorkID), c.CreatedAt)
	return err
}

// CredentialByHash implements storage.Credentials.
func (s *DB) CredentialByHash(ctx context.Context, hash string) (storage.Credential, error) {
	c, err := scanCredential(s.pool.QueryRow(ctx, `SELECT id, kind, name, environment_id, session_id, work_id, created_at FROM credentials WHERE hash = $1 AND revoked_at IS NULL`, hash))
	if err != nil {
		return storage.Credential{}, unavailable(notFound(err))
	}
	return c, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// CountCredentials implements storage.Credentials.
func (s *DB) CountCredentials(ctx context.Context, kind storage.CredentialKind) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM credentials WHERE kind = $1 AND revoked_at IS NULL`, string(kind)).Scan(&n)
	return n, unavailable(err)
}

// ListEnvironmentKeys implements storage.Credentials.
func (s *DB) ListEnvironmentKeys(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Credential, error) {
	out, err := queryAll(ctx, s.pool, scanCredential, `SELECT id, kind, name, environment_id, session_id, work_id, created_at FROM credentials
		WHERE kind = 'environment_key' AND revoked_at IS NULL AND environment_id = $1 AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`,
		environmentID, q.After, limitArg(q.Limit))
	return out, unavailable(err)
}

func scanCredential(r pgx.Row) (storage.Credential, error) {
	var (
		c               storage.Credential
		kind            string
		env, sesn, work *string
	)
	if err := r.Scan(&c.ID, &kind, &c.Name, &env, &sesn, &work, &c.CreatedAt); err != nil {
		return c, err
	}
	c.Kind = storage.CredentialKind(kind)
	c.EnvironmentID, c.SessionID, c.WorkID = deref(env), deref(sesn), deref(work)
	return c, nil
}

// RevokeEnvironmentKey implements storage.Credentials.
func (s *DB) RevokeEnvironmentKey(ctx context.Context, environmentID, keyID string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE credentials SET revoked_at = $1 WHERE id = $2 AND kind = 'environment_key' AND environment_id = $3 AND revoked_at IS NULL`,
			now, keyID, environmentID)
		if err != nil {
			return fmt.Errorf("revoke environment key %s: %w", keyID, err)
		}
		if tag.RowsAffected() == 0 {
			return storage.ErrNotFound
		}
		return nil
	})
}
