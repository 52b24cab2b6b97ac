package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// environmentsPage lists environments newest first, a page at a time;
// with a name filter it reads on, like the tree's filter, until a page of
// matches or the end, and its paging link keeps the filter.
func (c *Console) environmentsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	query := storage.ListQuery{Limit: api.MaxListLimit, IncludeArchived: true, After: r.URL.Query().Get("after")}
	if query.After != "" && !ids.Valid(ids.Environment, query.After) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	var shown []storage.Environment
	next := ""
	for {
		envs, err := c.store.ListEnvironments(r.Context(), query)
		if err != nil {
			return err
		}
		for i, e := range envs {
			if name == "" || strings.Contains(strings.ToLower(e.Name), strings.ToLower(name)) {
				shown = append(shown, e)
			}
			if len(shown) == api.MaxListLimit && (i < len(envs)-1 || len(envs) == query.Limit) {
				next = e.ID
				break
			}
		}
		if next != "" || len(envs) < query.Limit {
			break
		}
		query.After = envs[len(envs)-1].ID
	}
	return c.render(w, r, q, http.StatusOK, "environments", "Environments", struct {
		Environments []storage.Environment
		Next, Name   string
	}{shown, next, name})
}

type environmentView struct {
	Environment storage.Environment
	Stats       api.WorkQueueStats
	Work        []storage.Work
	// Workers are the workers serving sessions now, with how many each.
	Workers []workerLoad
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
	if v.Workers, err = workerLoads(r.Context(), c.store, id); err != nil {
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
