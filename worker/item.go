package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/toolset"
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
		return errors.New("the work item has no id")
	case wk.EnvironmentID == "":
		return fmt.Errorf("work item %s has no environment_id", wk.ID)
	case wk.Data.ID == "":
		return fmt.Errorf("work item %s names no session", wk.ID)
	}
	return w.handle(ctx, wk, it.LastHeartbeat, nil)
}

// handle is one item's life, in phases — the credential, the lease
// (heartbeats from the first moment), one session fetch, the memory mount,
// the tools, the agent's tool calls — and then one teardown, which undoes
// what the phases set up, in the order written there. The poll loop and
// RunItem both serve items through it. started, if not nil, is called
// once the session's tools are ready (see Config.MaxStarting).
func (w *Worker) handle(ctx context.Context, work api.Work, lastHeartbeat string, started func()) error {
	if work.Data.Type == "" {
		work.Data.Type = "session"
	}
	if started == nil {
		started = func() {}
	}
	ctx, endSpan := w.startItemSpan(ctx, work)
	it := &item{w: w, work: work, started: started, log: w.log.With("work_id", work.ID, "session_id", work.Data.ID, "environment_id", work.EnvironmentID)}
	it.active, it.untrack = w.track(it.log)
	err := it.run(ctx, lastHeartbeat)
	tctx, span := w.tracer.Start(ctx, "teardown")
	it.teardown(tctx)
	span.End()
	w.metrics.itemDone(err)
	endSpan(err)
	return err
}

// item is one work item being served: what its phases set up, which its
// teardown undoes. A field left nil is a phase that did not get that far.
type item struct {
	w       *Worker
	work    api.Work
	log     *slog.Logger
	active  *activeItem
	untrack func()
	// started frees the item's start (see Config.MaxStarting) once its tools are
	// ready; the poll loop frees it too if the item ends before.
	started func()

	// c calls the API with the item's credential. loops is c without the
	// client's retries, for the lease, the event stream and the result
	// posts: each retries in its own loop, with its own backoff and one
	// warning per failure, so the client repeating a request inside that
	// backoff would only nest a second retry layer and its warnings.
	c, loops *client.Client
	// runCtx carries the item's tools; its cause says why they stopped.
	// It is cut from the worker's ctx so that every cause is one of ours:
	// a shutdown reads "the worker is shutting down", not "context
	// canceled".
	runCtx         context.Context
	stopRun        context.CancelCauseFunc
	stopOnShutdown func() bool
	// The lease outlives runCtx: it keeps beating through the final sync
	// and flush, and ends only right before the force-stop.
	ls          *lease
	stopBeating context.CancelFunc
	beating     chan struct{} // closed when the lease's goroutine is done
	leaseEnd    leaseEnd      // how the lease ended; read after beating closes
	// mem is the session's memory; clean means the session ended on its
	// own (terminated, deleted, idle after its turn), which earns the
	// memory its final sync.
	mem   *memory
	clean bool
	// room is the session's own working directory (Worker.openRoom).
	room string
	// skills are the folders of <room>/skills the session's skills were
	// brought into (Worker.bringSkills).
	skills []string
	tools  *toolset.Toolset
}

// run goes through the phases until the session ends or one fails. Its
// error says why the item failed; each failure is logged where it happens.
func (it *item) run(ctx context.Context, lastHeartbeat string) error {
	w, work, log := it.w, it.work, it.log
	token, err := it.credential()
	if err != nil {
		return err
	}
	it.startLease(ctx, lastHeartbeat)

	if work.Data.Type != "session" {
		log.Info("work item is not a session; stopping it", "type", work.Data.Type)
		return nil
	}
	sess, err := it.c.GetSession(it.runCtx, work.Data.ID)
	if err != nil && it.runCtx.Err() != nil {
		log.Info("session cut short before it started", "cause", context.Cause(it.runCtx))
		return nil
	}
	if err != nil {
		log.Error("work item failed: the session could not be fetched", "err", err)
		return fmt.Errorf("fetch session %s: %w", work.Data.ID, err)
	}
	if sess.Status == api.SessionTerminated {
		w.finishLeftovers(it.runCtx, it.c, sess, token, log)
		log.Info("the session is already terminated; nothing to run")
		return nil
	}
	if w.cfg.FaultPoint != nil {
		w.cfg.FaultPoint("item.fetched")
	}

	// The session's events are followed while its memory mounts (calls
	// wait for the tools): the first call runs as soon as they are ready.
	r := newRunner(it.loops, sess.ID, it.ls.TTL, w.cfg.MaxIdle, w.cfg.clock, log)
	r.faultPoint, r.toolCalled, r.tracer = w.cfg.FaultPoint, w.metrics.toolCalled, w.tracer
	r.start(it.runCtx)
	ran := false
	defer func() {
		if !ran {
			r.stop()
		}
	}()

	mounts, mounted, err := it.mount(sess, token)
	if err != nil || !mounted {
		return err
	}

	if it.room, err = w.openRoom(sess.ID, log); err != nil {
		log.Error("work item failed: the session's room could not be made", "err", err)
		return err
	}
	it.skills = w.bringSkills(it.runCtx, it.c, sess, it.room, log)
	ts, err := toolset.New(w.toolsetConfig(it.room, mounts, it.skills, log))
	if err != nil {
		log.Error("work item failed: the tools could not be set up", "err", err)
		return err
	}
	it.tools = ts
	w.setTools(it.active, ts)
	it.started()

	afterCall := func(context.Context, toolset.Result) {}
	if it.mem != nil {
		afterCall = it.mem.afterCall
		if !w.cfg.MemorySyncInline {
			it.mem.StartLive(it.runCtx)
		}
	}
	ran = true
	if it.clean, err = r.run(it.runCtx, ts, afterCall); err != nil {
		log.Error("work item failed: the session's events could not be followed", "err", err)
		return err
	}
	if it.clean {
		log.Info("session served", "ended", r.endReason())
	} else {
		log.Info("session cut short", "cause", context.Cause(it.runCtx))
	}
	return nil
}

// credential picks what the item is served with: the work secret's
// sessions token, or the environment key when the secret has none. It
// returns the token ("" when the key is used).
func (it *item) credential() (token string, err error) {
	work, log := it.work, it.log
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
	cred := cmp.Or(token, it.w.cfg.EnvironmentKey)
	if cred == "" {
		log.Error("work item failed: no credential: the work secret carries no sessions token and no environment key is configured",
			"fix", "serve the item with the secret the poll returned (ANTHROPIC_WORK_SECRET or --work-secret-file), or give the worker the environment key (--environment-key)")
		return "", fmt.Errorf("work item %s: no credential: the work secret carries no sessions token and no environment key is configured; pass the secret (ANTHROPIC_WORK_SECRET) or the key (--environment-key)", work.ID)
	}
	it.c = it.w.cfg.Client.With(client.WithBearerToken(cred))
	it.loops = it.c.With(client.WithRetryPolicy(client.RetryPolicy{}))
	return token, nil
}

// startLease makes the run context and starts heartbeating; a lease the
// server stops or takes away cancels the run context with the cause.
func (it *item) startLease(ctx context.Context, lastHeartbeat string) {
	w := it.w
	it.runCtx, it.stopRun = context.WithCancelCause(context.WithoutCancel(ctx))
	it.stopOnShutdown = context.AfterFunc(ctx, func() { it.stopRun(errShutdown) })
	hbCtx, stopBeating := context.WithCancel(context.WithoutCancel(ctx))
	ls := newLease(it.loops, it.work, lastHeartbeat, w.cfg.HeartbeatInterval, w.cfg.clock, it.log)
	ls.desiredTTL = int64(w.cfg.LeaseTTL / time.Second)
	it.ls = ls
	it.stopBeating, it.beating = stopBeating, make(chan struct{})
	go func() {
		defer close(it.beating)
		it.leaseEnd = ls.run(hbCtx, it.stopRun)
	}()
}

// mount opens and mounts the session's memory, if it has stores;
// mounted is false when the run was cut short meanwhile. The memory is
// kept on the item even when the mount fails: the teardown's End removes
// the folders a failed mount created.
func (it *item) mount(sess *api.Session, token string) (mounts []toolset.Mount, mounted bool, err error) {
	w, log := it.w, it.log
	mem, mounts, err := w.openMemory(it.runCtx, it.c, sess, token, log)
	if err != nil || mem == nil {
		return nil, err == nil, err
	}
	folders := make([]string, len(mounts))
	for i, m := range mounts {
		folders[i] = m.Dir
	}
	w.setFolders(it.active, folders)
	it.mem = mem
	start := time.Now()
	mctx, span := w.tracer.Start(it.runCtx, "mount")
	err = mem.Mount(mctx)
	span.End()
	switch {
	case err != nil && it.runCtx.Err() != nil:
		log.Info("session cut short while its memory was being mounted", "cause", context.Cause(it.runCtx))
		return nil, false, nil
	case err != nil:
		// memsync logged each refusal on a line of its own, with the
		// store, its folder, its mount path and the fix; repeating them
		// here would only bury that line.
		log.Error("work item failed: a memory store could not be mounted (the lines above say which and what to do)")
		return nil, false, err
	}
	w.metrics.mountDuration.Observe(time.Since(start).Seconds())
	return mounts, true, nil
}

// teardown undoes what the phases set up, in this order:
//  1. the tools close: bash and everything it started are killed before
//     the last sync reads the folders;
//  2. the session's skill folders are removed, then its room (or the
//     room is kept, with KeepWorkdirs);
//  3. the memory ends (final sync when clean, flush, folder removal),
//     bounded by memsync itself and detached from ctx: a shutdown is
//     exactly when the flush matters; then its shared folders are let go;
//  4. the lease stops beating (it kept the item ours through 3);
//  5. the item is force-stopped, unless its lease was lost to another;
//  6. the run context is released;
//  7. the item stops being tracked: until then Abandon sees it.
func (it *item) teardown(ctx context.Context) {
	if it.tools != nil {
		it.tools.Close()
	}
	if it.room != "" {
		removeSkills(it.room, it.skills, it.log)
		it.w.closeRoom(it.room, it.log)
	}
	if it.mem != nil {
		it.mem.End(context.WithoutCancel(ctx), it.clean)
	}
	if it.beating != nil {
		it.stopBeating()
		<-it.beating
		if it.leaseEnd == leaseLost {
			it.log.Info("work item released without stopping it: its lease is lost")
		} else {
			it.w.forceStop(it.c, it.work, it.log)
		}
	}
	if it.stopRun != nil {
		it.stopOnShutdown()
		it.stopRun(nil)
	}
	it.untrack()
}
