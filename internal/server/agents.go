package server

import (
	"net/http"
	"strconv"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
)

func (s *Server) agentRoutes() {
	s.mux.HandleFunc("POST /v1/agents", s.authed(s.createAgent))
	s.mux.HandleFunc("GET /v1/agents", s.authed(s.listAgents))
	s.mux.HandleFunc("GET /v1/agents/{agent}", s.authed(s.getAgent))
	s.mux.HandleFunc("POST /v1/agents/{agent}", s.authed(s.updateAgent))
	s.mux.HandleFunc("POST /v1/agents/{agent}/archive", s.authed(s.archiveAgent))
}

func agentID(r *http.Request) (string, error) {
	id := r.PathValue("agent")
	return id, checkID(ids.Agent, "agent", id)
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateAgentRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	a, err := s.app.Agents.Create(r.Context(), req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := agentID(r)
	if err != nil {
		return err
	}
	a, err := s.store.GetAgent(r.Context(), id)
	if err != nil {
		return orMissing(err, "agent", id, listAgents)
	}
	if v := r.URL.Query().Get("version"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != a.Version {
			return apiErrorf(notFound, "agent %s has no version %s; its current version is %d", id, v, a.Version)
		}
	}
	writeJSON(w, http.StatusOK, app.WireAgent(a))
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	l, err := listParams(q, "agents", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	archived, err := boolParam(q, "include_archived")
	if err != nil {
		return err
	}
	list, err := s.store.ListAgents(r.Context(), l.query(archived))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(a api.Agent) string { return a.ID }, app.WireAgent))
	return nil
}

// updateAgent makes the agent's next version from the fields sent; the
// version read must be the current one.
func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := agentID(r)
	if err != nil {
		return err
	}
	var req api.UpdateAgentRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	a, err := s.app.Agents.Update(r.Context(), id, req, p.Caller())
	if err != nil {
		return orMissing(err, "agent", id, listAgents)
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// archiveAgent retires an agent: existing sessions keep their snapshot, new
// sessions cannot name it.
func (s *Server) archiveAgent(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := agentID(r)
	if err != nil {
		return err
	}
	a, err := s.app.Agents.Archive(r.Context(), id, p.Caller())
	if err != nil {
		return orMissing(err, "agent", id, listAgents)
	}
	writeJSON(w, http.StatusOK, app.WireAgent(a))
	return nil
}
