package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/toolset"
)

// stopTimeout bounds the force-stop that ends every item.
const stopTimeout = 10 * time.Second

// ErrNoSessionsToken fails an item whose session has memory stores attached
// but whose work secret carries no sessions token: the memory endpoints
// refuse the environment key, so the stores cannot be mounted, and a
// session must never run without the memory it was promised. Set a negative
// MemorySyncInterval to run such sessions without memory on purpose.
var ErrNoSessionsToken = errors.New("the work secret carries no sessions token, so the session's memory stores cannot be mounted")

// Item is one work item already claimed from the queue, for RunItem.
type Item struct {
	// Work needs ID, EnvironmentID, Data (the session) and Secret.
	Work api.Work
	// LastHeartbeat continues a lease another process already holds: the
	// last_heartbeat its latest heartbeat returned. Empty starts the lease.
	LastHeartbeat string
}

// RunItem serves one claimed item: the per-item flow of the poll loop,
// without the poll and the ack. It is what `memstore worker run` calls in
// a per-session sandbox. The error says why the item failed; the item is
// force-stopped either way (unless its lease was lost), which leaves a
// session whose tool call was outstanding idle with requires_action.
func (w *Worker) RunItem(ctx context.Context, it Item) error {
	wk := it.Work
	switch {
	case wk.ID == "":
		return errors.New("worker: the work item has no id")
	case wk.EnvironmentID == "":
		return fmt.Errorf("worker: work item %s has no environment_id", wk.ID)
	case wk.Data.ID == "":
		return fmt.Errorf("worker: work item %s names no session", wk.ID)
	}
	return w.handle(ctx, wk, it.LastHeartbeat)
}

// handle is one item's life: heartbeat from the first moment, one session
// fetch, the memory mount, the tool runner, the session-end memory
// handling, cleanup, and the force-stop.
func (w *Worker) handle(ctx context.Context, work api.Work, lastHeartbeat string) error {
	if work.Data.Type == "" {
		work.Data.Type = "session"
	}
	log := w.log.With("work_id", work.ID, "session_id", work.Data.ID, "environment_id", work.EnvironmentID)
	// Deferred first, so it runs last: the item is served until the
	// force-stop is done.
	active, untrack := w.track(log)
	defer untrack()

	token := ""
	if work.Secret != nil && *work.Secret != "" {
		secret, derr := api.DecodeWorkSecret(*work.Secret)
		switch {
		case derr != nil:
			log.Warn("the work secret could not be decoded; using the environment key for this item", "err", derr)
		case secret.SessionsToken == "":
			log.Warn("the work secret carries no sessions token; using the environment key for this item")
		default:
			token = secret.SessionsToken
		}
	}
	cred := cmp.Or(token, w.cfg.EnvironmentKey)
	if cred == "" {
		log.Error("work item failed: no credential: the work secret carries no sessions token and no environment key is configured",
			"fix", "serve the item with the secret the poll returned (ANTHROPIC_WORK_SECRET or --work-secret-file), or give the worker the environment key (--environment-key)")
		return fmt.Errorf("work item %s: no credential: the work secret carries no sessions token and no environment key is configured; pass the secret (ANTHROPIC_WORK_SECRET) or the key (--environment-key)", work.ID)
	}
	c := w.cfg.Client.With(client.WithBearerToken(cred))

	// runCtx carries the item's tools; its cause says why they stopped.
	// It is cut from ctx so that every cause is one of ours: a shutdown
	// reads "the worker is shutting down", not "context canceled".
	runCtx, stopRun := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRun(nil)
	stopOnShutdown := context.AfterFunc(ctx, func() { stopRun(errShutdown) })
	defer stopOnShutdown()

	// The lease outlives runCtx: it keeps beating through the final sync
	// and flush, and ends only right before the force-stop.
	hbCtx, stopBeating := context.WithCancel(context.WithoutCancel(ctx))
	ls := newLease(c, work, lastHeartbeat, w.cfg.HeartbeatInterval, w.cfg.clock, log)
	ls.desiredTTL = int64(w.cfg.LeaseTTL / time.Second)
	var end leaseEnd
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		end = ls.run(hbCtx, stopRun)
	}()
	defer func() {
		stopBeating()
		<-beating
		if end == leaseLost {
			log.Info("work item released without stopping it: its lease is lost")
			return
		}
		w.forceStop(c, work, log)
	}()

	if work.Data.Type != "session" {
		log.Info("work item is not a session; stopping it", "type", work.Data.Type)
		return nil
	}
	sess, err := c.GetSession(runCtx, work.Data.ID)
	if err != nil && runCtx.Err() != nil {
		log.Info("session cut short before it started", "cause", context.Cause(runCtx))
		return nil
	}
	if err != nil {
		log.Error("work item failed: the session could not be fetched", "err", err)
		return fmt.Errorf("fetch session %s: %w", work.Data.ID, err)
	}
	if sess.Status == api.SessionTerminated {
		w.finishLeftovers(runCtx, c, sess, token, log)
		log.Info("the session is already terminated; nothing to run")
		return nil
	}
	if w.cfg.FaultPoint != nil {
		w.cfg.FaultPoint("item.fetched")
	}

	mem, mounts, err := w.openMemory(c, sess, token, log)
	if err != nil {
		return err
	}
	folders := make([]string, len(mounts))
	for i, m := range mounts {
		folders[i] = m.Dir
	}
	w.setFolders(active, folders)
	// clean: the session ended on its own (terminated, deleted, idle after
	// its turn), which earns the memory its final sync.
	clean := false
	if mem != nil {
		mounted := mem.Mount(runCtx)
		defer func() {
			// Bounded by memsync itself (the final sync and the flush get
			// 30 s each), and detached from ctx: a shutdown is exactly when
			// the flush matters. It also removes the folders it created,
			// after a failed mount too.
			mem.End(context.WithoutCancel(ctx), clean)
		}()
		if mounted != nil && runCtx.Err() != nil {
			log.Info("session cut short while its memory was being mounted", "cause", context.Cause(runCtx))
			return nil
		}
		if mounted != nil {
			// memsync logged each refusal on a line of its own, with the
			// store, its folder, its mount path and the fix; repeating
			// them here would only bury that line.
			log.Error("work item failed: a memory store could not be mounted (the lines above say which and what to do)")
			return mounted
		}
	}

	ts, err := toolset.New(w.toolsetConfig(mounts, log))
	if err != nil {
		log.Error("work item failed: the tools could not be set up", "err", err)
		return err
	}
	// Closed before the memory's End (deferred earlier, so it runs later):
	// bash and everything it started are killed before the last sync reads
	// the folders.
	defer ts.Close()
	w.setTools(active, ts)

	afterCall := func(context.Context, string, json.RawMessage, bool) {}
	if mem != nil {
		afterCall = mem.afterCall
		if !w.cfg.MemorySyncInline {
			mem.StartLive(runCtx)
		}
	}
	r := newRunner(c, sess.ID, ts, afterCall, ls.TTL, w.cfg.MaxIdle, w.cfg.clock, log)
	r.faultPoint = w.cfg.FaultPoint
	clean, err = r.run(runCtx)
	if err != nil {
		log.Error("work item failed: the session's events could not be followed", "err", err)
		return err
	}
	if clean {
		log.Info("session served", "ended", r.endReason())
	} else {
		log.Info("session cut short", "cause", context.Cause(runCtx))
	}
	return nil
}
