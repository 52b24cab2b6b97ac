package client

import (
	"context"
	"iter"
	"net/http"

	"github.com/memstore/memstore/api"
)

// CreateAgent creates an agent definition that sessions name by id.
func (c *Client) CreateAgent(ctx context.Context, req api.CreateAgentRequest) (*api.Agent, error) {
	out := new(api.Agent)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/agents", body: req}, out)
}

// GetAgent fetches an agent.
func (c *Client) GetAgent(ctx context.Context, agentID string) (*api.Agent, error) {
	path, err := route("/v1/agents/{agent_id}", agentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Agent)
	return out, c.do(ctx, request{method: http.MethodGet, path: path}, out)
}

// ArchiveAgent retires an agent: new sessions can no longer name it, and
// sessions already running keep their snapshot of it.
func (c *Client) ArchiveAgent(ctx context.Context, agentID string) (*api.Agent, error) {
	path, err := route("/v1/agents/{agent_id}/archive", agentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Agent)
	return out, c.do(ctx, request{method: http.MethodPost, path: path}, out)
}

// ListAgents returns one page of agents.
func (c *Client) ListAgents(ctx context.Context, p api.AgentListParams) (*api.Page[api.Agent], error) {
	out := new(api.Page[api.Agent])
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/agents", query: p.Query()}, out)
}

// ListAllAgents yields every agent matching p, page after page; it stops at
// the first error, which it yields.
func (c *Client) ListAllAgents(ctx context.Context, p api.AgentListParams) iter.Seq2[api.Agent, error] {
	return all(p.Page, func(page string) (*api.Page[api.Agent], error) {
		p.Page = page
		return c.ListAgents(ctx, p)
	})
}

// CreateSession starts a session of an agent on an environment, with its
// memory stores attached (resources can only be given here). On a
// self-hosted environment it enqueues a work item for a worker.
func (c *Client) CreateSession(ctx context.Context, req api.CreateSessionRequest) (*api.Session, error) {
	out := new(api.Session)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/sessions", body: req}, out)
}

// GetSession fetches a session with its resources and their mount paths.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodGet, "/v1/sessions/{session_id}", sessionID, nil)
}

// UpdateSession patches a session's title or metadata.
func (c *Client) UpdateSession(ctx context.Context, sessionID string, req api.UpdateSessionRequest) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodPost, "/v1/sessions/{session_id}", sessionID, req)
}

// ArchiveSession archives a session.
func (c *Client) ArchiveSession(ctx context.Context, sessionID string) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodPost, "/v1/sessions/{session_id}/archive", sessionID, nil)
}

func (c *Client) sessionCall(ctx context.Context, method, pattern, sessionID string, body any) (*api.Session, error) {
	path, err := route(pattern, sessionID)
	if err != nil {
		return nil, err
	}
	out := new(api.Session)
	return out, c.do(ctx, request{method: method, path: path, body: body}, out)
}

// DeleteSession deletes a session; its sessions token stops working.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) (*api.Deleted, error) {
	path, err := route("/v1/sessions/{session_id}", sessionID)
	if err != nil {
		return nil, err
	}
	out := new(api.Deleted)
	return out, c.do(ctx, request{method: http.MethodDelete, path: path}, out)
}

// ListSessions returns one page of sessions, newest first unless p.Order
// says otherwise.
func (c *Client) ListSessions(ctx context.Context, p api.SessionListParams) (*api.Page[api.Session], error) {
	out := new(api.Page[api.Session])
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/sessions", query: p.Query()}, out)
}

// ListAllSessions yields every session matching p, page after page; it
// stops at the first error, which it yields.
func (c *Client) ListAllSessions(ctx context.Context, p api.SessionListParams) iter.Seq2[api.Session, error] {
	return all(p.Page, func(page string) (*api.Page[api.Session], error) {
		p.Page = page
		return c.ListSessions(ctx, p)
	})
}
