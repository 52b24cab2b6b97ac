package client_test

// The real server for integration tests (internal/testserver): the real
// handler on httptest, a real SQLite file in t.TempDir(), the admin API key
// bootstrapped as an operator would.

import (
	"errors"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// startServer starts the real server, on real time.
func startServer(t *testing.T) *testserver.Server {
	t.Helper()
	return testserver.Start(t, testserver.Options{MountPrefix: t.TempDir()})
}

// adminClient is a client with the admin key whose retries do not sleep.
func adminClient(t *testing.T, rs *testserver.Server) *client.Client {
	t.Helper()
	return rs.Admin(t)
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
