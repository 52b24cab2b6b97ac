package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// CreateUser adds a console user with a checked name and password.
func CreateUser(ctx context.Context, store storage.Users, name, password string) (storage.User, error) {
	if err := CheckUserName(name); err != nil {
		return storage.User{}, err
	}
	if err := CheckPassword(password); err != nil {
		return storage.User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return storage.User{}, err
	}
	u := storage.User{ID: ids.New(ids.User), Name: name, PasswordHash: hash}
	if err := store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, storage.ErrUserExists) {
			return storage.User{}, fmt.Errorf("user %q already exists; choose another name, or change their password with `memstore user passwd %s`", name, name)
		}
		return storage.User{}, err
	}
	return u, nil
}

// SetPassword changes a user's password, which signs them out everywhere.
func SetPassword(ctx context.Context, store storage.Users, name, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	u, err := userNamed(ctx, store, name)
	if err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return store.SetUserPassword(ctx, u.ID, hash)
}

// DeleteUser removes a user; their open console pages stop working at the
// next request.
func DeleteUser(ctx context.Context, store storage.Users, name string) error {
	u, err := userNamed(ctx, store, name)
	if err != nil {
		return err
	}
	return store.DeleteUser(ctx, u.ID)
}

func userNamed(ctx context.Context, store storage.Users, name string) (storage.User, error) {
	u, err := store.UserByName(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return u, fmt.Errorf("no user named %q; `memstore user list` lists them", name)
	}
	return u, err
}
