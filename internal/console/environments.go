package console

import (
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func (c *Console) environmentsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	envs, err := c.store.ListEnvironments(r.Context(), storage.ListQuery{Limit: api.MaxListLimit, IncludeArchived: true, After: r.URL.Query().Get("after")})
	if err != nil {
		return err
	}
	next := ""
	if len(envs) == api.MaxListLimit {
		next = envs[len(envs)-1].ID
	}
	return c.render(w, r, q, http.StatusOK, "environments", "Environments", struct {
		Environments []storage.Environment
		Next         string
	}{envs, next})
}

type environmentView struct {
	Environment storage.Environment
	Stats       api.WorkQueueStats
	Work        []storage.Work
	// Keys are the environment's live worker keys (never their secrets).
	Keys []storage.Credential
	// NewKey is a key just minted: shown this once.
	NewKey *api.EnvironmentKey
	Error  string
}

// environmentWorkShown is how many of an environment's newest work items
// its page lists.
const environmentWorkShown = 50

func (c *Console) environmentPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showEnvironment(w, r, q, http.StatusOK, environmentView{})
}

func (c *Console) showEnvironment(w http.ResponseWriter, r *http.Request, q *request, status int, v environmentView) error {
	id := r.PathValue("env")
	if !ids.Valid(ids.Environment, id) {
		return notFound("%q is not an environment id; pick one from the list", id)
	}
	var err error
	v.Environment, err = c.store.GetEnvironment(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return notFound("environment %s does not exist (it may have been deleted); pick one from the list", id)
	}
	if err != nil {
		return err
	}
	if v.Stats, err = c.app.Work.QueueStats(r.Context(), id); err != nil {
		return err
	}
	if v.Work, err = c.store.ListWork(r.Context(), id, storage.ListQuery{Limit: environmentWorkShown}); err != nil {
		return err
	}
	if v.Keys, err = c.store.ListEnvironmentKeys(r.Context(), id, storage.ListQuery{Limit: api.MaxListLimit}); err != nil {
		return err
	}
	return c.render(w, r, q, status, "environment", "Environment "+v.Environment.Name, v)
}

// mintKey makes a worker key for the environment and shows it once.
func (c *Console) mintKey(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("env")
	if !ids.Valid(ids.Environment, id) {
		return notFound("%q is not an environment id; pick one from the list", id)
	}
	env, err := c.store.GetEnvironment(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return notFound("environment %s does not exist (it may have been deleted); pick one from the list", id)
	}
	if err != nil {
		return err
	}
	k, err := c.app.Environments.MintKey(r.Context(), env.ID, r.PostFormValue("name"), q.Caller())
	if msg := invalid(err); msg != "" {
		return c.showEnvironment(w, r, q, http.StatusBadRequest, environmentView{Error: msg})
	}
	if err != nil {
		return err
	}
	return c.showEnvironment(w, r, q, http.StatusOK, environmentView{NewKey: &k})
}

// revokeKey revokes a worker key at once: its workers' next poll is
// refused; items they already claimed run on with their sessions tokens.
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, q *request) error {
	env, key := r.PathValue("env"), r.PathValue("key")
	if !ids.Valid(ids.Environment, env) {
		return notFound("%q is not an environment id; pick one from the list", env)
	}
	if !ids.Valid(ids.EnvironmentKey, key) {
		return notFound("%q is not an environment key id; pick a key on the environment's page", key)
	}
	err := c.app.Environments.RevokeKey(r.Context(), env, key, q.Caller())
	if errors.Is(err, storage.ErrNotFound) {
		return c.showEnvironment(w, r, q, http.StatusNotFound, environmentView{Error: "Nothing was revoked: " + key + " is not a live key of this environment (it may have been revoked already)."})
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/console/environments/"+env, http.StatusSeeOther)
	return nil
}
