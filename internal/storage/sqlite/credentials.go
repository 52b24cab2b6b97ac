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
	if err := insertCredential(ctx, s.db, c, hash); err != nil {
		return fmt.Errorf("create credential %s: %w", c.ID, err)
	}
	return nil
}

func insertCredential(ctx context.Context, q queryer, c storage.Credential, hash string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO credentials (id, kind, name, hash, environment_id, session_id, work_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, string(c.Kind), c.Name, hash, nullString(c.EnvironmentID), nullString(c.SessionID), nullString(c.WorkID), formatTime(c.CreatedAt))
	return err
}

// CredentialByHash implements storage.Credentials.
func (s *DB) CredentialByHash(ctx context.Context, hash string) (storage.Credential, error) {
	// Every request runs this lookup: a prepared statement spares it a parse.
	c, err := scanCredential(s.cached(nil).QueryRowContext(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE hash = ? AND revoked_at IS NULL`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Credential{}, storage.ErrNotFound
	}
	if err != nil {
		return storage.Credential{}, fmt.Errorf("look up credential: %w", err)
	}
	return c, nil
}

const credentialColumns = `id, kind, name, environment_id, session_id, work_id, created_at`

func scanCredential(r rowScanner) (storage.Credential, error) {
	var (
		c               storage.Credential
		kind, created   string
		env, sesn, work sql.NullString
	)
	if err := r.Scan(&c.ID, &kind, &c.Name, &env, &sesn, &work, &created); err != nil {
		return storage.Credential{}, err
	}
	c.Kind = storage.CredentialKind(kind)
	c.EnvironmentID, c.SessionID, c.WorkID = env.String, sesn.String, work.String
	var err error
	c.CreatedAt, err = parseTime(created)
	return c, err
}

// ListEnvironmentKeys implements storage.Credentials.
func (s *DB) ListEnvironmentKeys(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Credential, error) {
	return queryAll(ctx, s.db, scanCredential, `SELECT `+credentialColumns+` FROM credentials
		WHERE kind = 'environment_key' AND revoked_at IS NULL AND environment_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		environmentID, q.After, q.After, limitArg(q.Limit))
}

// RevokeEnvironmentKey implements storage.Credentials.
func (s *DB) RevokeEnvironmentKey(ctx context.Context, environmentID, keyID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE credentials SET revoked_at = ? WHERE id = ? AND kind = 'environment_key' AND environment_id = ? AND revoked_at IS NULL`,
		formatTime(s.now()), keyID, environmentID)
	if err != nil {
		return fmt.Errorf("revoke environment key %s: %w", keyID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// CountCredentials implements storage.Credentials.
func (s *DB) CountCredentials(ctx context.Context, kind storage.CredentialKind) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM credentials WHERE kind = ? AND revoked_at IS NULL`, string(kind)).Scan(&n)
	return n, err
}
