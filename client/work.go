package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"

	"github.com/memstore/memstore/api"
)

// PollWork claims the next work item of an environment, waiting up to
// p.BlockMS for one. It returns a nil item and a nil error when there was
// none: servers say "no work" with a 200 null (the official SDK's
// expectation), a 204, or an object without an id, and all three mean the
// same. The claimed item carries its Secret; decode it with
// api.DecodeWorkSecret. p.WorkerID, when set, overrides WithWorkerID.
//
// Poll is a GET and is retried like one. If a response was lost after the
// server claimed an item, the item stays unacknowledged and a later poll
// with reclaim_older_than_ms hands it out again.
func (c *Client) PollWork(ctx context.Context, environmentID string, p api.WorkPollParams) (*api.Work, error) {
	path, err := route("/v1/environments/{environment_id}/work/poll", environmentID)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodGet, path: path, query: p.Query(), emptyOK: true}
	if p.WorkerID != "" {
		r.header = http.Header{"Anthropic-Worker-Id": {p.WorkerID}}
	}
	w := new(api.Work)
	if err := c.do(ctx, r, w); err != nil {
		return nil, err
	}
	if w.ID == "" {
		return nil, nil
	}
	return w, nil
}

// AckWork acknowledges a claimed item (queued → starting), telling the
// server the worker has taken it on. Not retried: a repeat of an ack that
// landed would be refused.
func (c *Client) AckWork(ctx context.Context, environmentID, workID string) (*api.Work, error) {
	return c.workCall(ctx, http.MethodPost, "/v1/environments/{environment_id}/work/{work_id}/ack", environmentID, workID, nil)
}

// HeartbeatWork renews the lease on a work item. Send api.NoHeartbeat as
// p.ExpectedLastHeartbeat first, then the LastHeartbeat of the previous
// answer. A stale value (another worker took the lease, or it expired) is a
// 412 that StaleHeartbeat recognises. The state in the answer is how a
// worker learns of a graceful stop.
//
// Not retried: once a beat has landed, its repeat carries a stale
// expected_last_heartbeat and would report a lease loss that did not happen.
// The caller's next beat is the retry.
func (c *Client) HeartbeatWork(ctx context.Context, environmentID, workID string, p api.WorkHeartbeatParams) (*api.WorkHeartbeat, error) {
	path, err := route("/v1/environments/{environment_id}/work/{work_id}/heartbeat", environmentID, workID)
	if err != nil {
		return nil, err
	}
	out := new(api.WorkHeartbeat)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, query: p.Query()}, out)
}

// StaleHeartbeat reports whether err is the 412 of a heartbeat whose
// expected_last_heartbeat no longer matches, which means this worker has
// lost the lease and must stop working on the item. state is the lease as
// the server holds it, nil if the server did not send it.
func StaleHeartbeat(err error) (state *api.WorkLeaseState, ok bool) {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusPreconditionFailed {
		return nil, false
	}
	raw, found := ae.Details["current_state"]
	if !found {
		return nil, true
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, true
	}
	state = new(api.WorkLeaseState)
	if json.Unmarshal(b, state) != nil {
		return nil, true
	}
	return state, true
}

// StopWork asks for an item to stop: gracefully (the worker sees "stopping"
// on its next heartbeat and winds down) or, with Force, at once. Stopping an
// item that is already stopped is a 409. Servers answer 204 or 200 with the
// item; either is success, so nothing is returned but the error.
func (c *Client) StopWork(ctx context.Context, environmentID, workID string, req api.StopWorkRequest) error {
	path, err := route("/v1/environments/{environment_id}/work/{work_id}/stop", environmentID, workID)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodPost, path: path, body: req, emptyOK: true}, nil)
}

// GetWork fetches a work item (its secret is never included).
func (c *Client) GetWork(ctx context.Context, environmentID, workID string) (*api.Work, error) {
	return c.workCall(ctx, http.MethodGet, "/v1/environments/{environment_id}/work/{work_id}", environmentID, workID, nil)
}

// UpdateWork merges metadata into a work item; a key mapped to nil is
// deleted.
func (c *Client) UpdateWork(ctx context.Context, environmentID, workID string, req api.UpdateWorkRequest) (*api.Work, error) {
	return c.workCall(ctx, http.MethodPost, "/v1/environments/{environment_id}/work/{work_id}", environmentID, workID, req)
}

func (c *Client) workCall(ctx context.Context, method, pattern, environmentID, workID string, body any) (*api.Work, error) {
	path, err := route(pattern, environmentID, workID)
	if err != nil {
		return nil, err
	}
	out := new(api.Work)
	return out, c.do(ctx, request{method: method, path: path, body: body}, out)
}

// ListWork returns one page of an environment's work items.
func (c *Client) ListWork(ctx context.Context, environmentID string, p api.WorkListParams) (*api.Page[api.Work], error) {
	path, err := route("/v1/environments/{environment_id}/work", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.Work])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: p.Query()}, out)
}

// ListAllWork yields every work item of an environment, page after page; it
// stops at the first error, which it yields.
func (c *Client) ListAllWork(ctx context.Context, environmentID string, p api.WorkListParams) iter.Seq2[api.Work, error] {
	return all(p.Page, func(page string) (*api.Page[api.Work], error) {
		p.Page = page
		return c.ListWork(ctx, environmentID, p)
	})
}

// WorkStats reports an environment's queue: items waiting, items claimed
// but not acknowledged, the oldest of them, and the workers seen polling.
func (c *Client) WorkStats(ctx context.Context, environmentID string) (*api.WorkQueueStats, error) {
	path, err := route("/v1/environments/{environment_id}/work/stats", environmentID)
	if err != nil {
		return nil, err
	}
	out := new(api.WorkQueueStats)
	return out, c.do(ctx, request{method: http.MethodGet, path: path}, out)
}
