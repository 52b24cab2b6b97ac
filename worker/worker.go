package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
	"github.com/memstore/memstore/sandbox"
)

// Defaults of Config's zero values.
const (
	DefaultMaxIdle = 60 * time.Second
)

// DefaultMaxSessions is how many sessions Run serves at once when
// Config.MaxSessions is 0: two per CPU, at least 2 and at most 64. A
// session spends most of its life waiting for the model, and the worker's
// own share of one is a few goroutines and a few MB; what its agent runs
// in bash is what takes the CPU, so the figure follows the CPUs.
func DefaultMaxSessions() int { return min(max(2*runtime.NumCPU(), 2), 64) }

// DefaultMaxStarting is how many claimed sessions Run starts at once
// (fetched, mounted, given their tools) when Config.MaxStarting is 0: one
// per CPU, at least 2. A start is the CPU and disk work of writing every
// memory of every store into a folder. Claims wait for a free start, so an
// item is claimed only when it can be started at once and, meanwhile,
// stays in the queue where any worker of the fleet may take it: a burst
// of 32 claimed together shared two CPUs and each took 2–5 s (p95) to its
// first tool result; two at a time took 0.8–1.1 s (docs/worker-sessions.md).
func DefaultMaxStarting() int { return max(runtime.NumCPU(), 2) }

// Poll loop timing.
const (
	// minPollPeriod paces polls that come back empty at once (a server that
	// does not long-poll); memstore's long poll already waits up to 999 ms.
	minPollPeriod = time.Second
	// Failed polls and acks back off from 2 s doubling to a minute.
	pollRetryBase = 2 * time.Second
	pollRetryMax  = time.Minute
	// queueCallTimeout bounds a poll (which waits at most 999 ms on the
	// server) and an ack, so a server that stops answering without closing
	// the connection cannot stall the loop.
	queueCallTimeout = 30 * time.Second
)

// Config configures a Worker.
type Config struct {
	// Client reaches the API. Its credential does not matter: the worker
	// polls with EnvironmentKey and serves each item with the sessions
	// token from the item's secret (client.With).
	Client *client.Client
	// EnvironmentID and EnvironmentKey: the environment whose queue Run
	// polls. RunItem needs the key only for items whose secret has no
	// sessions token.
	EnvironmentID  string
	EnvironmentKey string
	// WorkerID goes in Anthropic-Worker-ID on polls; default
	// "<hostname>-<16 hex digits>".
	WorkerID string
	// Workdir holds the sessions' rooms: each session works in a fresh
	// folder of its own in it, <Workdir>/<session id>.room, its working
	// directory and HOME, removed when the session ends. Default: the
	// current directory.
	Workdir string
	// KeepWorkdirs keeps each session's room when it ends, for
	// inspection; the next time the same session is served it starts in
	// an empty one all the same.
	KeepWorkdirs bool
	// MaxSessions is how many sessions Run serves at once (claims pause
	// while that many run); 0 is DefaultMaxSessions(), 1 serves one at a
	// time. Each has its own lease, shell, mounts and sync; they share
	// the worker's HTTP client and its connections.
	MaxSessions int
	// MaxStarting is how many of them Run starts at once (see
	// DefaultMaxStarting, which 0 stands for); claims wait for a free
	// start. A lone worker given a burst larger than that may start them
	// all together with MaxStarting = MaxSessions, for the burst's total
	// time rather than each session's.
	MaxStarting int
	// MountRoot replaces the /mnt/memory prefix of every store's mount
	// path, for hosts where /mnt is not writable and for tests. Empty or
	// /mnt/memory mounts stores where the server says. Another root must
	// be a folder the worker can write in when New runs (unless memory is
	// disabled or OnWork takes the items): New never creates it.
	MountRoot string
	// MemorySyncInterval is how often the stores sync while a session
	// runs, checked after each tool call: 0 is memsync's default (15 s),
	// below memsync's minimum (5 s) is refused by New, and a negative value
	// disables memory entirely (sessions run without their stores).
	MemorySyncInterval time.Duration
	// MemorySyncDeletions says what a file deleted in a mount does on the
	// server (memsync.DeletionMode; the zero value deletes; New refuses a
	// value that is none of the modes).
	MemorySyncDeletions memsync.DeletionMode
	// MemorySyncInline runs each due sync after a tool call and before the
	// next, as the official worker does, instead of beside the agent; it
	// also turns off the upload at each write and edit and the following
	// of the change feed (live sync, SPEC §8). Live sync needs nothing of
	// the server: against one without the change feed it still moves the
	// syncs off the agent's path.
	MemorySyncInline bool
	// MaxIdle is how long an item stays attached to a session that went
	// idle after its turn before it is released: 0 is DefaultMaxIdle, a
	// negative value never releases it. The next user.message queues a new
	// item, so a short value frees the worker sooner.
	MaxIdle time.Duration
	// HeartbeatInterval overrides the beat period, which is otherwise half
	// the lease TTL the server grants (between 1 s and 30 s). Set it only
	// to beat more often than that.
	HeartbeatInterval time.Duration
	// OnWork, when set, receives each claimed and acknowledged item (with
	// its secret) instead of the worker serving it: `worker poll --on-work`
	// hands it to a script. An error force-stops the item; a nil return
	// leaves it to whoever OnWork gave it to.
	OnWork func(ctx context.Context, work api.Work) error
	// Sandbox says how each session's bash runs: in a bubblewrap sandbox
	// that shows the session's workdir and stores and nothing else, or
	// unconfined (the zero value). With a sandbox, each session's stores
	// live under a folder of its own in the mount root (<root>/<session
	// id>/<slug>) and are shown at their mount paths, so sessions sharing a
	// store can run side by side on one host. New checks that it works.
	Sandbox sandbox.Config
	// Logger receives the worker's logs, with work_id, session_id,
	// environment_id and memory_store_id attached. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of the memory sync's interval and deletion window;
	// nil is the worker's own clock (time.Now). Tests drive syncs with it.
	Now func() time.Time
	// LeaseTTL is the lease each heartbeat asks for (desired_ttl_seconds,
	// whole seconds; the server bounds it); 0 leaves it to the server. A
	// short lease hands a crashed worker's items to another one sooner, at
	// the price of more heartbeats.
	LeaseTTL time.Duration
	// FaultPoint, when set, is called at the moments a fault-injection test
	// stops or kills the worker: "item.fetched" before the memory is
	// mounted, "tool.ran" after a tool call ran but before its result is
	// posted, "tool.posted" after, and memsync's points (see
	// memsync.SessionConfig). Nil outside such tests.
	FaultPoint func(point string)

	// TracerProvider, when set, receives the worker's spans: one trace
	// per work item (see trace.go), its requests carrying their span to
	// the server. Nil records none; `worker poll` sets the OTLP exporter's
	// when OTEL_EXPORTER_OTLP_ENDPOINT is set.
	TracerProvider trace.TracerProvider

	// Metrics, when set, is where the worker registers its Prometheus
	// series (items, tool calls, syncs, requests, mount time): a registry
	// of its own, which `worker poll --metrics-addr` serves. Nil counts
	// nothing anyone can read.
	Metrics prometheus.Registerer

	// clock paces the worker's own waits (see clock); nil is the real one.
	// Only this package's tests set it.
	clock clock
}

// Worker serves the sessions of one environment: Run polls its queue,
// RunItem serves one item already claimed.
type Worker struct {
	cfg Config
	log *slog.Logger
	// sandbox starts each session's shell; nil runs it unconfined.
	sandbox *sandbox.Launcher
	metrics *metrics
	tracer  trace.Tracer

	mu     sync.Mutex
	active map[*activeItem]struct{} // the items being served, for Abandon
	// folders are the shared store folders held by unsandboxed sessions
	// (see claimShared).
	folders map[string]bool
	// claims are the claim times of items about to be served, for their
	// traces.
	claims map[string]claimTimes
}

// activeItem is an item being served: its log (with its ids), the folders
// its stores are mounted in, and its tools once they are set up.
type activeItem struct {
	log     *slog.Logger
	folders []string
	tools   io.Closer
}

// track records an item as being served until the returned func is called.
func (w *Worker) track(log *slog.Logger) (*activeItem, func()) {
	a := &activeItem{log: log}
	w.mu.Lock()
	w.active[a] = struct{}{}
	w.mu.Unlock()
	w.metrics.itemsActive.Inc()
	return a, func() {
		w.mu.Lock()
		delete(w.active, a)
		w.mu.Unlock()
		w.metrics.itemsActive.Dec()
	}
}

func (w *Worker) setFolders(a *activeItem, folders []string) {
	w.mu.Lock()
	a.folders = folders
	w.mu.Unlock()
}

func (w *Worker) setTools(a *activeItem, tools io.Closer) {
	w.mu.Lock()
	a.tools = tools
	w.mu.Unlock()
}

// Abandon prepares the process to quit now, for a program that cannot wait
// for Run or RunItem to return (memstore's second Ctrl-C, during a flush
// that may take a minute) and calls it right before it exits. For each item
// still served it logs what quitting loses — the item is not stopped, so
// the server offers it again once its lease lapses; the memory edits not
// yet uploaded stay in the store folders, with their journals, for the next
// worker to adopt and upload — and it kills
// the item's shell, which would otherwise outlive the worker, still
// running the agent's command. The worker must not be used afterwards.
func (w *Worker) Abandon() {
	w.mu.Lock()
	var tools []io.Closer
	for a := range w.active {
		if len(a.folders) == 0 {
			a.log.Error("quitting before the work item was let go: it is not stopped, so the server offers it again once its lease lapses")
		} else {
			a.log.Error("quitting before the work item was let go: memory edits not yet uploaded stay in these folders, and the item is not stopped (the server offers it again once its lease lapses)",
				"folders", a.folders,
				"fix", "leave the folders in place: the worker that claims the session next, or mounts these stores there, adopts them and uploads the edits")
		}
		if a.tools != nil {
			tools = append(tools, a.tools)
		}
	}
	w.mu.Unlock()
	for _, t := range tools {
		t.Close()
	}
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Worker, error) {
	if cfg.Client == nil {
		return nil, errors.New("worker.Config.Client is required")
	}
	if cfg.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("no working directory given and the current one is unknown: %w", err)
		}
		cfg.Workdir = wd
	}
	wd, err := filepath.Abs(cfg.Workdir)
	if err != nil {
		return nil, fmt.Errorf("working directory %s: %w", cfg.Workdir, err)
	}
	cfg.Workdir = wd
	if info, err := os.Stat(wd); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("working directory %s is not a directory; create it or pass another with --workdir", wd)
	}
	if cfg.MountRoot != "" {
		if cfg.MountRoot, err = filepath.Abs(cfg.MountRoot); err != nil {
			return nil, fmt.Errorf("mount root: %w", err)
		}
	}
	if err := checkMemory(cfg); err != nil {
		return nil, err
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = defaultWorkerID()
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	switch {
	case cfg.MaxSessions < 0:
		return nil, fmt.Errorf("max sessions %d: serve at least 1 session at a time (0 is the default, %d here)", cfg.MaxSessions, DefaultMaxSessions())
	case cfg.MaxSessions == 0:
		cfg.MaxSessions = DefaultMaxSessions()
	}
	switch {
	case cfg.MaxStarting < 0:
		return nil, fmt.Errorf("max starting %d: start at least 1 session at a time (0 is the default, %d here)", cfg.MaxStarting, DefaultMaxStarting())
	case cfg.MaxStarting == 0:
		cfg.MaxStarting = DefaultMaxStarting()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.clock == nil {
		cfg.clock = realClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.clock.Now
	}
	m := newMetrics(cfg.Metrics)
	if cfg.Metrics != nil {
		cfg.Client = m.instrument(cfg.Client)
	}
	if cfg.TracerProvider != nil {
		cfg.Client = tracePropagation(cfg.Client)
	}
	m.itemsLimit.Set(float64(cfg.MaxSessions))
	w := &Worker{cfg: cfg, log: cfg.Logger, active: map[*activeItem]struct{}{}, folders: map[string]bool{}, metrics: m,
		tracer: newTracer(cfg.TracerProvider), claims: map[string]claimTimes{}}
	if cfg.OnWork == nil {
		// OnWork hands items to something else, which brings its own.
		if w.sandbox, err = sandbox.New(context.Background(), cfg.Sandbox, cfg.Logger); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "memstore-worker"
	}
	b := make([]byte, 8)
	rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// Run polls the environment's queue and serves the claimed items, up to
// Config.MaxSessions at once, each in goroutines of its own, until ctx
// ends; then every session winds down (its call cancelled, its memory
// flushed, its item stopped) and Run returns nil once all have. While
// MaxSessions run, or MaxStarting are starting, Run claims nothing; it
// claims again as one ends or finishes its start. A failed item is logged
// and the loop goes on. Transient failures back off
// with jitter; a permanent refusal of the poll (a wrong key, an unknown
// environment) ends Run with an error that says what to check, after the
// sessions already claimed have ended.
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.EnvironmentID == "" || w.cfg.EnvironmentKey == "" {
		return errors.New("an environment id and an environment key are required to poll (--environment-id and --environment-key, or ANTHROPIC_ENVIRONMENT_ID and ANTHROPIC_ENVIRONMENT_KEY)")
	}
	env := w.cfg.Client.With(client.WithBearerToken(w.cfg.EnvironmentKey), client.WithWorkerID(w.cfg.WorkerID))
	// The loop owns the retries of its polls and acks: its backoff runs
	// from 2 s to a minute, for as long as the worker runs, with one
	// warning per failure. The client's own retries would repeat each
	// request inside that backoff, and warn about each repeat.
	queue := env.With(client.WithRetryPolicy(client.RetryPolicy{}))
	log := w.log.With("environment_id", w.cfg.EnvironmentID)
	log.Info("worker polling for work", "worker_id", w.cfg.WorkerID, "base_url", w.cfg.Client.BaseURL(), "max_sessions", w.cfg.MaxSessions)
	defer w.watchLeftovers(ctx, env, log)()
	var serving sync.WaitGroup
	defer serving.Wait()
	slots := make(chan struct{}, w.cfg.MaxSessions)
	starts := make(chan struct{}, w.cfg.MaxStarting)
	// serve runs a claimed item, which holds a slot and a start, frees the
	// start once the session is started (or over), and the slot when the
	// item is done.
	serve := func(work api.Work) {
		serving.Go(func() {
			defer func() { <-slots }()
			var once sync.Once
			started := func() { once.Do(func() { <-starts }) }
			defer started()
			w.serve(ctx, env, work, started)
		})
	}
	var helpers atomic.Int32
	failures := 0
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		default:
			log.Debug("claims paused: the worker serves as many sessions as it may", "max_sessions", w.cfg.MaxSessions)
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case starts <- struct{}{}:
		case <-ctx.Done():
			<-slots
			return nil
		}
		started := w.cfg.clock.Now()
		work, err := w.claim(ctx, queue, env, api.WorkPollParams{BlockMS: api.MaxPollBlockMS}, log)
		if work == nil {
			<-slots
			<-starts
		}
		var f *claimFailure
		switch {
		case ctx.Err() != nil && work == nil:
			return nil
		case errors.As(err, &f):
			failures++
			d := backoff(failures, pollRetryBase, pollRetryMax)
			f.log.Warn(f.what+" failed; retrying", "attempt", failures, "retry_in", d.Round(time.Millisecond), "err", f.err)
			sleep(ctx, w.cfg.clock, d)
			continue
		case err != nil:
			return err
		}
		failures = 0
		if work == nil {
			sleep(ctx, w.cfg.clock, minPollPeriod-w.cfg.clock.Now().Sub(started))
			continue
		}
		// A failed item has been logged where it failed, once, with what
		// to do; the loop goes on with the next one.
		serve(*work)
		// Where there was one item there are often more (sessions created
		// together): helpers claim them beside this loop.
		for helpers.Load() < burstClaimers-1 {
			helpers.Add(1)
			serving.Go(func() {
				defer helpers.Add(-1)
				w.drainBurst(ctx, queue, env, slots, starts, serve, log)
			})
		}
	}
	return nil
}

// burstClaimers is how many claims Run makes at once while the queue has
// items: each claim is a poll and an ack, two round trips, and a burst of
// 32 sessions claimed one after the other waited 16 s for its last claim
// on a busy 2-CPU host, while the items already claimed were mounting.
const burstClaimers = 4

// drainBurst claims items with polls that do not wait, for as long as
// the queue has them and a slot and a start are free, and serves each: a
// helper of the poll loop, which alone long-polls an empty queue and
// handles failures (a helper that meets one just stops).
func (w *Worker) drainBurst(ctx context.Context, queue, env *client.Client, slots, starts chan struct{}, serve func(api.Work), log *slog.Logger) {
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		default:
			return
		}
		select {
		case starts <- struct{}{}:
		default:
			<-slots
			return
		}
		work, err := w.claim(ctx, queue, env, api.WorkPollParams{}, log)
		if work == nil || err != nil {
			<-slots
			<-starts
			return
		}
		serve(*work)
	}
}

// claimAck is claimFailure.what when the ack failed.
const claimAck = "acknowledging the claimed work item"

// claimFailure is a claim step that failed in a way a later attempt may
// mend: the server could not be reached, or answered 5xx, 408, 409 or 429.
type claimFailure struct {
	// what failed: "polling for work", or claimAck (then an item whose
	// ack may have landed has been stopped).
	what string
	// log carries the environment, and the item when the ack failed.
	log *slog.Logger
	err error
}

func (f *claimFailure) Error() string { return f.what + " failed: " + f.err.Error() }

// claim polls the queue once, with params, and acknowledges the item it
// gets: the one claim step of the poll loop (Run) and the webhook drain
// (Drain). It returns the acknowledged item, or nil when the queue had
// none or ctx ended. A failure a later attempt may mend is a
// *claimFailure, which each caller retries its own way; any other error
// is a refusal no retry changes (a wrong key), which ends the caller.
func (w *Worker) claim(ctx context.Context, queue, env *client.Client, params api.WorkPollParams, log *slog.Logger) (work *api.Work, err error) {
	polled := time.Now()
	defer func() { w.noteClaim(work, polled) }()
	pctx, cancel := context.WithTimeout(ctx, queueCallTimeout)
	work, err = queue.PollWork(pctx, w.cfg.EnvironmentID, params)
	cancel()
	switch {
	case ctx.Err() != nil, err == nil && work == nil:
		return nil, nil
	case err != nil && permanent(err):
		return nil, fmt.Errorf("polling environment %s was refused: %w; check --environment-id and --environment-key (401: the key is wrong or revoked; 403: it belongs to another environment, or the environment is archived; 404: no such environment)", w.cfg.EnvironmentID, err)
	case err != nil:
		return nil, &claimFailure{what: "polling for work", log: log, err: err}
	}
	ilog := log.With("work_id", work.ID, "session_id", work.Data.ID)
	if err := w.ack(ctx, queue, env, work, ilog); err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, &claimFailure{what: claimAck, log: ilog, err: err}
	}
	ilog.Info("work item claimed")
	return work, nil
}

// ack confirms the claim of work through queue. When the ack fails, an
// item whose ack may have landed is stopped (through env), so that it does
// not wait out a lease nobody serves. A 409 means it is stopped already,
// or its claim lapsed and it is back in the queue for another worker:
// stopping it then would strand its session.
func (w *Worker) ack(ctx context.Context, queue, env *client.Client, work *api.Work, log *slog.Logger) error {
	if work.EnvironmentID == "" {
		work.EnvironmentID = w.cfg.EnvironmentID
	}
	actx, cancel := context.WithTimeout(ctx, queueCallTimeout)
	_, err := queue.AckWork(actx, work.EnvironmentID, work.ID)
	cancel()
	if err != nil && ctx.Err() == nil && !client.IsStatus(err, 409) {
		w.forceStop(env, *work, log)
	}
	return err
}

// serve hands a claimed item to OnWork, or runs it here. started (nil
// for none) is called once the session is started: at once for OnWork,
// whose command starts it out of sight.
func (w *Worker) serve(ctx context.Context, env *client.Client, work api.Work, started func()) {
	if w.cfg.OnWork == nil {
		w.handle(ctx, work, "", started)
		return
	}
	if started != nil {
		started()
	}
	if err := w.cfg.OnWork(ctx, work); err != nil {
		log := w.log.With("work_id", work.ID, "session_id", work.Data.ID, "environment_id", work.EnvironmentID)
		log.Error("work item failed: the on-work command failed; stopping the item", "err", err)
		w.forceStop(env, work, log)
	}
}

// forceStop stops an item for good, on a context of its own: it must
// happen even when the worker is shutting down. An item already stopped
// (409) is fine.
func (w *Worker) forceStop(c *client.Client, work api.Work, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err := c.StopWork(ctx, work.EnvironmentID, work.ID, api.StopWorkRequest{Force: true})
	switch {
	case err == nil:
		log.Info("work item stopped")
	case client.IsStatus(err, 409):
		log.Debug("work item was already stopped")
	default:
		log.Warn("force-stopping the work item failed; the server stops it when its lease lapses", "err", err)
	}
}
