package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memstore/memstore/api"
)

// CreateWebhook creates a webhook endpoint; the answer carries its signing
// secret, which no later answer shows.
func (c *Client) CreateWebhook(ctx context.Context, req api.WebhookEndpointParams) (*api.NewWebhookEndpoint, error) {
	out := new(api.NewWebhookEndpoint)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/organizations/webhooks", body: req}, out)
}

// ListWebhooks lists webhook endpoints newest first, limit at a time after
// the endpoint afterID ("" for the first page).
func (c *Client) ListWebhooks(ctx context.Context, afterID string, limit int) (*api.WebhookEndpointPage, error) {
	q := url.Values{}
	if afterID != "" {
		q.Set("after_id", afterID)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	out := new(api.WebhookEndpointPage)
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/organizations/webhooks", query: q}, out)
}

// GetWebhook fetches a webhook endpoint.
func (c *Client) GetWebhook(ctx context.Context, id string) (*api.WebhookEndpoint, error) {
	return c.webhookCall(ctx, http.MethodGet, "/v1/organizations/webhooks/{id}", id, nil)
}

// UpdateWebhook patches a webhook endpoint; State "enabled" re-enables one
// memstore disabled.
func (c *Client) UpdateWebhook(ctx context.Context, id string, req api.WebhookEndpointParams) (*api.WebhookEndpoint, error) {
	return c.webhookCall(ctx, http.MethodPost, "/v1/organizations/webhooks/{id}", id, req)
}

// DeleteWebhook deletes a webhook endpoint and its pending deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	path, err := route("/v1/organizations/webhooks/{id}", id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: path}, nil)
}

// RegenerateWebhookSecret replaces an endpoint's signing secret and returns
// the new one.
func (c *Client) RegenerateWebhookSecret(ctx context.Context, id string) (*api.WebhookSigningSecret, error) {
	path, err := route("/v1/organizations/webhooks/{id}/regenerate_signing_secret", id)
	if err != nil {
		return nil, err
	}
	out := new(api.WebhookSigningSecret)
	return out, c.do(ctx, request{method: http.MethodPost, path: path}, out)
}

// ListWebhookDeliveries lists an endpoint's deliveries newest first, with
// their attempts (memstore's own endpoint).
func (c *Client) ListWebhookDeliveries(ctx context.Context, id string, limit int) (*api.Page[api.WebhookDelivery], error) {
	path, err := route("/v1/organizations/webhooks/{id}/deliveries", id)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	out := new(api.Page[api.WebhookDelivery])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
}

func (c *Client) webhookCall(ctx context.Context, method, pattern, id string, body any) (*api.WebhookEndpoint, error) {
	path, err := route(pattern, id)
	if err != nil {
		return nil, err
	}
	out := new(api.WebhookEndpoint)
	return out, c.do(ctx, request{method: method, path: path, body: body}, out)
}
