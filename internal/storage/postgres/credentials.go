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
	var (
		c               storage.Credential
		kind            string
		env, sesn, work *string
	)
	err := s.pool.QueryRow(ctx, `SELECT id, kind, name, environment_id, session_id, work_id, created_at FROM credentials WHERE hash = $1 AND revoked_at IS NULL`, hash).
		Scan(&c.ID, &kind, &c.Name, &env, &sesn, &work, &c.CreatedAt)
	if err != nil {
		return storage.Credential{}, unavailable(notFound(err))
	}
	c.Kind = storage.CredentialKind(kind)
	c.EnvironmentID, c.SessionID, c.WorkID = deref(env), deref(sesn), deref(work)
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
