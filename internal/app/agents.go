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
	a := api.Agent{SessionAgent: api.SessionAgent{Name: req.Name, Model: req.Model, Tools: req.Tools, Skills: req.Skills, MCPServers: req.MCPServers}, Metadata: req.Metadata}
	if req.Description != nil {
		a.Description = *req.Description
	}
	if req.System != nil {
		a.System = *req.System
	}
	a, err := s.check(ctx, a)
	if err != nil {
		return api.Agent{}, err
	}
	now := s.app.now()
	a.ID, a.Version, a.CreatedAt, a.UpdatedAt = ids.NewAt(ids.Agent, now), 1, now, now
	a = WireAgent(a)
	if err := s.app.store.CreateAgent(ctx, a); err != nil {
		return api.Agent{}, err
	}
	s.app.log.InfoContext(ctx, "agent created", "agent_id", a.ID, "model", a.Model.ID, by.attr())
	return a, nil
}

// Update changes the fields req sends, under the rules Create applies,
// and makes the result the agent's next version. req.Version must be the
// version the caller read: an edit from a stale copy would silently undo
// the edit made in between, so it is refused. Sessions keep the snapshot
// they started with. A missing agent is storage.ErrNotFound.
func (s *Agents) Update(ctx context.Context, id string, req api.UpdateAgentRequest, by Caller) (api.Agent, error) {
	if req.Version <= 0 {
		return api.Agent{}, api.Errorf(api.InvalidRequest, "version is required: send the agent's current version (GET /v1/agents/%s shows it), so that an edit from a stale copy is refused", id)
	}
	a, err := s.app.store.UpdateAgent(ctx, id, func(a *api.Agent) error {
		if a.ArchivedAt != nil {
			return api.Errorf(api.InvalidRequest, "agent %s is archived; it cannot be changed (create a new agent instead)", id)
		}
		if a.Version != req.Version {
			return api.Errorf(api.Conflict, "agent %s is at version %d, not %d: someone changed it since you read it; read it again and repeat your change", id, a.Version, req.Version)
		}
		next := *a
		if req.Name != nil {
			next.Name = *req.Name
		}
		if req.Model != nil {
			next.Model = *req.Model
		}
		if req.Description != nil {
			next.Description = *req.Description
		}
		if req.System != nil {
			next.System = *req.System
		}
		if req.Tools != nil {
			next.Tools = *req.Tools
		}
		if req.Skills != nil {
			next.Skills = *req.Skills
		}
		if req.MCPServers != nil {
			next.MCPServers = *req.MCPServers
		}
		if req.Metadata != nil {
			next.Metadata = req.Metadata
		}
		checked, err := s.check(ctx, next)
		if err != nil {
			return err
		}
		checked.Version, checked.UpdatedAt = a.Version+1, s.app.now()
		*a = checked
		return nil
	})
	if err != nil {
		return api.Agent{}, err
	}
	s.app.log.InfoContext(ctx, "agent updated", "agent_id", id, "version", a.Version, by.attr())
	return WireAgent(a), nil
}

// check applies the rules every agent meets, on create and on update,
// and returns a with its skills as stored.
func (s *Agents) check(ctx context.Context, a api.Agent) (api.Agent, error) {
	if err := validate.Name("name", a.Name); err != nil {
		return api.Agent{}, err
	}
	if a.Model.ID == "" {
		return api.Agent{}, api.Errorf(api.InvalidRequest, "model is required: send \"%s\" (or {\"id\":\"%s\"}) for memstore's deterministic runtime", api.ScriptedModel, api.ScriptedModel)
	}
	if err := validate.Text("model.id", a.Model.ID, maxModelIDChars); err != nil {
		return api.Agent{}, err
	}
	if _, err := a.Model.Settings(); err != nil {
		return api.Agent{}, err
	}
	if err := validate.Text("description", a.Description, maxAgentDescriptionChars); err != nil {
		return api.Agent{}, err
	}
	if err := validate.Text("system", a.System, api.MaxAgentSystemChars); err != nil {
		return api.Agent{}, err
	}
	for i, t := range a.Tools {
		var head struct {
			Type string `json:"type"`
		}
		if len(bytes.TrimSpace(t)) == 0 || bytes.TrimSpace(t)[0] != '{' || json.Unmarshal(t, &head) != nil || head.Type == "" {
			return api.Agent{}, api.Errorf(api.InvalidRequest, "tools[%d] must be an object with a type, such as {\"type\":\"agent_toolset_20260401\"}", i)
		}
	}
	if err := validate.Metadata("metadata", a.Metadata); err != nil {
		return api.Agent{}, err
	}
	if err := s.app.checkMCP(ctx, a.MCPServers, a.Tools); err != nil {
		return api.Agent{}, err
	}
	skills, err := s.app.Skills.CheckAgentSkills(ctx, a.Skills)
	if err != nil {
		return api.Agent{}, err
	}
	a.Skills = skills
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
