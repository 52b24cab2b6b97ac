package storage

import (
	"context"
	"errors"
	"time"
)

// User is a person who signs in to the web console. Changes made through
// the console are attributed to them as a user_actor.
type User struct {
	ID   string
	Name string
	// PasswordHash is the encoded password hash (the console decides the
	// KDF and its parameters; storage keeps the string).
	PasswordHash string
	CreatedAt    time.Time
}

// ConsoleSession is a signed-in browser. Its secret lives only in the
// browser's cookie; storage keeps the SHA-256 of it.
type ConsoleSession struct {
	ID        string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Users persists console users and their browser sessions. They are apart
// from Credentials on purpose: a console session never authenticates an API
// request, and an API key never opens the console.
type Users interface {
	// CreateUser stores a new user; ErrUserExists when the name is taken.
	CreateUser(ctx context.Context, u User) error
	// UserByName returns the user with that name, or ErrNotFound.
	UserByName(ctx context.Context, name string) (User, error)
	// UserByID returns the user with that id, or ErrNotFound (a deleted
	// user, whose changes still name them).
	UserByID(ctx context.Context, id string) (User, error)
	// ListUsers lists users by name.
	ListUsers(ctx context.Context) ([]User, error)
	// SetUserPassword replaces a user's password hash and ends all the
	// user's console sessions, so a changed password logs out every browser.
	SetUserPassword(ctx context.Context, userID, hash string) error
	// DeleteUser deletes a user and ends their console sessions at once.
	DeleteUser(ctx context.Context, userID string) error

	// CreateConsoleSession stores a session under the hash of its secret.
	CreateConsoleSession(ctx context.Context, s ConsoleSession, hash string) error
	// ConsoleSessionByHash returns a session that has not expired (by the
	// store's clock) and its user; ErrNotFound otherwise.
	ConsoleSessionByHash(ctx context.Context, hash string) (ConsoleSession, User, error)
	// DeleteConsoleSession ends one session (logout); ending an unknown one
	// is not an error.
	DeleteConsoleSession(ctx context.Context, hash string) error
}

// ErrUserExists reports a user name that is already taken.
var ErrUserExists = errors.New("storage: a user with this name exists")
