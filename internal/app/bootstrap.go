package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
)

// AdminKeyPrefix starts every API key memstore generates.
const AdminKeyPrefix = "sk-memstore-"

// BootstrapAdminKey makes sure an operator can authenticate. When fromEnv is
// set (MEMSTORE_ADMIN_KEY) it is registered as an API key unless already
// known, so the variable always works. Otherwise, on a store with no API key
// at all, a key is generated and returned with generated=true: the caller
// must show it once and save it, as only its hash is kept.
func (cs *Credentials) BootstrapAdminKey(ctx context.Context, fromEnv string) (key string, generated bool, err error) {
	if fromEnv != "" {
		_, err := cs.app.store.CredentialByHash(ctx, secret.Hash(fromEnv))
		if err == nil {
			return fromEnv, false, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return "", false, err
		}
		c := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey, Name: "admin (MEMSTORE_ADMIN_KEY)"}
		if err := cs.app.store.CreateCredential(ctx, c, secret.Hash(fromEnv)); err != nil {
			// Replicas starting together on one database race to
			// register the same key: the loser finds the winner's.
			if _, lerr := cs.app.store.CredentialByHash(ctx, secret.Hash(fromEnv)); lerr == nil {
				return fromEnv, false, nil
			}
			return "", false, fmt.Errorf("register MEMSTORE_ADMIN_KEY: %w", err)
		}
		return fromEnv, false, nil
	}
	n, err := cs.app.store.CountCredentials(ctx, storage.APIKey)
	if err != nil || n > 0 {
		return "", false, err
	}
	key = secret.New(AdminKeyPrefix)
	c := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey, Name: "admin (generated)"}
	if err := cs.app.store.CreateCredential(ctx, c, secret.Hash(key)); err != nil {
		return "", false, fmt.Errorf("create admin key: %w", err)
	}
	return key, true, nil
}
