package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Work queue timing.
const (
	// defaultReclaimAfter is reclaim_older_than_ms when a poll does not send
	// it, as in the hosted API: a claim not acknowledged within 5 s is
	// offered again.
	defaultReclaimAfter = 5 * time.Second
	// claimTTL is the lease a claim starts with, until the first heartbeat
	// sets its own.
	claimTTL = api.DefaultLeaseTTLSeconds * time.Second
)

func (s *Server) workRoutes() {
	s.mux.HandleFunc("GET /v1/environments/{env}/work/poll", s.authed(s.pollWork))
	s.mux.HandleFunc("GET /v1/environments/{env}/work/stats", s.authed(s.workStats))
	s.mux.HandleFunc("GET /v1/environments/{env}/work", s.authed(s.listWork))
	s.mux.HandleFunc("GET /v1/environments/{env}/work/{work}", s.authed(s.getWork))
	s.mux.HandleFunc("POST /v1/environments/{env}/work/{work}", s.authed(s.updateWork))
	s.mux.HandleFunc("POST /v1/environments/{env}/work/{work}/ack", s.authed(s.ackWork))
	s.mux.HandleFunc("POST /v1/environments/{env}/work/{work}/heartbeat", s.authed(s.heartbeatWork))
	s.mux.HandleFunc("POST /v1/environments/{env}/work/{work}/stop", s.authed(s.stopWork))
}

// workPath validates {env} and {work}.
func workPath(r *http.Request) (env, work string, err error) {
	if env, err = environmentID(r); err != nil {
		return "", "", err
	}
	work = r.PathValue("work")
	return env, work, checkID(ids.Work, "work item", work)
}

func workNotFound(env, work string) error {
	return validate.Missing("", "work item", work, "GET /v1/environments/"+env+"/work")
}

// queueScope reads {env} for the endpoints of a whole queue: p may use
// it, and it exists.
func (s *Server) queueScope(r *http.Request, p Principal) (env string, err error) {
	if env, err = environmentID(r); err != nil {
		return "", err
	}
	if err := requireEnvironmentScope(p, env); err != nil {
		return "", err
	}
	_, err = s.environment(r.Context(), env)
	return env, err
}

// itemScope reads {env} and {work} for the item endpoints that the queue's
// credentials drive (not heartbeat and stop, which a sessions token also
// reaches: see requireWorkScope), and expires lapsed leases first, so the
// item is read as it stands now.
func (s *Server) itemScope(r *http.Request, p Principal) (env, work string, err error) {
	if env, work, err = workPath(r); err != nil {
		return "", "", err
	}
	if err := requireEnvironmentScope(p, env); err != nil {
		return "", "", err
	}
	return env, work, s.app.Work.ExpireLeases(r.Context(), env)
}

// pollWork claims the oldest claimable item, waiting up to block_ms for
// one. The wait is woken when the environment's queue gains an item
// (app.Work.WaitQueued), not by
// re-reading the database on a timer.
func (s *Server) pollWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, err := environmentID(r)
	if err != nil {
		return err
	}
	if err := requireEnvironmentScope(p, env); err != nil {
		return err
	}
	q := r.URL.Query()
	var block time.Duration
	if v := q.Get("block_ms"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxPollBlockMS {
			return apiErrorf(invalidRequest, "block_ms must be a whole number from 1 to %d (milliseconds to wait for work), got %q; omit it for a poll that does not wait", api.MaxPollBlockMS, v)
		}
		block = time.Duration(n) * time.Millisecond
	}
	reclaimMS, err := rangeParam(q, "reclaim_older_than_ms", 1, maxDurationMS, defaultReclaimAfter.Milliseconds(),
		"a positive number of milliseconds after which a claimed item not yet acknowledged is handed out again")
	if err != nil {
		return err
	}
	reclaim := time.Duration(reclaimMS) * time.Millisecond
	ctx := r.Context()
	claimed, token, ok, err := s.app.Work.Poll(ctx, app.Poll{EnvironmentID: env, WorkerID: r.Header.Get("Anthropic-Worker-ID"),
		ReclaimOlderThan: reclaim, ClaimTTL: claimTTL, Block: block})
	if err != nil {
		return orMissing(err, "environment", env, listEnvironments)
	}
	if !ok {
		if ctx.Err() != nil {
			return nil
		}
		// "No work" is a 200 with a JSON null: the official SDK fails to
		// decode an empty 204 and would back off as if the server broke.
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	out := wireWork(claimed)
	enc := api.WorkSecret{SessionsToken: token, APIBaseURL: s.cfg.PublicBaseURL}.Encode()
	out.Secret = &enc
	s.metrics.claims.WithLabelValues(env).Inc()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) ackWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, work, err := s.itemScope(r, p)
	if err != nil {
		return err
	}
	got, err := s.app.Work.Ack(r.Context(), env, work)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return workNotFound(env, work)
	case errors.Is(err, storage.ErrWorkStopped):
		return apiErrorf(api.Conflict, "work item %s is stopped; there is nothing to acknowledge", work)
	case errors.Is(err, storage.ErrWorkNotClaimed):
		return apiErrorf(api.Conflict, "work item %s is not claimed (never polled, or its claim lapsed); poll the queue to claim it before acknowledging", work)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, wireWork(got))
	return nil
}

// requireWorkScope admits an API key, an environment key of env, or a
// sessions token of this work item; tokenID is the token's id ("" for the
// others). Whether the token is still the item's current one is the
// heartbeat's and the stop's business: they answer a stale token with 412
// and 409 as the official worker expects.
func requireWorkScope(p Principal, env, work string) (tokenID string, err error) {
	if p.Kind == storage.SessionsToken {
		if p.WorkID != work || p.EnvironmentID != env {
			return "", apiErrorf(permission, "this sessions token reaches only its own work item %s", p.WorkID)
		}
		return p.ID, nil
	}
	return "", requireEnvironmentScope(p, env)
}

func (s *Server) heartbeatWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, work, err := workPath(r)
	if err != nil {
		return err
	}
	tokenID, err := requireWorkScope(p, env, work)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	expected := q.Get("expected_last_heartbeat")
	if expected == "" {
		return apiErrorf(invalidRequest, "expected_last_heartbeat is required: send %s on the first heartbeat of a lease, then the last_heartbeat of the previous response", api.NoHeartbeat)
	}
	ttl := int64(api.DefaultLeaseTTLSeconds)
	if v := q.Get("desired_ttl_seconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return apiErrorf(invalidRequest, "desired_ttl_seconds must be a positive whole number of seconds, got %q", v)
		}
		ttl = min(max(n, api.MinLeaseTTLSeconds), api.MaxLeaseTTLSeconds)
	}
	ctx := r.Context()
	got, err := s.app.Work.Heartbeat(ctx, storage.Heartbeat{EnvironmentID: env, WorkID: work, Expected: expected, TTL: time.Duration(ttl) * time.Second, TokenID: tokenID})
	var mm *storage.LeaseMismatchError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return workNotFound(env, work)
	case errors.As(err, &mm):
		cur := leaseState(mm.Current)
		last := "none"
		if cur.LastHeartbeat != nil {
			last = *cur.LastHeartbeat
		}
		// The hosted API answers a stale beat 412 with the invalid_request_error
		// type; clients key on the status and details.error_code.
		ae := apiErrorf(invalidRequest, "heartbeat precondition failed: expected_last_heartbeat %q does not match the lease of work item %s (state %s, last heartbeat %s); this worker no longer holds it, so stop serving the item without stopping it", expected, work, cur.State, last)
		ae.StatusCode = http.StatusPreconditionFailed
		ae.Details = api.HeartbeatPreconditionDetails{ErrorCode: api.HeartbeatPreconditionFailed, CurrentState: cur}.Map()
		s.log.InfoContext(ctx, "stale heartbeat refused", "environment_id", env, "work_id", work, "state", cur.State)
		return ae
	case err != nil:
		return err
	}
	resp := api.WorkHeartbeat{Type: "work_heartbeat", State: got.State}
	if got.LatestHeartbeatAt != nil {
		resp.LastHeartbeat = storage.HeartbeatToken(*got.LatestHeartbeatAt)
	}
	if got.State != api.WorkStopped {
		resp.LeaseExtended, resp.TTLSeconds = true, got.LeaseTTLSeconds
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// stopWork asks an item to stop: gracefully (stopping, seen by its worker
// on the next heartbeat) or, with force, at once. 204 as in the hosted API;
// an item already stopped is a 409, which the official worker ignores.
func (s *Server) stopWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, work, err := workPath(r)
	if err != nil {
		return err
	}
	tokenID, err := requireWorkScope(p, env, work)
	if err != nil {
		return err
	}
	var req api.StopWorkRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	_, err = s.app.Work.Stop(r.Context(), env, work, tokenID, req.Force, p.Caller())
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return workNotFound(env, work)
	case errors.Is(err, storage.ErrWorkStopped):
		return apiErrorf(api.Conflict, "work item %s is already stopped", work)
	case err != nil:
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, work, err := s.itemScope(r, p)
	if err != nil {
		return err
	}
	got, err := s.store.GetWork(r.Context(), env, work)
	if errors.Is(err, storage.ErrNotFound) {
		return workNotFound(env, work)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireWork(got))
	return nil
}

func (s *Server) updateWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, work, err := s.itemScope(r, p)
	if err != nil {
		return err
	}
	var req api.UpdateWorkRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	got, err := s.app.Work.Update(r.Context(), env, work, req.Metadata, p.Caller())
	if errors.Is(err, storage.ErrNotFound) {
		return workNotFound(env, work)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireWork(got))
	return nil
}

func (s *Server) listWork(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, err := s.queueScope(r, p)
	if err != nil {
		return err
	}
	l, err := listParams(r.URL.Query(), "work", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := s.app.Work.ExpireLeases(ctx, env); err != nil {
		return err
	}
	list, err := s.store.ListWork(ctx, env, l.query(false))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(x storage.Work) string { return x.ID }, wireWork))
	return nil
}

func (s *Server) workStats(w http.ResponseWriter, r *http.Request, p Principal) error {
	env, err := s.queueScope(r, p)
	if err != nil {
		return err
	}
	st, err := s.app.Work.QueueStats(r.Context(), env)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
