package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/validate"
)

const (
	maxAgentDescriptionChars = 2048
	maxModelIDChars          = 256
)

func (s *Server) agentRoutes() {
	s.mux.HandleFunc("POST /v1/agents", s.authed(s.createAgent))
	s.mux.HandleFunc("GET /v1/agents", s.authed(s.listAgents))
	s.mux.HandleFunc("GET /v1/agents/{agent}", s.authed(s.getAgent))
	s.mux.HandleFunc("POST /v1/agents/{agent}/archive", s.authed(s.archiveAgent))
}

func agentID(r *http.Request) (string, error) {
	id := r.PathValue("agent")
	return id, checkID(ids.Agent, "agent", id)
}

// wireAgent fills the fields an agent always shows.
func wireAgent(a api.Agent) api.Agent {
	a.Type = "agent"
	for _, f := range []*[]json.RawMessage{&a.Tools, &a.Skills, &a.MCPServers} {
		if *f == nil {
			*f = []json.RawMessage{}
		}
	}
	if a.Metadata == nil {
		a.Metadata = map[string]string{}
	}
	if a.ExecutionIdentity.Type == "" {
		a.ExecutionIdentity.Type = "service_account"
	}
	return a
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateAgentRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := validate.Name("name", req.Name); err != nil {
		return err
	}
	if req.Model.ID == "" {
		return apiErrorf(invalidRequest, "model is required: send \"%s\" (or {\"id\":\"%s\"}) for memstore's deterministic runtime", api.ScriptedModel, api.ScriptedModel)
	}
	if err := validate.Text("model.id", req.Model.ID, maxModelIDChars); err != nil {
		return err
	}
	a := api.Agent{SessionAgent: api.SessionAgent{Name: req.Name, Model: req.Model, Tools: req.Tools}, Metadata: req.Metadata}
	if req.Description != nil {
		if err := validate.Text("description", *req.Description, maxAgentDescriptionChars); err != nil {
			return err
		}
		a.Description = *req.Description
	}
	if req.System != nil {
		if err := validate.Text("system", *req.System, api.MaxAgentSystemChars); err != nil {
			return err
		}
		a.System = *req.System
	}
	for i, t := range req.Tools {
		var head struct {
			Type string `json:"type"`
		}
		if len(bytes.TrimSpace(t)) == 0 || bytes.TrimSpace(t)[0] != '{' || json.Unmarshal(t, &head) != nil || head.Type == "" {
			return apiErrorf(invalidRequest, "tools[%d] must be an object with a type, such as {\"type\":\"agent_toolset_20260401\"}", i)
		}
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return err
	}
	skills, err := s.app.Skills.CheckAgentSkills(r.Context(), req.Skills)
	if err != nil {
		return err
	}
	a.Skills = skills
	now := s.now()
	a.ID, a.Version, a.CreatedAt, a.UpdatedAt = ids.NewAt(ids.Agent, now), 1, now, now
	a = wireAgent(a)
	if err := s.store.CreateAgent(r.Context(), a); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "agent created", "agent_id", a.ID, "model", a.Model.ID)
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
	writeJSON(w, http.StatusOK, wireAgent(a))
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
	writeJSON(w, http.StatusOK, cutPage(l, list, func(a api.Agent) string { return a.ID }, wireAgent))
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
	a, err := s.store.UpdateAgent(r.Context(), id, func(a *api.Agent) error {
		if a.ArchivedAt == nil {
			now := s.now()
			a.ArchivedAt, a.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return orMissing(err, "agent", id, listAgents)
	}
	writeJSON(w, http.StatusOK, wireAgent(a))
	return nil
}
