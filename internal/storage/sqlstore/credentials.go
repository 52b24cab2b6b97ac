package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/memstore/memstore/internal/storage"
)

const credentialColumns = `id, kind, name, environment_id, session_id, work_id, created_at`

// CreateCredential implements storage.Credentials.
func (s *Store) CreateCredential(ctx context.Context, c storage.Credential, hash string) error {
	if c.CreatedAt.IsZero() {
		now, err := s.b.Now(ctx, s.db())
		if err != nil {
			return err
		}
		c.CreatedAt = now
	}
	if err := insertCredential(ctx, s.db(), c, hash); err != nil {
		return fmt.Errorf("create credential %s: %w", c.ID, err)
	}
	return nil
}

func insertCredential(ctx context.Context, q Conn, c storage.Credential, hash string) error {
	_, err := q.Exec(ctx, insertCredentialSQL, credentialArgs(c, hash)...)
	return err
}

const insertCredentialSQL = `INSERT INTO credentials (id, kind, name, hash, environment_id, session_id, work_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

func credentialArgs(c storage.Credential, hash string) []any {
	return []any{c.ID, string(c.Kind), c.Name, hash, nullString(c.EnvironmentID), nullString(c.SessionID), nullString(c.WorkID), c.CreatedAt}
}

// CredentialByHash implements storage.Credentials.
func (s *Store) CredentialByHash(ctx context.Context, hash string) (storage.Credential, error) {
	return scanCredential(s.db().QueryRow(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE hash = ? AND revoked_at IS NULL`, hash))
}

// CountCredentials implements storage.Credentials.
func (s *Store) CountCredentials(ctx context.Context, kind storage.CredentialKind) (int, error) {
	var n int
	err := s.db().QueryRow(ctx, `SELECT count(*) FROM credentials WHERE kind = ? AND revoked_at IS NULL`, string(kind)).Scan(&n)
	return n, err
}

// ListEnvironmentKeys implements storage.Credentials.
func (s *Store) ListEnvironmentKeys(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Credential, error) {
	return queryAll(ctx, s.db(), scanCredential, `SELECT `+credentialColumns+` FROM credentials
		WHERE kind = 'environment_key' AND revoked_at IS NULL AND environment_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		environmentID, q.After, q.After, limitArg(q.Limit))
}

func scanCredential(r Row) (storage.Credential, error) {
	var (
		c               storage.Credential
		kind            string
		env, sesn, work *string
	)
	if err := r.Scan(&c.ID, &kind, &c.Name, &env, &sesn, &work, &c.CreatedAt); err != nil {
		return storage.Credential{}, err
	}
	c.Kind = storage.CredentialKind(kind)
	c.EnvironmentID, c.SessionID, c.WorkID = deref(env), deref(sesn), deref(work)
	return c, nil
}

// RevokeEnvironmentKey implements storage.Credentials.
func (s *Store) RevokeEnvironmentKey(ctx context.Context, environmentID, keyID string) error {
	now, err := s.b.Now(ctx, s.db())
	if err != nil {
		return err
	}
	n, err := s.db().Exec(ctx, `UPDATE credentials SET revoked_at = ? WHERE id = ? AND kind = 'environment_key' AND environment_id = ? AND revoked_at IS NULL`,
		now, keyID, environmentID)
	if err != nil {
		return fmt.Errorf("revoke environment key %s: %w", keyID, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// ---- users and their console sessions ----

const userColumns = `id, name, password_hash, created_at`

// CreateUser implements storage.Users.
func (s *Store) CreateUser(ctx context.Context, u storage.User) error {
	if u.CreatedAt.IsZero() {
		now, err := s.b.Now(ctx, s.db())
		if err != nil {
			return err
		}
		u.CreatedAt = now
	}
	_, err := s.db().Exec(ctx, `INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?)`, u.ID, u.Name, u.PasswordHash, u.CreatedAt)
	if s.b.Duplicate(err, "users", "name") {
		return storage.ErrUserExists
	}
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Name, err)
	}
	return nil
}

func scanUser(r Row) (storage.User, error) {
	var u storage.User
	err := r.Scan(&u.ID, &u.Name, &u.PasswordHash, &u.CreatedAt)
	return u, err
}

// UserByName implements storage.Users.
func (s *Store) UserByName(ctx context.Context, name string) (storage.User, error) {
	return scanUser(s.db().QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE name = ?`, name))
}

// UserByID implements storage.Users.
func (s *Store) UserByID(ctx context.Context, id string) (storage.User, error) {
	return scanUser(s.db().QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
}

// ListUsers implements storage.Users, by name in byte order whatever the
// database's collation.
func (s *Store) ListUsers(ctx context.Context) ([]storage.User, error) {
	out, err := queryAll(ctx, s.db(), scanUser, `SELECT `+userColumns+` FROM users`)
	slices.SortFunc(out, func(a, b storage.User) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// SetUserPassword implements storage.Users: the new hash and the end of
// the user's console sessions commit together.
func (s *Store) SetUserPassword(ctx context.Context, userID, hash string) error {
	return s.write(ctx, func(tx *tx) error {
		n, err := tx.Exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, userID)
		if err != nil {
			return fmt.Errorf("set the password of user %s: %w", userID, err)
		}
		if n == 0 {
			return storage.ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM console_sessions WHERE user_id = ?`, userID)
		return err
	})
}

// DeleteUser implements storage.Users; the foreign key's cascade ends the
// user's console sessions.
func (s *Store) DeleteUser(ctx context.Context, userID string) error {
	n, err := s.db().Exec(ctx, `DELETE FROM users WHERE id = ?`, userID)
	if err != nil {
		return fmt.Errorf("delete user %s: %w", userID, err)
	}
	if n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// CreateConsoleSession implements storage.Users.
func (s *Store) CreateConsoleSession(ctx context.Context, cs storage.ConsoleSession, hash string) error {
	if cs.CreatedAt.IsZero() {
		now, err := s.b.Now(ctx, s.db())
		if err != nil {
			return err
		}
		cs.CreatedAt = now
	}
	if _, err := s.db().Exec(ctx, `INSERT INTO console_sessions (id, user_id, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		cs.ID, cs.UserID, hash, cs.CreatedAt, cs.ExpiresAt); err != nil {
		return fmt.Errorf("create console session for user %s: %w", cs.UserID, err)
	}
	return nil
}

// ConsoleSessionByHash implements storage.Users; expiry is judged by the
// backend's clock.
func (s *Store) ConsoleSessionByHash(ctx context.Context, hash string) (storage.ConsoleSession, storage.User, error) {
	var (
		cs storage.ConsoleSession
		u  storage.User
	)
	now, err := s.b.Now(ctx, s.db())
	if err != nil {
		return cs, u, err
	}
	err = s.db().QueryRow(ctx, `SELECT c.id, c.user_id, c.created_at, c.expires_at, u.name, u.password_hash, u.created_at
		FROM console_sessions c JOIN users u ON u.id = c.user_id WHERE c.hash = ? AND c.expires_at > ?`, hash, now).
		Scan(&cs.ID, &cs.UserID, &cs.CreatedAt, &cs.ExpiresAt, &u.Name, &u.PasswordHash, &u.CreatedAt)
	if err != nil {
		return storage.ConsoleSession{}, storage.User{}, err
	}
	u.ID = cs.UserID
	return cs, u, nil
}

// DeleteConsoleSession implements storage.Users.
func (s *Store) DeleteConsoleSession(ctx context.Context, hash string) error {
	_, err := s.db().Exec(ctx, `DELETE FROM console_sessions WHERE hash = ?`, hash)
	return err
}
