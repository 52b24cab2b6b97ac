package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// AdminKeyPrefix starts every API key memstore generates.
const AdminKeyPrefix = "sk-memstore-"

// BootstrapAdminKey makes sure an operator can authenticate. When fromEnv is
// set (MEMSTORE_ADMIN_KEY) it is registered as an API key unless already
// known, so the variable always works. Otherwise, on a store with no API key
// at all, a key is generated and returned with generated=true: the caller
// must show it once and save it, as only its hash is kept.
func (s *Server) BootstrapAdminKey(ctx context.Context, fromEnv string) (key string, generated bool, err error) {
	if fromEnv != "" {
		_, err := s.store.CredentialByHash(ctx, HashSecret(fromEnv))
		if err == nil {
			return fromEnv, false, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return "", false, err
		}
		c := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey, Name: "admin (MEMSTORE_ADMIN_KEY)"}
		if err := s.store.CreateCredential(ctx, c, HashSecret(fromEnv)); err != nil {
			// Replicas starting together on one database race to
			// register the same key: the loser finds the winner's.
			if _, lerr := s.store.CredentialByHash(ctx, HashSecret(fromEnv)); lerr == nil {
				return fromEnv, false, nil
			}
			return "", false, fmt.Errorf("register MEMSTORE_ADMIN_KEY: %w", err)
		}
		return fromEnv, false, nil
	}
	n, err := s.store.CountCredentials(ctx, storage.APIKey)
	if err != nil || n > 0 {
		return "", false, err
	}
	key = NewSecret(AdminKeyPrefix)
	c := storage.Credential{ID: ids.New(ids.APIKey), Kind: storage.APIKey, Name: "admin (generated)"}
	if err := s.store.CreateCredential(ctx, c, HashSecret(key)); err != nil {
		return "", false, fmt.Errorf("create admin key: %w", err)
	}
	return key, true, nil
}
