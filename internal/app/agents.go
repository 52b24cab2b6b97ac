package app

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/validate"
)

// Agent limits.
const (
	maxAgentDescriptionChars = 2048
	maxModelIDChars          = 256
)

// Agents creates and archives agents: the model, system prompt and tools
// a session snapshots when it starts.
type Agents struct{ app *App }

// Create checks a new agent and makes it, at version 1.
func (s *Agents) Create(ctx context.Context, req api.CreateAgentRequest, by Caller) (api.Agent, error) {
	if err := validate.Name("name", req.Name); err != nil {
		return api.Agent{}, err
	}
	if req.Model.ID == "" {
		return api.Agent{}, api.Errorf(api.InvalidRequest, "model is required: send \"%s\" (or {\"id\":\"%s\"}) for memstore's deterministic runtime", api.ScriptedModel, api.ScriptedModel)
	}
	if err := validate.Text("model.id", req.Model.ID, maxModelIDChars); err != nil {
		return api.Agent{}, err
	}
	if _, err := req.Model.Settings(); err != nil {
		return api.Agent{}, err
	}
	a := api.Agent{SessionAgent: api.SessionAgent{Name: req.Name, Model: req.Model, Tools: req.Tools}, Metadata: req.Metadata}
	if req.Description != nil {
		if err := validate.Text("description", *req.Description, maxAgentDescriptionChars); err != nil {
			return api.Agent{}, err
		}
		a.Description = *req.Description
	}
	if req.System != nil {
		if err := validate.Text("system", *req.System, api.MaxAgentSystemChars); err != nil {
			return api.Agent{}, err
		}
		a.System = *req.System
	}
	for i, t := range req.Tools {
		var head struct {
			Type string `json:"type"`
		}
		if len(bytes.TrimSpace(t)) == 0 || bytes.TrimSpace(t)[0] != '{' || json.Unmarshal(t, &head) != nil || head.Type == "" {
			return api.Agent{}, api.Errorf(api.InvalidRequest, "tools[%d] must be an object with a type, such as {\"type\":\"agent_toolset_20260401\"}", i)
		}
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return api.Agent{}, err
	}
	if err := s.app.checkMCP(ctx, req.MCPServers, req.Tools); err != nil {
		return api.Agent{}, err
	}
	a.MCPServers = req.MCPServers
	skills, err := s.app.Skills.CheckAgentSkills(ctx, req.Skills)
	if err != nil {
		return api.Agent{}, err
	}
	a.Skills = skills
	now := s.app.now()
	a.ID, a.Version, a.CreatedAt, a.UpdatedAt = ids.NewAt(ids.Agent, now), 1, now, now
	a = WireAgent(a)
	if err := s.app.store.CreateAgent(ctx, a); err != nil {
		return api.Agent{}, err
	}
	s.app.log.InfoContext(ctx, "agent created", "agent_id", a.ID, "model", a.Model.ID, by.attr())
	return a, nil
}

// Archive retires an agent (once: archiving again changes nothing):
// existing sessions keep their snapshot, new sessions cannot name it. A
// missing agent is storage.ErrNotFound.
func (s *Agents) Archive(ctx context.Context, id string, by Caller) (api.Agent, error) {
	a, err := s.app.store.UpdateAgent(ctx, id, func(a *api.Agent) error {
		if a.ArchivedAt == nil {
			now := s.app.now()
			a.ArchivedAt, a.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	s.app.log.InfoContext(ctx, "agent archived", "agent_id", id, by.attr())
	return WireAgent(a), nil
}

// WireAgent fills the fields an agent always shows on the wire (empty
// lists and metadata rather than null, the default execution identity).
func WireAgent(a api.Agent) api.Agent {
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
