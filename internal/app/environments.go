package app

import (
	"context"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// EnvironmentKeyPrefix starts every environment key, so a leaked one is
// recognisable.
const EnvironmentKeyPrefix = "sk-memstore-env-"

// Environments mints and revokes the keys workers poll an environment
// with.
type Environments struct{ app *App }

// MintKey makes a key for an existing environment, stored hashed; the
// returned object is the only place its secret ever appears. name is
// optional.
func (e *Environments) MintKey(ctx context.Context, environmentID, name string, by Caller) (api.EnvironmentKey, error) {
	if name != "" {
		if err := validate.Name("name", name); err != nil {
			return api.EnvironmentKey{}, err
		}
	}
	if _, err := e.app.store.GetEnvironment(ctx, environmentID); err != nil {
		return api.EnvironmentKey{}, err
	}
	now := e.app.now()
	key := secret.New(EnvironmentKeyPrefix)
	c := storage.Credential{ID: ids.NewAt(ids.EnvironmentKey, now), Kind: storage.EnvironmentKey, Name: name, EnvironmentID: environmentID, CreatedAt: now}
	if err := e.app.store.CreateCredential(ctx, c, secret.Hash(key)); err != nil {
		return api.EnvironmentKey{}, err
	}
	e.app.log.InfoContext(ctx, "environment key created", "environment_id", environmentID, "key_id", c.ID, by.attr())
	return api.EnvironmentKey{Type: "environment_key", ID: c.ID, EnvironmentID: environmentID, Name: name, Key: key, CreatedAt: now}, nil
}

// RevokeKey revokes a live key of an environment at once: from the next
// request on it is refused everywhere, like a key that never existed.
// Items its workers already claimed run on with their own sessions
// tokens. A key that is not live is storage.ErrNotFound.
func (e *Environments) RevokeKey(ctx context.Context, environmentID, keyID string, by Caller) error {
	err := e.app.store.RevokeEnvironmentKey(ctx, environmentID, keyID)
	e.app.Credentials.Revoked()
	if err != nil {
		return err
	}
	e.app.log.InfoContext(ctx, "environment key revoked", "environment_id", environmentID, "key_id", keyID, by.attr())
	return nil
}
