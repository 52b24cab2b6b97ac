// Package server is memstore's HTTP API: routing, credentials, the error
// envelope, and one file per resource (memory stores, environments and
// their work queue, agents, sessions and events).
package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
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
	// StreamKeepalive is how often an idle event stream sends a comment
	// (default 15 s), so proxies do not cut it.
	StreamKeepalive time.Duration
}

// Server serves the API. Build it with New and mount Handler.
type Server struct {
	cfg   Config
	store storage.Store
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux
	cp    *controlPlane
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MountPrefix == "" {
		cfg.MountPrefix = api.DefaultMountPrefix
	}
	if cfg.StreamKeepalive <= 0 {
		cfg.StreamKeepalive = 15 * time.Second
	}
	s := &Server{
		cfg:   cfg,
		store: cfg.Store,
		log:   cfg.Logger,
		now:   func() time.Time { return cfg.Now().UTC() },
		mux:   http.NewServeMux(),
		cp:    newControlPlane(),

		storeChanges: notifier{chans: map[string]chan struct{}{}},

		closing: make(chan struct{}),
	}
	s.routes()
	return s
}

// Handler returns the API with its middleware: request ids, access logs,
// panic recovery and the body cap.
func (s *Server) Handler() http.Handler {
	return s.withRequestID(s.withAccessLog(s.withRecover(s.withBodyCap(s.mux))))
}

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
	// Anything unrouted gets the error envelope rather than the mux's
	// plain-text 404/405.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apiErrorf(notFound, "no route for %s %s: check the method and the path (see the README's API coverage table)", r.Method, r.URL.Path))
	})
}
