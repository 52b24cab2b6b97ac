// Package app is memstore's service layer: one service per resource, which
// the HTTP API (internal/server) and the web console (internal/console)
// both call for every operation they share. A service validates, makes the
// write through storage, and carries out its side effects — the wake-ups
// of long polls and streams, the session's runtime, metrics, and one log
// line naming who did it — so that a rule the API enforces cannot be
// skipped by the console, and a side effect added once reaches both roads.
//
// What stays outside: reading a request (JSON bodies, forms, query
// parameters, which credential may call what) and wording a refusal for
// its reader. A service returns validation refusals as *api.Error and
// storage's refusals (storage.PathConflictError, ErrStoreArchived, ...)
// unwrapped, for each road to word its way.
//
// Words used with one meaning each, here and in internal/server,
// internal/agent and internal/webhooks:
//
//   - wake: tell whoever waits on something (an event stream, a long poll
//     of the queue or of the change feed, a session's runtime) that it
//     changed. Waiters take a channel before they read, writers wake after
//     they commit (see waiters).
//   - react: let a session's runtime carry out every step its log calls
//     for now, and wait for it (Sessions.React, agent.Runner.React); a
//     model call goes on after.
//   - expire: turn the work leases whose time passed back into queued or
//     stopped items (Work.ExpireLeases; a poll's claim does it in its own
//     transaction).
//   - settled: a webhook delivery that is done, delivered or failed; only
//     the webhooks speak of settling.
package app

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/requestid"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// Config configures an App. Zero values take the documented defaults.
type Config struct {
	Store  storage.Store
	Logger *slog.Logger
	// Now is the clock of leases and timestamps; nil means time.Now.
	Now func() time.Time
	// MaxMemoriesPerStore is the memory count limit of one store (default
	// api.DefaultMaxMemories).
	MaxMemoriesPerStore int
	// Model configures the runtime of agents whose model is not "scripted"
	// (the upstream Messages API and its key).
	Model agent.ClaudeConfig
	// TurnRetry is how often a session whose turn another server holds is
	// tried again (default agent.DefaultTurnRetry).
	TurnRetry time.Duration
	// TurnSweep is how often a server sharing its database looks for
	// sessions whose turn was dropped by a server that died (default
	// DefaultTurnSweep): about the longest such a turn waits.
	TurnSweep time.Duration
	// Webhooks configures the delivery of webhooks.
	Webhooks WebhooksConfig
	// DefaultRetention is the version retention of the stores without a
	// policy of their own (serve --version-retention); zero keeps all.
	DefaultRetention retention.Policy
	// PruneBatch is how many versions one pruning transaction deletes
	// (default DefaultPruneBatch).
	PruneBatch int
	// FollowRing is how many of a session's latest events its followers'
	// shared reader keeps in memory (default DefaultFollowRing); a follower
	// further behind reads the database.
	FollowRing int
	// MCP configures where agents' MCP servers may be.
	MCP MCPConfig
	// SecretsKey seals vault credentials at rest (sealbox.KeySize bytes);
	// without one, credentials cannot be stored.
	SecretsKey []byte
}

// WebhooksConfig configures webhook delivery. The zero value refuses
// private destinations and plain HTTP, and retries by the default policy.
type WebhooksConfig struct {
	// AllowPrivate accepts URLs on addresses that are not globally
	// reachable (loopback, private, link-local, …; see internal/egress),
	// and plain HTTP (serve --webhooks-allow-private).
	AllowPrivate bool
	Policy       webhooks.Policy
}

// DefaultTurnSweep is Config.TurnSweep's default.
const DefaultTurnSweep = 10 * time.Second

// App is the services over one store. Build it with New, run its
// background work with Start and RunWebhooks, and Close it after the
// servers in front of it have stopped.
type App struct {
	MemoryStores *MemoryStores
	Memories     *Memories
	Environments *Environments
	Agents       *Agents
	Work         *Work
	Sessions     *Sessions
	Webhooks     *Webhooks
	Users        *Users
	Credentials  *Credentials
	Skills       *Skills
	Vaults       *Vaults

	cfg     Config
	store   storage.Store
	log     *slog.Logger
	now     func() time.Time
	metrics *prometheus.Registry
}

// New builds the services over cfg.Store. It starts nothing: the agent
// runner's goroutines start with the first session they drive, the
// webhook dispatcher with RunWebhooks, the listening for other servers'
// changes with Start.
func New(cfg Config) *App {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.TurnSweep = cmp.Or(cfg.TurnSweep, DefaultTurnSweep)
	cfg.FollowRing = cmp.Or(cfg.FollowRing, DefaultFollowRing)
	a := &App{
		cfg:     cfg,
		store:   cfg.Store,
		log:     requestid.Logger(cfg.Logger),
		now:     func() time.Time { return cfg.Now().UTC() },
		metrics: prometheus.NewRegistry(),
	}
	a.Credentials = &Credentials{app: a}
	a.MemoryStores = &MemoryStores{app: a}
	a.Memories = newMemories(a)
	a.Environments = &Environments{app: a}
	a.Agents = &Agents{app: a}
	a.Vaults = newVaults(a)
	a.Sessions = newSessions(a)
	a.Work = newWork(a)
	a.Webhooks = newWebhooks(a)
	a.Skills = &Skills{app: a}
	a.Users = NewUsers(cfg.Store, a.log, a.now)
	return a
}

// Store is the store the services write to, for the reads the roads make
// themselves.
func (a *App) Store() storage.Store { return a.store }

// Now is the services' clock, in UTC.
func (a *App) Now() time.Time { return a.now() }

// Logger is the services' logger: it adds the request id a context carries
// to each line, so the roads log with it too.
func (a *App) Logger() *slog.Logger { return a.log }

// Metrics is the registry of the services' series (memory writes, lease
// expiries, webhook attempts); the HTTP server adds its own and serves it.
func (a *App) Metrics() *prometheus.Registry { return a.metrics }

// MaxMemoriesPerStore is the per-store memory limit in force.
func (a *App) MaxMemoriesPerStore() int {
	if a.cfg.MaxMemoriesPerStore > 0 {
		return a.cfg.MaxMemoriesPerStore
	}
	return api.DefaultMaxMemories
}

// Start lets every session that is not terminated react (a turn cut short
// by a restart goes on from its log), then, with a backend shared by
// several servers (storage.Waker), follows their changes until ctx ends:
// streams and long polls wake for changes the others commit, and every
// TurnSweep the turns of servers that died are taken up.
func (a *App) Start(ctx context.Context) error {
	if err := a.Sessions.Resume(ctx); err != nil {
		return err
	}
	return a.ListenForWakes(ctx)
}

// ListenForWakes is Start without the resume: it follows the changes other
// servers sharing the database commit, until ctx ends. Without such a
// backend it does nothing: one process sees all its own writes, and its
// turns end with it.
func (a *App) ListenForWakes(ctx context.Context) error {
	w, ok := a.store.(storage.Waker)
	if !ok {
		return nil
	}
	if err := w.Listen(ctx, a.wakeFrom); err != nil {
		return err
	}
	go a.sweepTurns(ctx)
	return nil
}

// wakeFrom delivers a change another server committed; a wake without a
// topic means changes may have been missed, and wakes everyone. A
// session's log wakes this server's runtime too if it drives the session
// now: the change (an interrupt, say) is its to react to.
func (a *App) wakeFrom(w storage.Wake) {
	switch w.Topic {
	case storage.TopicSession:
		a.Sessions.streams.wake(w.Key)
		a.Sessions.runner.WakeIfDriving(w.Key)
	case storage.TopicQueue:
		a.Work.queues.wake(w.Key)
	default:
		a.Sessions.streams.wakeAll()
		a.Work.queues.wakeAll()
	}
}

// sweepTurns runs the runner's Sweep every TurnSweep: a turn another
// server holds is left to it, one whose server died (mid-turn, or between
// storing a client's event and reacting to it) is taken and carried on.
func (a *App) sweepTurns(ctx context.Context) {
	t := time.NewTicker(a.cfg.TurnSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.Sessions.runner.Sweep(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("could not list the sessions that may need a turn, to take up those whose server died; trying again at the next sweep", "err", err)
		}
	}
}

// RunWebhooks sends webhook deliveries until ctx ends: those due every
// interval, and at once after a change that stored some. Every replica
// sharing a database may run it; each delivery goes out once.
func (a *App) RunWebhooks(ctx context.Context, interval time.Duration) {
	a.Webhooks.dispatch.Run(ctx, interval)
}

// DeliverWebhooks sends the deliveries due now, once, and returns how many
// it attempted (for tests, which drive time themselves).
func (a *App) DeliverWebhooks(ctx context.Context) (int, error) {
	return a.Webhooks.dispatch.RunOnce(ctx)
}

// Close stops the agent runtimes, abandoning model calls in flight (a
// session resumes its turn from its log at the next start). Call it after
// the servers in front have shut down, before closing the store.
func (a *App) Close() {
	a.Sessions.runner.Close()
}

// egress is where webhook URLs may point (internal/egress: globally
// reachable unicast addresses only, unless the operator lifts the rule).
func (a *App) egress() egress.Policy {
	return egress.Policy{AllowPrivate: a.cfg.Webhooks.AllowPrivate, Override: "memstore serve --webhooks-allow-private"}
}
