// Package server is memstore's HTTP API: routing, credentials and their
// scopes, the error envelope, and one file per resource (memory stores,
// environments and their work queue, agents, sessions and events). A
// handler reads its request and words its answer; the write and what
// follows it are the service layer's (internal/app), which the web console
// calls too.
package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// App is the service layer the handlers call (required); the server
	// logs with its logger and serves its metrics.
	App *app.App
	// MaxBodyBytes caps request bodies (default 1 MiB); larger bodies are
	// answered 413 request_too_large.
	MaxBodyBytes int64
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
	// StallTimeout is how long a response may wait for its client to take
	// more of it before it is cut (default DefaultStallTimeout): see
	// withProgressDeadline.
	StallTimeout time.Duration
	// SpoolDir is where snapshots are staged before they are sent, so that
	// a slow client does not hold the database's read snapshot; "" is the
	// system's temporary folder.
	SpoolDir string
	// TracerProvider, when set, records a span per request (withTrace),
	// joining the caller's trace; nil records none.
	TracerProvider trace.TracerProvider
}

// Server serves the API. Build it with New and mount Handler.
type Server struct {
	cfg Config
	app *app.App
	// store is the app's store, for the reads the handlers make
	// themselves.
	store storage.Store
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux
	// metrics are served by MetricsHandler.
	metrics *metrics
	// limits counts the requests in flight per address and per credential.
	limits *limiter
	// closing is closed by CloseStreams, which ends the event streams.
	closing   chan struct{}
	closeOnce sync.Once
}

// DefaultMaxBodyBytes is the request body cap: room for a 100 KiB memory
// with JSON escaping (worst case six bytes per byte) and the rest of a body.
const DefaultMaxBodyBytes = 1 << 20

// New builds a Server in front of cfg.App. It starts nothing: the app's
// background work (the agent runner, the webhook dispatcher, the wake-ups
// from other servers) is started beside it, by whoever built the app.
func New(cfg Config) *Server {
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
	a := cfg.App
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	s := &Server{
		cfg:     cfg,
		app:     a,
		store:   a.Store(),
		log:     a.Logger(),
		now:     a.Now,
		mux:     http.NewServeMux(),
		metrics: newMetrics(a.Metrics(), a.Store()),
		limits:  newLimiter(cfg.MaxRequestsPerAddress, cfg.MaxRequestsPerKey),
		closing: make(chan struct{}),
	}
	s.routes()
	return s
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
	return s.withRequestID(s.withAccessLog(s.withTrace(s.withRecover(s.withLimits(s.withCanonicalPath(s.withProgressDeadline(h)))))))
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
	s.mcpRoutes()
	s.skillRoutes()
	s.recoveryRoutes()
	s.vaultRoutes()
	// Anything unrouted gets the error envelope rather than the mux's
	// plain-text 404/405.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apiErrorf(notFound, "no route for %s %s: check the method and the path (see the API coverage table in docs/api.md)", r.Method, r.URL.Path))
	})
}
