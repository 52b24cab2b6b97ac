package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memstore/memstore/internal/storage"
)

// CreateUser implements storage.Users.
func (s *DB) CreateUser(ctx context.Context, u storage.User) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if u.CreatedAt.IsZero() {
			now, err := s.now(ctx, tx)
			if err != nil {
				return err
			}
			u.CreatedAt = now
		}
		_, err := tx.Exec(ctx, `INSERT INTO users (id, name, password_hash, created_at) VALUES ($1, $2, $3, $4)`,
			u.ID, u.Name, u.PasswordHash, u.CreatedAt)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "users_name_key" {
			return storage.ErrUserExists
		}
		if err != nil {
			return fmt.Errorf("create user %q: %w", u.Name, err)
		}
		return nil
	})
}

func scanUser(r pgx.Row) (storage.User, error) {
	var u storage.User
	err := r.Scan(&u.ID, &u.Name, &u.PasswordHash, &u.CreatedAt)
	return u, err
}

// UserByName implements storage.Users.
func (s *DB) UserByName(ctx context.Context, name string) (storage.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT id, name, password_hash, created_at FROM users WHERE name = $1`, name))
	return u, unavailable(notFound(err))
}

// UserByID implements storage.Users.
func (s *DB) UserByID(ctx context.Context, id string) (storage.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT id, name, password_hash, created_at FROM users WHERE id = $1`, id))
	return u, unavailable(notFound(err))
}

// ListUsers implements storage.Users.
func (s *DB) ListUsers(ctx context.Context) ([]storage.User, error) {
	out, err := queryAll(ctx, s.pool, scanUser, `SELECT id, name, password_hash, created_at FROM users ORDER BY name COLLATE "C"`)
	return out, unavailable(err)
}

// SetUserPassword implements storage.Users: the new hash and the end of
// the user's console sessions commit together.
func (s *DB) SetUserPassword(ctx context.Context, userID, hash string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, hash, userID)
		if err != nil {
			return fmt.Errorf("set the password of user %s: %w", userID, err)
		}
		if tag.RowsAffected() == 0 {
			return storage.ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM console_sessions WHERE user_id = $1`, userID)
		return err
	})
}

// DeleteUser implements storage.Users; the foreign key's cascade ends the
// user's console sessions.
func (s *DB) DeleteUser(ctx context.Context, userID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, userID)
	if err != nil {
		return unavailable(fmt.Errorf("delete user %s: %w", userID, err))
	}
	if tag.RowsAffected() == 0 {
		return storage.ErrNotFound
	}
	return nil
}

// CreateConsoleSession implements storage.Users.
func (s *DB) CreateConsoleSession(ctx context.Context, cs storage.ConsoleSession, hash string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if cs.CreatedAt.IsZero() {
			now, err := s.now(ctx, tx)
			if err != nil {
				return err
			}
			cs.CreatedAt = now
		}
		if _, err := tx.Exec(ctx, `INSERT INTO console_sessions (id, user_id, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			cs.ID, cs.UserID, hash, cs.CreatedAt, cs.ExpiresAt); err != nil {
			return fmt.Errorf("create console session for user %s: %w", cs.UserID, err)
		}
		return nil
	})
}

// ConsoleSessionByHash implements storage.Users; expiry is judged by the
// backend's clock.
func (s *DB) ConsoleSessionByHash(ctx context.Context, hash string) (storage.ConsoleSession, storage.User, error) {
	var (
		cs storage.ConsoleSession
		u  storage.User
	)
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return cs, u, unavailable(err)
	}
	err = s.pool.QueryRow(ctx, `SELECT c.id, c.user_id, c.created_at, c.expires_at, u.name, u.password_hash, u.created_at
		FROM console_sessions c JOIN users u ON u.id = c.user_id WHERE c.hash = $1 AND c.expires_at > $2`, hash, now).
		Scan(&cs.ID, &cs.UserID, &cs.CreatedAt, &cs.ExpiresAt, &u.Name, &u.PasswordHash, &u.CreatedAt)
	if err != nil {
		return storage.ConsoleSession{}, storage.User{}, unavailable(notFound(err))
	}
	u.ID = cs.UserID
	return cs, u, nil
}

// DeleteConsoleSession implements storage.Users.
func (s *DB) DeleteConsoleSession(ctx context.Context, hash string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE hash = $1`, hash)
	return unavailable(err)
}
