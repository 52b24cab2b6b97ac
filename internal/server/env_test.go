package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// testEnv is a real server: the production handler on an httptest server
// over a SQLite file in a temporary folder, with an admin API key.
type testEnv struct {
	t        testing.TB
	ctx      context.Context
	db       *sqlite.DB
	url      string
	key      string // the admin API key
	keyID    string
	requests atomic.Int64 // requests the handler received
	// http sends the requests; http.DefaultClient unless a benchmark
	// needs more kept-alive connections than its 2 per host.
	http *http.Client
}

func newEnv(t testing.TB, cfg app.Config) *testEnv {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = db
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	a := app.New(cfg)
	srv := server.New(server.Config{App: a})
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "sk-memstore-test-admin")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := db.CredentialByHash(ctx, secret.Hash(key))
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, ctx: ctx, db: db, key: key, keyID: cred.ID, http: http.DefaultClient}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		a.Close()
		db.Close()
	})
	e.url = ts.URL
	return e
}

// credential registers a secret of the given kind and returns it.
func (e *testEnv) credential(kind storage.CredentialKind) string {
	e.t.Helper()
	sent := secret.New("test-" + string(kind) + "-")
	c := storage.Credential{ID: ids.New(ids.APIKey), Kind: kind}
	switch kind {
	case storage.EnvironmentKey:
		c.ID, c.EnvironmentID = ids.New(ids.EnvironmentKey), ids.New(ids.Environment)
	case storage.SessionsToken:
		c.SessionID, c.WorkID = ids.New(ids.Session), ids.New(ids.Work)
	}
	if err := e.db.CreateCredential(e.ctx, c, secret.Hash(sent)); err != nil {
		e.t.Fatal(err)
	}
	return sent
}

// response is one raw HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with the admin key (unless headers set a credential)
// and returns the raw response.
func (e *testEnv) do(method, path string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	hasCred := false
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
		if k := strings.ToLower(headers[i]); k == "x-api-key" || k == "authorization" {
			hasCred = true
		}
	}
	if !hasCred {
		req.Header.Set("x-api-key", e.key)
	}
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// ok sends a request that must succeed and decodes its body into out.
func (e *testEnv) ok(method, path string, body, out any) {
	e.t.Helper()
	res := e.do(method, path, body)
	if res.status != http.StatusOK {
		e.t.Fatalf("%s %s: status %d: %s", method, path, res.status, res.body)
	}
	if out != nil {
		if err := json.Unmarshal(res.body, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, res.body, err)
		}
	}
}

// apiError decodes an error response, checking the envelope, the status
// that goes with the type, the request-id header and that the server did
// not fault.
func (e *testEnv) apiError(res response) *api.Error {
	e.t.Helper()
	var env api.ErrorEnvelope
	if err := json.Unmarshal(res.body, &env); err != nil || env.Type != "error" || env.Error == nil || env.Error.Message == "" {
		e.t.Fatalf("status %d: body is not the error envelope: %s", res.status, res.body)
	}
	if res.status >= 500 {
		e.t.Fatalf("server fault %d: %s", res.status, res.body)
	}
	if want := env.Error.Type.Status(); res.status != want {
		e.t.Fatalf("status %d for error type %s (want %d)", res.status, env.Error.Type, want)
	}
	if res.header.Get("request-id") == "" {
		e.t.Fatalf("error response without a request-id header")
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("error response with Content-Type %q", ct)
	}
	return env.Error
}

// seed writes n memories straight into storage (fast fixtures for limits and
// benchmarks); paths spread over a few folders.
func (e *testEnv) seed(tb testing.TB, storeID string, n int) {
	tb.Helper()
	actor := storage.Actor{Kind: storage.ActorAPIKey, ID: e.keyID}
	for i := range n {
		p := "/dir" + string(rune('a'+i%8)) + "/memory-" + strconv.Itoa(i) + ".md"
		if _, err := e.db.CreateMemory(e.ctx, storage.NewMemory{StoreID: storeID, Path: p, Content: "seeded memory " + strconv.Itoa(i), By: actor, MaxMemories: n}); err != nil {
			tb.Fatal(err)
		}
	}
}
