package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/memstore/memstore/internal/storage"
)

// CreateUser implements storage.Users.
func (s *DB) CreateUser(ctx context.Context, u storage.User) error {
	if u.CreatedAt.IsZero() {
		u.CreatedAt = s.now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO users (id, name, password_hash, created_at) VALUES (?, ?, ?, ?)`,
		u.ID, u.Name, u.PasswordHash, formatTime(u.CreatedAt))
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: users.name") {
		return storage.ErrUserExists
	}
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Name, err)
	}
	return nil
}

func scanUser(row interface{ Scan(...any) error }) (storage.User, error) {
	var (
		u       storage.User
		created string
	)
	err := row.Scan(&u.ID, &u.Name, &u.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.User{}, storage.ErrNotFound
	}
	if err != nil {
		return storage.User{}, err
	}
	u.CreatedAt, err = parseTime(created)
	return u, err
}

// UserByName implements storage.Users.
func (s *DB) UserByName(ctx context.Context, name string) (storage.User, error) {
	return scanUser(s.db.QueryRowContext(ctx, `SELECT id, name, password_hash, created_at FROM users WHERE name = ?`, name))
}

// UserByID implements storage.Users.
func (s *DB) UserByID(ctx context.Context, id string) (storage.User, error) {
	return scanUser(s.db.QueryRowContext(ctx, `SELECT id, name, password_hash, created_at FROM users WHERE id = ?`, id))
}

// ListUsers implements storage.Users.
func (s *DB) ListUsers(ctx context.Context) ([]storage.User, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, password_hash, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// SetUserPassword implements storage.Users.
func (s *DB) SetUserPassword(ctx context.Context, userID, hash string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, userID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return storage.ErrNotFound
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE user_id = ?`, userID)
		return err
	})
}

// DeleteUser implements storage.Users.
func (s *DB) DeleteUser(ctx context.Context, userID string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, userID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// CreateConsoleSession implements storage.Users.
func (s *DB) CreateConsoleSession(ctx context.Context, cs storage.ConsoleSession, hash string) error {
	if cs.CreatedAt.IsZero() {
		cs.CreatedAt = s.now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO console_sessions (id, user_id, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		cs.ID, cs.UserID, hash, formatTime(cs.CreatedAt), formatTime(cs.ExpiresAt))
	if err != nil {
		return fmt.Errorf("create console session for user %s: %w", cs.UserID, err)
	}
	return nil
}

// ConsoleSessionByHash implements storage.Users.
func (s *DB) ConsoleSessionByHash(ctx context.Context, hash string) (storage.ConsoleSession, storage.User, error) {
	var (
		cs                storage.ConsoleSession
		u                 storage.User
		csCreated, expiry string
		uCreated          string
	)
	err := s.db.QueryRowContext(ctx, `SELECT c.id, c.user_id, c.created_at, c.expires_at, u.name, u.password_hash, u.created_at
		FROM console_sessions c JOIN users u ON u.id = c.user_id WHERE c.hash = ? AND c.expires_at > ?`, hash, formatTime(s.now())).
		Scan(&cs.ID, &cs.UserID, &csCreated, &expiry, &u.Name, &u.PasswordHash, &uCreated)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ConsoleSession{}, storage.User{}, storage.ErrNotFound
	}
	if err != nil {
		return storage.ConsoleSession{}, storage.User{}, fmt.Errorf("look up console session: %w", err)
	}
	u.ID = cs.UserID
	if cs.CreatedAt, err = parseTime(csCreated); err != nil {
		return cs, u, err
	}
	if cs.ExpiresAt, err = parseTime(expiry); err != nil {
		return cs, u, err
	}
	u.CreatedAt, err = parseTime(uCreated)
	return cs, u, err
}

// DeleteConsoleSession implements storage.Users.
func (s *DB) DeleteConsoleSession(ctx context.Context, hash string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM console_sessions WHERE hash = ?`, hash)
	return err
}
