package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/storage"
)

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// CreateCredential implements storage.Credentials.
func (s *DB) CreateCredential(ctx context.Context, c storage.Credential, hash string) error {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO credentials (id, kind, name, hash, environment_id, session_id, work_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, string(c.Kind), c.Name, hash, nullString(c.EnvironmentID), nullString(c.SessionID), nullString(c.WorkID), formatTime(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("create credential %s: %w", c.ID, err)
	}
	return nil
}

// CredentialByHash implements storage.Credentials.
func (s *DB) CredentialByHash(ctx context.Context, hash string) (storage.Credential, error) {
	var (
		c               storage.Credential
		kind, created   string
		env, sesn, work sql.NullString
	)
	// Every request runs this lookup: a prepared statement spares it a parse.
	err := s.cached(nil).QueryRowContext(ctx, `SELECT id, kind, name, environment_id, session_id, work_id, created_at FROM credentials WHERE hash = ? AND revoked_at IS NULL`, hash).
		Scan(&c.ID, &kind, &c.Name, &env, &sesn, &work, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Credential{}, storage.ErrNotFound
	}
	if err != nil {
		return storage.Credential{}, fmt.Errorf("look up credential: %w", err)
	}
	c.Kind = storage.CredentialKind(kind)
	c.EnvironmentID, c.SessionID, c.WorkID = env.String, sesn.String, work.String
	if c.CreatedAt, err = parseTime(created); err != nil {
		return storage.Credential{}, err
	}
	return c, nil
}

// CountCredentials implements storage.Credentials.
func (s *DB) CountCredentials(ctx context.Context, kind storage.CredentialKind) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM credentials WHERE kind = ? AND revoked_at IS NULL`, string(kind)).Scan(&n)
	return n, err
}
