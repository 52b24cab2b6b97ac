package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// Session statuses.
const (
	SessionRescheduling = "rescheduling"
	SessionRunning      = "running"
	SessionIdle         = "idle"
	SessionTerminated   = "terminated"
)

// Resource access modes of a memory store attached to a session.
const (
	AccessReadWrite = "read_write"
	AccessReadOnly  = "read_only"
)

// Session limits.
const (
	MaxSessionMemoryStores  = 8
	MaxResourceInstructions = 4_096
	// DefaultMountPrefix is the folder under which each attached store is
	// mounted: mount_path = DefaultMountPrefix + "/" + slug.
	DefaultMountPrefix = "/mnt/memory"
)

// ResourceMemoryStore is the resource type of an attached memory store.
const ResourceMemoryStore = "memory_store"

// Session is one agent conversation on an environment. Fields that memstore
// does not act on (usage, budget, vaults, outcome evaluations) are present with
// empty values so that the official SDK decodes every required field.
type Session struct {
	ID                 string            `json:"id"`
	Type               string            `json:"type"` // "session"
	Agent              SessionAgent      `json:"agent"`
	EnvironmentID      string            `json:"environment_id"`
	Title              *string           `json:"title"`
	Metadata           map[string]string `json:"metadata"`
	Resources          []SessionResource `json:"resources"`
	Status             string            `json:"status"`
	Stats              SessionStats      `json:"stats"`
	Usage              SessionUsage      `json:"usage"`
	OutcomeEvaluations []json.RawMessage `json:"outcome_evaluations"`
	VaultIDs           []string          `json:"vault_ids"`
	Budget             json.RawMessage   `json:"budget"`        // null
	DeploymentID       *string           `json:"deployment_id"` // null
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
	ArchivedAt         *time.Time        `json:"archived_at"`
}

// SessionAgent is the snapshot of the agent taken when the session was
// created: later edits of the agent do not change a running session.
type SessionAgent struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"` // "agent"
	Name              string            `json:"name"`
	Description       string            `json:"description"`
	Model             ModelConfig       `json:"model"`
	System            string            `json:"system"`
	Tools             []json.RawMessage `json:"tools"`
	Skills            []json.RawMessage `json:"skills"`
	MCPServers        []json.RawMessage `json:"mcp_servers"`
	Multiagent        json.RawMessage   `json:"multiagent"` // null
	ExecutionIdentity ExecutionIdentity `json:"execution_identity"`
	Version           int64             `json:"version"`
}

// SessionStats are timing statistics of a session.
type SessionStats struct {
	ActiveSeconds   float64 `json:"active_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// SessionUsage is a session's token usage: the sum of the model_usage of
// its span.model_request_end events (the scripted runtime uses none).
type SessionUsage struct {
	InputTokens          int64              `json:"input_tokens"`
	OutputTokens         int64              `json:"output_tokens"`
	CacheReadInputTokens int64              `json:"cache_read_input_tokens"`
	CacheCreation        CacheCreationUsage `json:"cache_creation"`
	ActiveSeconds        float64            `json:"active_seconds"`
}

// Add counts one model request. Its cache writes count as 5-minute ones,
// the only TTL memstore's runtime asks for.
func (u *SessionUsage) Add(m ModelUsage) {
	u.InputTokens += m.InputTokens
	u.OutputTokens += m.OutputTokens
	u.CacheReadInputTokens += m.CacheReadInputTokens
	u.CacheCreation.Ephemeral5mInputTokens += m.CacheCreationInputTokens
}

// CacheCreationUsage breaks cache writes down by TTL.
type CacheCreationUsage struct {
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
}

// SessionResource is a memory store attached to a session. Name and
// Description are snapshots taken at attach time; MountPath is where the
// worker mounts the store (DefaultMountPrefix + "/" + slug of the name).
type SessionResource struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"` // "memory_store"
	MemoryStoreID string    `json:"memory_store_id"`
	Access        string    `json:"access"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	Instructions  *string   `json:"instructions"`
	MountPath     string    `json:"mount_path"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// SessionResourceParams is one entry of CreateSessionRequest.Resources. Only
// memory_store resources are accepted on self-hosted environments; the
// fields of other types are not read, as the server refuses them by type.
type SessionResourceParams struct {
	Type          string  `json:"type"`
	MemoryStoreID string  `json:"memory_store_id,omitempty"`
	Access        string  `json:"access,omitempty"` // default read_write
	Instructions  *string `json:"instructions,omitempty"`
}

// AgentRef names a session's agent: a bare id on the wire, or the SDK's
// object {"type":"agent","id":…,"version":…}.
type AgentRef struct {
	ID      string
	Version int64 // 0: the latest
	// Type is the object form's type when it was not "agent" (the SDK also
	// has "agent_with_overrides"), so the server can refuse what it does
	// not support instead of ignoring the overrides.
	Type string
}

// MarshalJSON writes the bare id, or the object when a version is pinned.
func (a AgentRef) MarshalJSON() ([]byte, error) {
	if a.Version == 0 {
		return json.Marshal(a.ID)
	}
	return json.Marshal(struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}{"agent", a.ID, a.Version})
}

// UnmarshalJSON accepts both forms.
func (a *AgentRef) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = AgentRef{ID: s}
		return nil
	}
	var o struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("agent must be an agent id or an object {\"type\":\"agent\",\"id\":…}, got %s", b)
	}
	*a = AgentRef{ID: o.ID, Version: o.Version}
	if o.Type != "agent" {
		a.Type = o.Type
	}
	return nil
}

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	Agent         AgentRef                `json:"agent"`
	EnvironmentID string                  `json:"environment_id"`
	Title         *string                 `json:"title,omitempty"`
	Metadata      map[string]string       `json:"metadata,omitempty"`
	Resources     []SessionResourceParams `json:"resources,omitempty"`
	InitialEvents []Event                 `json:"initial_events,omitempty"`
	VaultIDs      []string                `json:"vault_ids,omitempty"`
}

// UpdateSessionRequest is the body of POST /v1/sessions/{id}. A metadata key
// mapped to null (or "") is deleted; title null clears it.
type UpdateSessionRequest struct {
	Title    NullableString     `json:"title,omitzero"`
	Metadata map[string]*string `json:"metadata,omitempty"`
}

// SessionListParams are the query parameters of GET /v1/sessions.
type SessionListParams struct {
	Limit           int
	Page            string
	Order           string // "desc" (default: newest first) or "asc"
	IncludeArchived bool
	AgentID         string
	EnvironmentID   string
	MemoryStoreID   string
	Statuses        []string
}

// Query encodes the parameters; zero values are left out.
func (p SessionListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	if p.Order != "" {
		q.Set("order", p.Order)
	}
	if p.IncludeArchived {
		q.Set("include_archived", "true")
	}
	if p.AgentID != "" {
		q.Set("agent_id", p.AgentID)
	}
	if p.EnvironmentID != "" {
		q.Set("environment_id", p.EnvironmentID)
	}
	if p.MemoryStoreID != "" {
		q.Set("memory_store_id", p.MemoryStoreID)
	}
	for _, s := range p.Statuses {
		q.Add("statuses[]", s)
	}
	return q
}
