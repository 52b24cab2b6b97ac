package client

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/memstore/memstore/api"
)

// OffersRecoveries reports whether the server takes recoveries
// (api.ExtensionRecoveries) for an environment: memstore says so on
// GET /v1/environments/{id}; Anthropic's API does not.
func (c *Client) OffersRecoveries(ctx context.Context, environmentID string) (bool, error) {
	path, err := route("/v1/environments/{environment_id}", environmentID)
	if err != nil {
		return false, err
	}
	res, _, err := c.send(ctx, request{method: http.MethodGet, path: path}, true)
	if err != nil {
		return false, err
	}
	offered := strings.Split(res.Header.Get(api.ExtensionsHeader), ",")
	for i := range offered {
		offered[i] = strings.TrimSpace(offered[i])
	}
	return slices.Contains(offered, api.ExtensionRecoveries), nil
}

// RecoverMemory uploads one file of a folder a killed worker left
// (POST /v1/environments/{id}/recoveries, memstore's own), with the
// environment key. Trying the same file again writes nothing more, so the
// request is retried like a read.
func (c *Client) RecoverMemory(ctx context.Context, environmentID string, req api.RecoveryRequest) (*api.Recovery, error) {
	path, err := route("/v1/environments/{environment_id}/recoveries", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Recovery)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, body: req, idempotent: true}, out)
}
