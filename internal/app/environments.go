package app

import (
	"cmp"
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

// Environments creates, changes, archives and deletes environments, and
// mints and revokes the keys workers poll them with.
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

// Create checks a new environment (its name, description,
// config, scope and metadata) and makes it. memstore serves self-hosted
// environments only, so config is refused unless it says so.
func (e *Environments) Create(ctx context.Context, req api.CreateEnvironmentRequest, by Caller) (storage.Environment, error) {
	var errs []error
	errs = append(errs, validate.Name("name", req.Name))
	if req.Description != nil {
		errs = append(errs, validate.Description("description", *req.Description))
	}
	errs = append(errs, checkEnvironmentConfig(req.Config), checkScope(req.Scope), validate.Metadata("metadata", req.Metadata))
	if err := firstError(errs...); err != nil {
		return storage.Environment{}, err
	}
	now := e.app.now()
	env := storage.Environment{
		ID: ids.NewAt(ids.Environment, now), Name: req.Name, Description: req.Description,
		ConfigType: api.EnvironmentConfigSelfHosted, Scope: cmp.Or(req.Scope, "organization"), Metadata: req.Metadata,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := e.app.store.CreateEnvironment(ctx, env); err != nil {
		return storage.Environment{}, err
	}
	e.app.log.InfoContext(ctx, "environment created", "environment_id", env.ID, by.attr())
	return env, nil
}

// Update checks and applies a patch to an environment; the metadata is
// checked whole after the merge. A missing environment is
// storage.ErrNotFound.
func (e *Environments) Update(ctx context.Context, id string, req api.UpdateEnvironmentRequest, by Caller) (storage.Environment, error) {
	var errs []error
	if req.Name != nil {
		errs = append(errs, validate.Name("name", *req.Name))
	}
	if req.Description.Set && !req.Description.Null {
		errs = append(errs, validate.Description("description", req.Description.Value))
	}
	errs = append(errs, checkEnvironmentConfig(req.Config), checkScope(req.Scope))
	if err := firstError(errs...); err != nil {
		return storage.Environment{}, err
	}
	env, err := e.app.store.UpdateEnvironment(ctx, id, func(env *storage.Environment) error {
		if req.Name != nil {
			env.Name = *req.Name
		}
		if req.Description.Set {
			if req.Description.Null {
				env.Description = nil
			} else {
				d := req.Description.Value
				env.Description = &d
			}
		}
		if req.Scope != "" {
			env.Scope = req.Scope
		}
		md, err := patchMetadata("metadata", env.Metadata, req.Metadata)
		if err != nil {
			return err
		}
		env.Metadata = md
		env.UpdatedAt = e.app.now()
		return nil
	})
	if err != nil {
		return env, err
	}
	e.app.log.InfoContext(ctx, "environment updated", "environment_id", id, by.attr())
	return env, nil
}

// Archive archives an environment (once: archiving again changes
// nothing). New sessions cannot start on it; its queue keeps serving the
// sessions it has.
func (e *Environments) Archive(ctx context.Context, id string, by Caller) (storage.Environment, error) {
	env, err := e.app.store.UpdateEnvironment(ctx, id, func(env *storage.Environment) error {
		if env.ArchivedAt == nil {
			now := e.app.now()
			env.ArchivedAt, env.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return env, err
	}
	e.app.log.InfoContext(ctx, "environment archived", "environment_id", id, by.attr())
	return env, nil
}

// Delete deletes an environment with no sessions, and its keys, which stop
// working at once. One with sessions is storage.ErrEnvironmentInUse.
func (e *Environments) Delete(ctx context.Context, id string, by Caller) error {
	err := e.app.store.DeleteEnvironment(ctx, id)
	e.app.Credentials.Revoked() // its keys are revoked
	if err != nil {
		return err
	}
	e.app.log.InfoContext(ctx, "environment deleted", "environment_id", id, by.attr())
	return nil
}

func checkEnvironmentConfig(c *api.EnvironmentConfig) error {
	if c == nil || c.Type == api.EnvironmentConfigSelfHosted {
		return nil
	}
	if c.Type == "cloud" {
		return api.Errorf(api.InvalidRequest, "config.type \"cloud\" is Anthropic's hosted sandbox; memstore runs self-hosted environments only, so send {\"type\":\"self_hosted\"}")
	}
	return api.Errorf(api.InvalidRequest, "config.type %q is unknown; send {\"type\":\"self_hosted\"}", c.Type)
}

func checkScope(scope string) error {
	switch scope {
	case "", "organization", "account":
		return nil
	}
	return api.Errorf(api.InvalidRequest, "scope must be \"organization\" or \"account\", got %q", scope)
}
