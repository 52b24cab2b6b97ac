package client

import (
	"context"
	"iter"
	"net/http"

	"github.com/memstore/memstore/api"
)

// CreateEnvironment creates an environment; a nil Config means self_hosted.
func (c *Client) CreateEnvironment(ctx context.Context, req api.CreateEnvironmentRequest) (*api.Environment, error) {
	out := new(api.Environment)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/environments", body: req}, out)
}

// GetEnvironment fetches an environment.
func (c *Client) GetEnvironment(ctx context.Context, environmentID string) (*api.Environment, error) {
	return c.environmentCall(ctx, http.MethodGet, "/v1/environments/{environment_id}", environmentID, nil)
}

// UpdateEnvironment patches an environment's name, description, config or
// metadata.
func (c *Client) UpdateEnvironment(ctx context.Context, environmentID string, req api.UpdateEnvironmentRequest) (*api.Environment, error) {
	return c.environmentCall(ctx, http.MethodPost, "/v1/environments/{environment_id}", environmentID, req)
}

// ArchiveEnvironment retires an environment: no new sessions can use it.
func (c *Client) ArchiveEnvironment(ctx context.Context, environmentID string) (*api.Environment, error) {
	return c.environmentCall(ctx, http.MethodPost, "/v1/environments/{environment_id}/archive", environmentID, nil)
}

func (c *Client) environmentCall(ctx context.Context, method, pattern, environmentID string, body any) (*api.Environment, error) {
	path, err := route(pattern, environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Environment)
	return out, c.do(ctx, request{method: method, path: path, body: body}, out)
}

// DeleteEnvironment deletes an environment.
func (c *Client) DeleteEnvironment(ctx context.Context, environmentID string) (*api.Deleted, error) {
	path, err := route("/v1/environments/{environment_id}", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Deleted)
	return out, c.do(ctx, request{method: http.MethodDelete, path: path}, out)
}

// ListEnvironments returns one page of environments.
func (c *Client) ListEnvironments(ctx context.Context, p api.EnvironmentListParams) (*api.Page[api.Environment], error) {
	out := new(api.Page[api.Environment])
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/environments", query: p.Query()}, out)
}

// ListAllEnvironments yields every environment matching p, page after page;
// it stops at the first error, which it yields.
func (c *Client) ListAllEnvironments(ctx context.Context, p api.EnvironmentListParams) iter.Seq2[api.Environment, error] {
	return all(p.Page, func(page string) (*api.Page[api.Environment], error) {
		p.Page = page
		return c.ListEnvironments(ctx, p)
	})
}

// CreateEnvironmentKey mints a key that workers of the environment poll
// with. The secret is in the response only: store it at once.
func (c *Client) CreateEnvironmentKey(ctx context.Context, environmentID string, req api.CreateEnvironmentKeyRequest) (*api.EnvironmentKey, error) {
	path, err := route("/v1/environments/{environment_id}/keys", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.EnvironmentKey)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, body: req}, out)
}

// ListEnvironmentKeys returns one page of an environment's live keys,
// newest first, without their secrets.
func (c *Client) ListEnvironmentKeys(ctx context.Context, environmentID string, p api.EnvironmentKeyListParams) (*api.Page[api.EnvironmentKey], error) {
	path, err := route("/v1/environments/{environment_id}/keys", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.EnvironmentKey])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: p.Query()}, out)
}

// ListAllEnvironmentKeys yields every live key of an environment, page after
// page; it stops at the first error, which it yields.
func (c *Client) ListAllEnvironmentKeys(ctx context.Context, environmentID string, p api.EnvironmentKeyListParams) iter.Seq2[api.EnvironmentKey, error] {
	return all(p.Page, func(page string) (*api.Page[api.EnvironmentKey], error) {
		p.Page = page
		return c.ListEnvironmentKeys(ctx, environmentID, p)
	})
}

// RevokeEnvironmentKey revokes an environment key at once: every request
// made with it from then on is refused.
func (c *Client) RevokeEnvironmentKey(ctx context.Context, environmentID, keyID string) (*api.Deleted, error) {
	path, err := route("/v1/environments/{environment_id}/keys/{key_id}", environmentID, keyID)
	if err != nil {
		return nil, err
	}
	out := new(api.Deleted)
	return out, c.do(ctx, request{method: http.MethodDelete, path: path}, out)
}
