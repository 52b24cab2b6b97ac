package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func (s *Server) environmentRoutes() {
	s.mux.HandleFunc("POST /v1/environments", s.authed(s.createEnvironment))
	s.mux.HandleFunc("GET /v1/environments", s.authed(s.listEnvironments))
	s.mux.HandleFunc("GET /v1/environments/{env}", s.authed(s.getEnvironment))
	s.mux.HandleFunc("POST /v1/environments/{env}", s.authed(s.updateEnvironment))
	s.mux.HandleFunc("DELETE /v1/environments/{env}", s.authed(s.deleteEnvironment))
	s.mux.HandleFunc("POST /v1/environments/{env}/archive", s.authed(s.archiveEnvironment))
	s.mux.HandleFunc("POST /v1/environments/{env}/keys", s.authed(s.createEnvironmentKey))
	s.mux.HandleFunc("GET /v1/environments/{env}/keys", s.authed(s.listEnvironmentKeys))
	s.mux.HandleFunc("DELETE /v1/environments/{env}/keys/{key}", s.authed(s.revokeEnvironmentKey))
}

// environmentID validates the {env} path segment.
func environmentID(r *http.Request) (string, error) {
	id := r.PathValue("env")
	return id, checkID(ids.Environment, "environment", id)
}

// environment reads environment id, answering 404 when there is none.
func (s *Server) environment(ctx context.Context, id string) (storage.Environment, error) {
	e, err := s.store.GetEnvironment(ctx, id)
	return e, orMissing(err, "environment", id, listEnvironments)
}

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateEnvironmentRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	e, err := s.app.Environments.Create(r.Context(), req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireEnvironment(e))
	return nil
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	l, err := listParams(q, "environments", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	archived, err := boolParam(q, "include_archived")
	if err != nil {
		return err
	}
	list, err := s.store.ListEnvironments(r.Context(), l.query(archived))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(e storage.Environment) string { return e.ID }, wireEnvironment))
	return nil
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	if err := requireEnvironmentScope(p, id); err != nil {
		return err
	}
	e, err := s.environment(r.Context(), id)
	if err != nil {
		return err
	}
	advertise(w) // a worker learns here whether it may recover leftovers (api.ExtensionRecoveries)
	writeJSON(w, http.StatusOK, wireEnvironment(e))
	return nil
}

func (s *Server) updateEnvironment(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	var req api.UpdateEnvironmentRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	e, err := s.app.Environments.Update(r.Context(), id, req, p.Caller())
	if err != nil {
		return orMissing(err, "environment", id, listEnvironments)
	}
	writeJSON(w, http.StatusOK, wireEnvironment(e))
	return nil
}

func (s *Server) archiveEnvironment(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	e, err := s.app.Environments.Archive(r.Context(), id, p.Caller())
	if err != nil {
		return orMissing(err, "environment", id, listEnvironments)
	}
	writeJSON(w, http.StatusOK, wireEnvironment(e))
	return nil
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	switch err := s.app.Environments.Delete(r.Context(), id, p.Caller()); {
	case errors.Is(err, storage.ErrEnvironmentInUse):
		return apiErrorf(api.Conflict, "environment %s still has sessions; delete them first (GET /v1/sessions?environment_id=%s lists them), or archive the environment instead", id, id)
	case err != nil:
		return orMissing(err, "environment", id, listEnvironments)
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: id, Type: api.EnvironmentDeletedType})
	return nil
}

// createEnvironmentKey mints a key that serves one environment's queue.
// Only its hash is kept: the key is in this response and nowhere else.
func (s *Server) createEnvironmentKey(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	e, err := s.environment(r.Context(), id)
	if err != nil {
		return err
	}
	var req api.CreateEnvironmentKeyRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	k, err := s.app.Environments.MintKey(r.Context(), e.ID, req.Name, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

// wireEnvironmentKey is a stored key without its secret, which only the
// response that minted it carried.
func wireEnvironmentKey(c storage.Credential) api.EnvironmentKey {
	return api.EnvironmentKey{Type: "environment_key", ID: c.ID, EnvironmentID: c.EnvironmentID, Name: c.Name, CreatedAt: c.CreatedAt}
}

// listEnvironmentKeys lists an environment's live keys, newest first, so an
// operator can find the one to revoke. Secrets are never shown again.
func (s *Server) listEnvironmentKeys(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := environmentID(r)
	if err != nil {
		return err
	}
	l, err := listParams(r.URL.Query(), "environment_keys:"+id, api.MaxListLimit, false)
	if err != nil {
		return err
	}
	if _, err := s.environment(r.Context(), id); err != nil {
		return err
	}
	keys, err := s.store.ListEnvironmentKeys(r.Context(), id, l.query(false))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, keys, func(c storage.Credential) string { return c.ID }, wireEnvironmentKey))
	return nil
}

// revokeEnvironmentKey revokes one key at once: from the next request on,
// it is refused everywhere (401), like a key that never existed. Items its
// workers already claimed run on with their own sessions tokens.
func (s *Server) revokeEnvironmentKey(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	env, err := environmentID(r)
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	if err := checkID(ids.EnvironmentKey, "environment key", key); err != nil {
		return err
	}
	if _, err := s.environment(r.Context(), env); err != nil {
		return err
	}
	if err := s.app.Environments.RevokeKey(r.Context(), env, key, p.Caller()); err != nil {
		return orMissing(err, "environment key", key, "GET /v1/environments/"+env+"/keys")
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: key, Type: api.EnvironmentKeyDeletedType})
	return nil
}
