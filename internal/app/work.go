package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
)

// Work is the side of the work queue both roads share: expiring lapsed
// leases (and letting the runtime react to items that stopped), the queue
// stats, who polls, and the wake-ups of waiting polls.
type Work struct {
	app *App
	// queues wakes long polls, by environment id, when its queue gains an
	// item.
	queues  waiters
	pollers pollers
	// leaseExpiries counts leases that lapsed, by environment and what
	// became of the item.
	leaseExpiries *prometheus.CounterVec
}

func newWork(a *App) *Work {
	w := &Work{app: a, queues: newWaiters(), pollers: pollers{seen: map[string]map[string]time.Time{}},
		leaseExpiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_work_lease_expiries_total",
			Help: "Work item leases that lapsed (the worker stopped beating), by environment and what became of the item: queued again or stopped.",
		}, []string{"environment_id", "state"})}
	a.metrics.MustRegister(w.leaseExpiries)
	return w
}

// WaitQueued returns a channel closed when env's queue next gains an item
// through this process (or another sharing the database; see Start). A
// long poll takes it before it looks at the queue.
func (w *Work) WaitQueued(env string) <-chan struct{} { return w.queues.wait(env) }

// Queued wakes the long polls of env: an item was queued there.
func (w *Work) Queued(env string) { w.queues.wake(env) }

// PollWaiting reports whether a long poll of env waits now (for tests that
// must know one is parked before they queue an item).
func (w *Work) PollWaiting(env string) bool { return w.queues.waiting(env) }

// ExpireLeases expires env's lapsed leases before a queue operation reads
// them, and lets the runtime react for every item that stopped on the way.
func (w *Work) ExpireLeases(ctx context.Context, env string) error {
	lapsed, err := w.app.store.ExpireLeases(ctx, env)
	if err != nil {
		return err
	}
	w.settled(ctx, env, lapsed)
	return nil
}

// settled counts the leases an expiry settled and lets the runtime react
// for every item that stopped.
func (w *Work) settled(ctx context.Context, env string, lapsed []storage.Work) {
	for _, x := range lapsed {
		w.leaseExpiries.WithLabelValues(env, string(x.State)).Inc()
		if x.State != api.WorkStopped {
			continue
		}
		w.app.log.InfoContext(ctx, "work item stopped: its lease lapsed while stopping", "environment_id", env, "work_id", x.ID, "session_id", x.SessionID)
		w.app.Sessions.React(ctx, x.SessionID)
	}
}

// QueueStats counts an environment's queue as the API reports it (leases
// past their time expired first), with the workers that polled it through
// any server sharing the database.
func (w *Work) QueueStats(ctx context.Context, env string) (api.WorkQueueStats, error) {
	if err := w.ExpireLeases(ctx, env); err != nil {
		return api.WorkQueueStats{}, err
	}
	st, err := w.app.store.WorkStats(ctx, env)
	if err != nil {
		return api.WorkQueueStats{}, err
	}
	polling, err := w.workersPolling(ctx, env)
	return api.WorkQueueStats{Type: "work_queue_stats", Depth: st.Depth, Pending: st.Pending,
		OldestQueuedAt: st.OldestQueuedAt, WorkersPolling: polling}, err
}

// workersPolling counts the workers that polled env in the last
// api.WorkersPollingWindow, wherever Poll noted them.
func (w *Work) workersPolling(ctx context.Context, env string) (int64, error) {
	if log, ok := w.app.store.(storage.PollLog); ok {
		return log.CountPollers(ctx, env, w.app.now().Add(-api.WorkersPollingWindow))
	}
	return w.pollers.count(env, w.app.now()), nil
}

// pollers remembers when each worker (Anthropic-Worker-ID) last polled each
// environment, for workers_polling in the queue stats, when one server
// owns the database. It lives in memory: it only covers the last 30
// seconds, so a restart loses at most that much of it, and it spares the
// database a write per poll.
type pollers struct {
	mu   sync.Mutex
	seen map[string]map[string]time.Time // environment → worker → last poll
}

func (p *pollers) saw(env, worker string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.seen[env]
	if m == nil {
		m = map[string]time.Time{}
		p.seen[env] = m
	}
	m[worker] = now
}

// count returns how many workers polled env in the window before now,
// forgetting the older ones.
func (p *pollers) count(env string, now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for w, t := range p.seen[env] {
		if now.Sub(t) > api.WorkersPollingWindow {
			delete(p.seen[env], w)
			continue
		}
		n++
	}
	return n
}

// Update merges a metadata patch into a work item's metadata, checked
// whole. A missing item is storage.ErrNotFound.
func (w *Work) Update(ctx context.Context, env, work string, metadata map[string]*string, by Caller) (storage.Work, error) {
	got, err := w.app.store.UpdateWork(ctx, env, work, func(x *storage.Work) error {
		md, err := patchMetadata("metadata", x.Metadata, metadata)
		x.Metadata = md
		return err
	})
	if err != nil {
		return got, err
	}
	w.app.log.InfoContext(ctx, "work updated", "environment_id", env, "work_id", work, by.attr())
	return got, nil
}

// Stop asks a work item to stop: gracefully (stopping, which its worker
// sees on its next heartbeat) or, with force, at once; an item that
// stopped lets its session's runtime react. tokenID, when a sessions token
// asks, must be the current claim's. A missing item is storage.ErrNotFound,
// one already stopped storage.ErrWorkStopped.
func (w *Work) Stop(ctx context.Context, env, work, tokenID string, force bool, by Caller) (storage.Work, error) {
	if err := w.ExpireLeases(ctx, env); err != nil {
		return storage.Work{}, err
	}
	if tokenID != "" {
		cur, err := w.app.store.GetWork(ctx, env, work)
		if err != nil {
			return cur, err
		}
		if cur.State != api.WorkStopped && cur.TokenID != tokenID {
			return cur, api.Errorf(api.Permission, "this sessions token belongs to an earlier claim of work item %s (its lease lapsed or it was reclaimed); it cannot stop the item now", work)
		}
	}
	got, err := w.app.store.StopWork(ctx, env, work, force)
	if err != nil {
		return got, err
	}
	w.app.log.InfoContext(ctx, "work stop requested", "environment_id", env, "work_id", work,
		"session_id", got.SessionID, "force", force, "state", got.State, by.attr())
	if got.State == api.WorkStopped {
		w.app.Sessions.React(ctx, got.SessionID)
	}
	return got, nil
}

// SessionsTokenPrefix starts every sessions token.
const SessionsTokenPrefix = "sk-memstore-sess-"

// Poll is one worker's request for work.
type Poll struct {
	EnvironmentID, WorkerID string
	// ReclaimOlderThan hands out again an item claimed this long ago and
	// never acknowledged; ClaimTTL is the lease a claim starts with.
	ReclaimOlderThan, ClaimTTL time.Duration
	// Block is how long to wait for an item when none is claimable.
	Block time.Duration
}

// Poll claims the oldest claimable item of the environment for the
// worker, waiting up to p.Block for one, and mints the claim's sessions
// token (returned once, stored hashed). ok is false when no item came in
// time or ctx ended. The wait is woken when the queue gains an item, not
// by re-reading the database on a timer. An archived environment hands
// out nothing (a permission error); a missing one is storage.ErrNotFound.
func (w *Work) Poll(ctx context.Context, p Poll) (claimed storage.Work, token string, ok bool, err error) {
	deadline := time.Now().Add(p.Block)
	if _, shared := w.app.store.(storage.PollLog); !shared && p.WorkerID != "" {
		w.pollers.saw(p.EnvironmentID, p.WorkerID, w.app.now())
	}
	// The first round notes the worker's poll where every server counts
	// them (storage.PollLog), in the claim's transaction.
	polledAt := w.app.now()
	if p.WorkerID == "" {
		polledAt = time.Time{}
	}
	for {
		wake := w.WaitQueued(p.EnvironmentID)
		// Each round's claim settles the lapsed leases first and reads the
		// environment, in its transaction: an archive stops a waiting poll
		// too.
		token := secret.New(SessionsTokenPrefix)
		claimed, lapsed, err := w.app.store.ClaimWork(ctx, storage.Claim{
			EnvironmentID: p.EnvironmentID, WorkerID: p.WorkerID, ReclaimOlderThan: p.ReclaimOlderThan, ClaimTTL: p.ClaimTTL,
			Token: storage.Credential{ID: ids.NewAt(ids.SessionsToken, w.app.now()), Name: "work secret"}, TokenHash: secret.Hash(token),
			PolledAt: polledAt,
		})
		polledAt = time.Time{}
		w.settled(ctx, p.EnvironmentID, lapsed)
		if err == nil {
			w.app.log.InfoContext(ctx, "work claimed", "environment_id", p.EnvironmentID, "work_id", claimed.ID,
				"session_id", claimed.SessionID, "worker_id", claimed.WorkerID)
			return claimed, token, true, nil
		}
		if errors.Is(err, storage.ErrEnvironmentArchived) {
			// Archiving retires the queue, so no credential may claim from
			// it any more; items claimed before go on with their own
			// sessions tokens until they end.
			return storage.Work{}, "", false, api.Errorf(api.Permission, "environment %s is archived, so its queue hands out no more work and its keys may not poll; stop the workers of this environment (sessions already claimed keep running)", p.EnvironmentID)
		}
		if !errors.Is(err, storage.ErrNoWork) {
			return storage.Work{}, "", false, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return storage.Work{}, "", false, nil
		}
		t := time.NewTimer(remaining)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return storage.Work{}, "", false, nil
		}
	}
}

// Ack acknowledges a claimed item: its worker has taken it up. A missing
// item is storage.ErrNotFound; a stopped one storage.ErrWorkStopped; one
// not claimed (never, or its claim lapsed) storage.ErrWorkNotClaimed.
func (w *Work) Ack(ctx context.Context, env, work string) (storage.Work, error) {
	return w.app.store.AckWork(ctx, env, work)
}

// Heartbeat extends an item's lease for the worker that holds it, after
// expiring the environment's lapsed leases (a beat after its lease lapsed
// is stale). A beat whose expected token is not the lease's current one is
// a *storage.LeaseMismatchError carrying the item as it is.
func (w *Work) Heartbeat(ctx context.Context, h storage.Heartbeat) (storage.Work, error) {
	if err := w.ExpireLeases(ctx, h.EnvironmentID); err != nil {
		return storage.Work{}, err
	}
	return w.app.store.HeartbeatWork(ctx, h)
}
