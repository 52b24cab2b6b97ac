// Package server is memstore's HTTP API: routing, credentials, the error
// envelope, and one file per resource (memory stores, environments and
// their work queue, agents, sessions and events).
package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/webhooks/dispatcher"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	Store  storage.Store
	Logger *slog.Logger
	// Now is the server's clock (leases, timestamps); nil means time.Now.
	Now func() time.Time
	// MaxBodyBytes caps request bodies (default 1 MiB); larger bodies are
	// answered 413 request_too_large.
	MaxBodyBytes int64
	// MaxMemoriesPerStore is the memory count limit of one store (default
	// api.DefaultMaxMemories).
	MaxMemoriesPerStore int
	// PublicBaseURL is the base URL workers reach this server at; it goes
	// into every work secret as api_base_url.
	PublicBaseURL string
	// MountPrefix is the folder under which sessions mount their stores
	// (mount_path = MountPrefix/<slug>); default api.DefaultMountPrefix.
	// Tests point it at a temporary folder.
	MountPrefix string
	// BodyReadTimeout bounds the reading of a request body (default
	// DefaultBodyReadTimeout); a body not in by then is answered 408.
	BodyReadTimeout time.Duration
	// MaxRequestsPerAddress and MaxRequestsPerKey cap the requests in flight
	// from one client address and with one credential (defaults
	// DefaultMaxRequestsPerAddress, DefaultMaxRequestsPerKey; negative: no
	// limit); a request over either is answered 429 with retry-after.
	MaxRequestsPerAddress int
	MaxRequestsPerKey     int
	// StreamKeepalive is how often an idle event stream sends a comment
	// (default 15 s), so proxies do not cut it.
	StreamKeepalive time.Duration
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
	// StallTimeout is how long a response may wait for its client to take
	// more of it before it is cut (default DefaultStallTimeout): see
	// withProgressDeadline.
	StallTimeout time.Duration
	// SpoolDir is where snapshots are staged before they are sent, so that
	// a slow client does not hold the database's read snapshot; "" is the
	// system's temporary folder.
	SpoolDir string
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

// Server serves the API. Build it with New and mount Handler.
type Server struct {
	cfg   Config
	store storage.Store
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux
	cp    *controlPlane
	// egress is where webhook URLs may point; dispatch sends deliveries.
	egress   egress.Policy
	dispatch *dispatcher.Dispatcher
	// metrics are served by MetricsHandler.
	metrics *metrics
	// limits counts the requests in flight per address and per credential.
	limits *limiter
	// credentials caches what authenticate verified (credcache.go).
	credentials credentialCache
	// storeChanges wakes the change feed's long polls when a store's
	// memories change.
	storeChanges notifier
	// closing is closed by CloseStreams, which ends the event streams.
	closing   chan struct{}
	closeOnce sync.Once
}

// DefaultMaxBodyBytes is the request body cap: room for a 100 KiB memory
// with JSON escaping (worst case six bytes per byte) and the rest of a body.
const DefaultMaxBodyBytes = 1 << 20

// New builds a Server over cfg.Store.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = slog.New(requestIDHandler{cfg.Logger.Handler()})
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MountPrefix == "" {
		cfg.MountPrefix = api.DefaultMountPrefix
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MaxRequestsPerAddress == 0 {
		cfg.MaxRequestsPerAddress = DefaultMaxRequestsPerAddress
	}
	if cfg.MaxRequestsPerKey == 0 {
		cfg.MaxRequestsPerKey = DefaultMaxRequestsPerKey
	}
	if cfg.StreamKeepalive <= 0 {
		cfg.StreamKeepalive = 15 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.TurnSweep <= 0 {
		cfg.TurnSweep = DefaultTurnSweep
	}
	s := &Server{
		cfg:   cfg,
		store: cfg.Store,
		log:   cfg.Logger,
		now:   func() time.Time { return cfg.Now().UTC() },
		mux:   http.NewServeMux(),
		cp:    newControlPlane(),

		metrics: newMetrics(cfg.Store),

		limits:       newLimiter(cfg.MaxRequestsPerAddress, cfg.MaxRequestsPerKey),
		storeChanges: notifier{chans: map[string]chan struct{}{}},

		closing: make(chan struct{}),
	}
	s.egress = egress.Policy{AllowPrivate: cfg.Webhooks.AllowPrivate, Override: "memstore serve --webhooks-allow-private"}
	s.dispatch = dispatcher.New(dispatcher.Config{Store: cfg.Store, Logger: cfg.Logger, Now: s.now, Policy: cfg.Webhooks.Policy, Egress: s.egress, Metrics: s.metrics.reg})
	s.cp.runner = agent.NewRunner(cfg.Store, agent.ByModel{Scripted: agent.Scripted{}, Model: agent.NewClaude(cfg.Model)}, agent.RunnerConfig{
		Log: cfg.Logger, TurnRetry: cfg.TurnRetry, Appended: s.cp.sessions.notify})
	s.routes()
	return s
}

// ListenForWakes makes this server follow the others sharing its database
// (a backend offering storage.Waker), until ctx ends: its event streams and
// long polls wake for changes they commit, and every TurnSweep it looks
// for turns their servers dropped by dying. Without such a backend it does
// nothing: one process sees all its own writes, and its turns end with it.
func (s *Server) ListenForWakes(ctx context.Context) error {
	w, ok := s.store.(storage.Waker)
	if !ok {
		return nil
	}
	if err := w.Listen(ctx, s.cp.wake); err != nil {
		return err
	}
	go s.sweepTurns(ctx)
	return nil
}

// sweepTurns runs the runner's Sweep every TurnSweep: a turn another
// server holds is left to it, one whose server died (mid-turn, or between
// storing a client's event and reacting to it) is taken and carried on.
func (s *Server) sweepTurns(ctx context.Context) {
	t := time.NewTicker(s.cfg.TurnSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.cp.runner.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("could not list the sessions that may need a turn, to take up those whose server died; trying again at the next sweep", "err", err)
		}
	}
}

// RunWebhooks sends webhook deliveries until ctx ends: those due every
// interval, and at once after a change through this server that stored
// some (the API's, the console's, an agent runtime's). Every replica
// sharing a database may run it; each delivery goes out once.
func (s *Server) RunWebhooks(ctx context.Context, interval time.Duration) {
	s.dispatch.Run(ctx, interval)
}

// DeliverWebhooks sends the deliveries due now, once, and returns how many
// it attempted (for tests, which drive time themselves).
func (s *Server) DeliverWebhooks(ctx context.Context) (int, error) {
	return s.dispatch.RunOnce(ctx)
}

// Close stops the agent runtimes, abandoning model calls in flight (a
// session resumes its turn from its log at the next start). Call it after
// the HTTP server has shut down, before closing the store.
func (s *Server) Close() {
	s.cp.runner.Close()
}

// Handler returns the API with its middleware: request ids, access logs,
// panic recovery, the in-flight limits, canonical paths, and the body's
// deadline and cap.
func (s *Server) Handler() http.Handler {
	return s.HandlerWithConsole(nil)
}

// HandlerWithConsole is Handler with the web console served at /console/
// (when console is not nil). The console shares request ids, access logs
// and panic recovery, but not the API's credentials or its body cap: it
// signs people in with its own cookie and caps its own forms.
func (s *Server) HandlerWithConsole(console http.Handler) http.Handler {
	var h http.Handler = s.withBodyDeadline(s.withBodyCap(withRoute(s.mux)))
	if console != nil {
		top := http.NewServeMux()
		top.Handle("/console/", console)
		top.Handle("/", h)
		h = withRoute(top)
	}
	return s.withRequestID(s.withAccessLog(s.withRecover(s.withLimits(s.withCanonicalPath(s.withProgressDeadline(h))))))
}

// Logger is the server's logger, which adds the request id a context
// carries to each line logged with it: the logger for handlers served
// beside the API (the console), so their lines name their request too.
func (s *Server) Logger() *slog.Logger { return s.log }

// WaitSession returns a channel closed at the next change of a session's
// event log, for a view that follows it (the console's live session page).
func (s *Server) WaitSession(sessionID string) <-chan struct{} {
	return s.cp.sessions.wait(sessionID)
}

// Closing is closed by CloseStreams: a stream the console serves ends
// then too, so a shutdown does not wait for its browser.
func (s *Server) Closing() <-chan struct{} { return s.closing }

// CloseStreams ends every open event stream, and any opened later after
// its first batch. A stream stays open for as long as its client likes (a
// worker holds one for every session it serves), so http.Server.Shutdown,
// which waits for handlers to return, would otherwise wait out its deadline
// and then cut the streams mid-response. Register it with
// http.Server.RegisterOnShutdown. A client loses nothing: it reconnects
// with Last-Event-ID once a server is back. (Long polls need no such help:
// they return within block_ms, under a second.)
func (s *Server) CloseStreams() {
	s.closeOnce.Do(func() { close(s.closing) })
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	s.memoryRoutes()
	s.environmentRoutes()
	s.workRoutes()
	s.agentRoutes()
	s.sessionRoutes()
	s.eventRoutes()
	s.webhookRoutes()
	// Anything unrouted gets the error envelope rather than the mux's
	// plain-text 404/405.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apiErrorf(notFound, "no route for %s %s: check the method and the path (see the README's API coverage table)", r.Method, r.URL.Path))
	})
}
