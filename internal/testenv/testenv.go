// Package testenv starts the real parts that memstore's tests run against:
// the server on httptest over a real SQLite file in the test's temporary
// folder, with an admin API key; a clock the test moves; clients whose
// retries do not sleep; and a log buffer to assert on what an operator would
// read. Tests of every package that talks to the server (client, memsync,
// worker) share it, so each one tests against the same thing, set up the
// same way. (The server's own tests cannot: this package imports it.)
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// AdminKey is the API key every test server bootstraps, as an operator's
// $MEMSTORE_ADMIN_KEY would.
const AdminKey = "sk-memstore-test-admin"

// Clock is a clock a test moves forward. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	fixed  time.Time // zero: real time
	offset time.Duration
}

// NewClock returns a clock stopped at start: it moves only when Advance
// moves it, so timestamps and windows are exact.
func NewClock(start time.Time) *Clock { return &Clock{fixed: start} }

// RealClock returns a clock that follows real time, shifted by every
// Advance: for a server whose leases must lapse while the code under test
// keeps running on real timers.
func RealClock() *Clock { return &Clock{} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed.IsZero() {
		return time.Now().Add(c.offset)
	}
	return c.fixed.Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Options configure StartServer. The zero value is a server on real time
// that mounts sessions' stores under a temporary folder.
type Options struct {
	// Clock is the server's and its database's clock; nil means
	// RealClock().
	Clock *Clock
	// MountPrefix is where sessions mount their stores; "" means a fresh
	// temporary folder.
	MountPrefix string
	// StreamKeepalive is how often an idle event stream sends a comment; 0
	// means the server's default.
	StreamKeepalive time.Duration
}

// Server is a running memstore server.
type Server struct {
	// URL is the base URL, also the server's public one (the api_base_url
	// of work secrets).
	URL   string
	Clock *Clock
	wrap  atomic.Pointer[func(http.Handler) http.Handler]
}

// StartServer starts a server on a new SQLite file in t's temporary folder,
// with AdminKey, and stops it when t ends.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	ctx := context.Background()
	s := &Server{Clock: opts.Clock}
	if s.Clock == nil {
		s.Clock = RealClock()
	}
	if opts.MountPrefix == "" {
		opts.MountPrefix = t.TempDir()
	}
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{Now: s.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap := s.wrap.Load(); wrap != nil {
			(*wrap)(h).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = "http://" + hs.Listener.Addr().String()
	srv := server.New(server.Config{
		Store:           db,
		Logger:          slog.New(slog.DiscardHandler),
		Now:             s.Clock.Now,
		PublicBaseURL:   s.URL,
		MountPrefix:     opts.MountPrefix,
		StreamKeepalive: opts.StreamKeepalive,
	})
	h = srv.Handler()
	if _, _, err := srv.BootstrapAdminKey(ctx, AdminKey); err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		db.Close()
	})
	return s
}

// Wrap puts f in front of the server's handler, to lose a response or cut
// a stream on purpose; Wrap(nil) takes it away.
func (s *Server) Wrap(f func(http.Handler) http.Handler) {
	if f == nil {
		s.wrap.Store(nil)
		return
	}
	s.wrap.Store(&f)
}

// NoSleep is the default retry policy with waits that return at once, so a
// retried request costs a test no time.
var NoSleep = func() client.RetryPolicy {
	p := client.DefaultRetryPolicy
	p.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return p
}()

// Client returns a client of s with no credential and NoSleep retries;
// opts come after, so they may replace either.
func (s *Server) Client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, append([]client.Option{client.WithRetryPolicy(NoSleep)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Admin returns a client of s with AdminKey.
func (s *Server) Admin(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	return s.Client(t, append([]client.Option{client.WithAPIKey(AdminKey)}, opts...)...)
}

// LogBuffer collects log lines, safe for the concurrent writers a worker
// or a sync has.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// JSON returns a logger writing JSON records at debug level and above, for
// Records.
func (l *LogBuffer) JSON() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Text returns a logger writing text lines at debug level and above, as an
// operator reads them.
func (l *LogBuffer) Text() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Records returns the JSON records at level whose message contains msg.
func (l *LogBuffer) Records(t testing.TB, level slog.Level, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON (log with JSON()): %q", line)
		}
		if m, _ := rec["msg"].(string); rec["level"] == level.String() && strings.Contains(m, msg) {
			out = append(out, rec)
		}
	}
	return out
}
