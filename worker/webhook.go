package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// RunStarted is the webhook event type that wakes a worker: a session of
// its environment has work.
const RunStarted = "session.status_run_started"

// maxWebhookBody caps a delivery's body; an event envelope is a few hundred
// bytes.
const maxWebhookBody = 64 << 10

// reclaimAfterMS is the reclaim_older_than_ms of a drain: an item claimed
// but not acknowledged for that long was left by a worker that died.
const reclaimAfterMS = 30_000

// WebhookHandler serves a worker that webhooks wake instead of a poll
// loop: it verifies each delivery with the endpoint's signing secret and,
// on session.status_run_started, answers at once and has Run drain the
// environment's queue. Mount it in an HTTP server and run Run beside it.
type WebhookHandler struct {
	w      *Worker
	verify *standardwebhooks.Webhook
	kick   chan struct{}
}

// NewWebhookHandler builds the handler of w's environment for deliveries
// signed with secret (whsec_…, shown when the endpoint was created).
func (w *Worker) NewWebhookHandler(secret string) (*WebhookHandler, error) {
	if w.cfg.EnvironmentID == "" || w.cfg.EnvironmentKey == "" {
		return nil, errors.New("worker: an environment id and an environment key are required to claim work (--environment-id and --environment-key, or ANTHROPIC_ENVIRONMENT_ID and ANTHROPIC_ENVIRONMENT_KEY)")
	}
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil || secret == "" {
		return nil, fmt.Errorf("worker: the webhook signing secret is not a whsec_ secret (%v); pass the signing_secret the endpoint's creation returned", err)
	}
	return &WebhookHandler{w: w, verify: v, kick: make(chan struct{}, 1)}, nil
}

// ServeHTTP verifies a delivery (401 when it does not verify, so a forger
// learns nothing and wakes nothing) and answers 204 before any work is
// done: the sender's timeout never depends on a session's length.
func (h *WebhookHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "webhook deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody))
	if err != nil {
		http.Error(rw, "reading the body failed", http.StatusBadRequest)
		return
	}
	log := h.w.log.With("environment_id", h.w.cfg.EnvironmentID, "webhook_id", r.Header.Get("webhook-id"))
	if err := h.verify.Verify(body, r.Header); err != nil {
		log.Warn("webhook delivery refused: its signature does not verify; check that --webhook-secret is the endpoint's current signing secret and that this host's clock is right", "err", err)
		http.Error(rw, "signature does not verify", http.StatusUnauthorized)
		return
	}
	var ev struct {
		Data struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(rw, "body is not a webhook event", http.StatusBadRequest)
		return
	}
	if ev.Data.Type == RunStarted {
		log.Info("webhook: a session has work; draining the queue", "session_id", ev.Data.ID)
		h.Wake()
	}
	rw.WriteHeader(http.StatusNoContent)
}

// Wake makes Run drain the queue (once more, if it is draining now).
func (h *WebhookHandler) Wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Run drains the queue each time a delivery wakes it, until ctx ends; in
// between the worker idles and holds no connection. It returns nil when
// ctx ends, or the error of a permanent refusal (a wrong key).
func (h *WebhookHandler) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.kick:
		}
		if err := h.w.Drain(ctx); err != nil {
			return err
		}
	}
}

// Drain claims and serves every item the environment's queue holds now,
// reclaiming items a dead worker claimed without acknowledging, then
// returns. It is what a webhook-woken worker does, and polls without
// waiting (no long poll).
func (w *Worker) Drain(ctx context.Context) error {
	env := w.cfg.Client.With(client.WithBearerToken(w.cfg.EnvironmentKey), client.WithWorkerID(w.cfg.WorkerID))
	log := w.log.With("environment_id", w.cfg.EnvironmentID)
	for ctx.Err() == nil {
		work, err := w.claim(ctx, env, env, api.WorkPollParams{ReclaimOlderThanMS: reclaimAfterMS}, log)
		var f *claimFailure
		switch {
		case errors.As(err, &f) && f.what == claimAck:
			f.log.Warn(f.what+" failed; going on with the queue", "err", f.err)
			continue
		case errors.As(err, &f):
			f.log.Warn(f.what+" failed; the next webhook retries", "err", f.err)
			return nil
		case err != nil:
			return err
		case work == nil:
			return nil
		}
		w.serve(ctx, env, *work, nil)
	}
	return nil
}

var _ http.Handler = (*WebhookHandler)(nil)
