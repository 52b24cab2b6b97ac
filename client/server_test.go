package client_test

// The real server for integration tests: the real handler on httptest, a
// real SQLite file in t.TempDir(), the admin API key bootstrapped as an
// operator would.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

const adminKey = "sk-memstore-client-test"

// realServer is a memstore server on a fresh SQLite file.
type realServer struct {
	URL string
	srv *server.Server
	// wrap, when set, sits in front of the real handler (to lose a
	// response on purpose).
	wrap atomic.Pointer[func(http.Handler) http.Handler]
}

func startServer(t *testing.T) *realServer {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := &realServer{}
	var h http.Handler
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap := rs.wrap.Load(); wrap != nil {
			(*wrap)(h).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	rs.URL = "http://" + hs.Listener.Addr().String()
	rs.srv = server.New(server.Config{
		Store:         db,
		Logger:        slog.New(slog.DiscardHandler),
		PublicBaseURL: rs.URL,
		MountPrefix:   t.TempDir(),
	})
	h = rs.srv.Handler()
	if _, _, err := rs.srv.BootstrapAdminKey(ctx, adminKey); err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	return rs
}

// adminClient is a client with the admin key whose retries do not sleep.
func adminClient(t *testing.T, rs *realServer) *client.Client {
	t.Helper()
	policy := client.DefaultRetryPolicy
	policy.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	c, err := client.New(rs.URL, client.WithAPIKey(adminKey), client.WithRetryPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// result carries a call's two results to ok, which fails the test on the
// error: must(c.GetMemoryStore(ctx, id)).ok(t).
type result[T any] struct {
	v   T
	err error
}

func must[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) ok(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// wantAPIError checks err is an *api.Error of type typ and status, with the
// server's request id filled in.
func wantAPIError(t *testing.T, err error, status int, typ api.ErrorType) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *api.Error %s", err, err, typ)
	}
	if ae.StatusCode != status || ae.Type != typ || ae.Message == "" || !strings.HasPrefix(ae.RequestID, "req_") {
		t.Fatalf("api.Error = %+v, want %d %s with a message and a request id", ae, status, typ)
	}
}
