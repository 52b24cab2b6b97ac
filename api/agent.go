package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// ScriptedModel selects memstore's deterministic agent runtime: each
// user.message is a JSON script of tool calls (see ScriptedScript).
const ScriptedModel = "scripted"

// Agent is a reusable agent definition that sessions name by id: the fields
// a session snapshots (SessionAgent) plus its metadata and timestamps. Fields
// memstore does not act on (skills, MCP servers, multiagent) are kept so the
// official SDK finds every field it expects.
type Agent struct {
	SessionAgent
	Metadata   map[string]string `json:"metadata"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	ArchivedAt *time.Time        `json:"archived_at"`
}

// ExecutionIdentity is who an agent's runs act as; memstore always answers
// {"type":"service_account"}.
type ExecutionIdentity struct {
	Type string `json:"type"`
}

// ModelConfig names the model of an agent. On the wire it is either a bare
// string ("scripted") or an object {"id": "scripted", …}; the official SDK
// sends the object. It is always written as the object.
type ModelConfig struct {
	ID string `json:"id"`
	// Extra keeps the other model settings (speed, effort, …) as sent.
	Extra Extra `json:"-"`
}

// MarshalJSON writes the object form.
func (m ModelConfig) MarshalJSON() ([]byte, error) {
	type plain ModelConfig
	return marshalWithExtra(plain(m), m.Extra)
}

// UnmarshalJSON accepts the string and the object form.
func (m *ModelConfig) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*m = ModelConfig{ID: s}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("model must be a string or an object with an id, got %s", b)
	}
	type plain ModelConfig
	var p plain
	extra, err := unmarshalWithExtra(b, &p, "id")
	if err != nil {
		return err
	}
	*m = ModelConfig(p)
	m.Extra = extra
	return nil
}

// CreateAgentRequest is the body of POST /v1/agents.
type CreateAgentRequest struct {
	Name        string            `json:"name"`
	Model       ModelConfig       `json:"model"`
	Description *string           `json:"description,omitempty"`
	System      *string           `json:"system,omitempty"`
	Tools       []json.RawMessage `json:"tools,omitempty"`
	Skills      []json.RawMessage `json:"skills,omitempty"`
	MCPServers  []json.RawMessage `json:"mcp_servers,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// UpdateAgentRequest is the body of POST /v1/agents/{id}: the fields to
// change (an absent one is kept) and the version they were read at, so an
// edit made from a stale copy is refused instead of undoing another.
type UpdateAgentRequest struct {
	Version     int64              `json:"version"`
	Name        *string            `json:"name,omitempty"`
	Model       *ModelConfig       `json:"model,omitempty"`
	Description *string            `json:"description,omitempty"`
	System      *string            `json:"system,omitempty"`
	Tools       *[]json.RawMessage `json:"tools,omitempty"`
	Skills      *[]json.RawMessage `json:"skills,omitempty"`
	MCPServers  *[]json.RawMessage `json:"mcp_servers,omitempty"`
	Metadata    map[string]string  `json:"metadata,omitempty"`
}

// MaxAgentSystemChars bounds an agent's system prompt. Its name follows
// the memory stores' rules (1 to MaxStoreNameChars characters).
const MaxAgentSystemChars = 100_000

// AgentListParams are the query parameters of GET /v1/agents.
type AgentListParams struct {
	Limit           int
	Page            string
	IncludeArchived bool
}

// Query encodes the parameters; zero values are left out.
func (p AgentListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	if p.IncludeArchived {
		q.Set("include_archived", "true")
	}
	return q
}

// ScriptedScript is the text of a user.message sent to a session whose agent
// uses the scripted model: the tool calls to make, one at a time and in
// order, and how to end the turn ("idle", the default, or "terminate").
type ScriptedScript struct {
	ToolCalls []ScriptedToolCall `json:"tool_calls"`
	End       string             `json:"end,omitempty"`
}

// ScriptedToolCall is one call of a script: a tool name of the worker's
// toolset (read, write, edit, bash, glob, grep) and its input object.
type ScriptedToolCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Script endings.
const (
	ScriptEndIdle      = "idle"
	ScriptEndTerminate = "terminate"
)
