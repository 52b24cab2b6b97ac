package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testclock"
)

// cpEnv is a real server on httptest over a real SQLite file (or the
// store an option puts in its Config), with an admin API key and an
// injected clock.
type cpEnv struct {
	t      testing.TB
	app    *app.App
	srv    *Server
	db     storage.Store
	hs     *httptest.Server
	clock  *testclock.Clock
	apiKey string
	dbPath string // the SQLite file (with its -wal and -shm beside it)
}

// cpConfig is what an option may change before the env starts: the app's
// configuration and the server's.
type cpConfig struct {
	App    app.Config
	Server Config
}

func newCPEnv(t testing.TB, opts ...func(*cpConfig)) *cpEnv {
	t.Helper()
	clock := testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	dbPath := filepath.Join(t.TempDir(), "memstore.db")
	db, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cpConfig{App: app.Config{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clock.Now}, Server: Config{StreamKeepalive: time.Hour}}
	for _, o := range opts {
		o(&cfg)
	}
	a := app.New(cfg.App)
	cfg.Server.App = a
	srv := New(cfg.Server)
	hs := httptest.NewServer(srv.Handler())
	if srv.cfg.PublicBaseURL == "" {
		srv.cfg.PublicBaseURL = hs.URL
	}
	e := &cpEnv{t: t, app: a, srv: srv, db: cfg.App.Store, hs: hs, clock: clock, dbPath: dbPath}
	t.Cleanup(func() {
		hs.Close()
		a.Close()
		db.Close()
	})
	key, _, err := a.Credentials.BootstrapAdminKey(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	e.apiKey = key
	return e
}

// cpResp is one HTTP exchange's outcome.
type cpResp struct {
	status int
	header http.Header
	body   []byte
}

func (r cpResp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errType is the error type of an error response, "" otherwise.
func (r cpResp) errType() string {
	var env api.ErrorEnvelope
	if json.Unmarshal(r.body, &env) != nil || env.Error == nil {
		return ""
	}
	return string(env.Error.Type)
}

// call sends one request with cred as a Bearer token ("" for none).
func (e *cpEnv) call(method, path, cred string, body any, hdr ...string) cpResp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return cpResp{status: res.StatusCode, header: res.Header, body: b}
}

// must sends a request and fails the test unless it answers want.
func (e *cpEnv) must(want int, method, path, cred string, body any, out any, hdr ...string) cpResp {
	e.t.Helper()
	r := e.call(method, path, cred, body, hdr...)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		r.decode(e.t, out)
	}
	return r
}

func (e *cpEnv) environment(name string) api.Environment {
	e.t.Helper()
	var env api.Environment
	e.must(200, "POST", "/v1/environments", e.apiKey, api.CreateEnvironmentRequest{Name: name}, &env)
	return env
}

func (e *cpEnv) envKey(envID string) string {
	e.t.Helper()
	var k api.EnvironmentKey
	e.must(200, "POST", "/v1/environments/"+envID+"/keys", e.apiKey, nil, &k)
	return k.Key
}

func (e *cpEnv) scriptedAgent() api.Agent {
	e.t.Helper()
	var a api.Agent
	e.must(200, "POST", "/v1/agents", e.apiKey, map[string]any{"name": "scripted", "model": map[string]string{"id": api.ScriptedModel}}, &a)
	return a
}

func (e *cpEnv) session(envID, agentID string, extra map[string]any) api.Session {
	e.t.Helper()
	body := map[string]any{"agent": agentID, "environment_id": envID}
	for k, v := range extra {
		body[k] = v
	}
	var s api.Session
	e.must(200, "POST", "/v1/sessions", e.apiKey, body, &s)
	return s
}

// poll polls env once without waiting and returns the claimed work (nil
// for none) and its decoded secret.
func (e *cpEnv) poll(envID, cred, worker string, query ...string) (*api.Work, api.WorkSecret) {
	e.t.Helper()
	q := url.Values{}
	for i := 0; i+1 < len(query); i += 2 {
		q.Set(query[i], query[i+1])
	}
	path := "/v1/environments/" + envID + "/work/poll"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var w *api.Work
	e.must(200, "GET", path, cred, nil, &w, "Anthropic-Worker-ID", worker)
	if w == nil {
		return nil, api.WorkSecret{}
	}
	if w.Secret == nil {
		e.t.Fatalf("claimed work %s has no secret", w.ID)
	}
	sec, err := api.DecodeWorkSecret(*w.Secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return w, sec
}

func (e *cpEnv) heartbeat(envID, workID, cred, expected string) cpResp {
	e.t.Helper()
	return e.call("POST", "/v1/environments/"+envID+"/work/"+workID+"/heartbeat?expected_last_heartbeat="+url.QueryEscape(expected), cred, nil)
}

func (e *cpEnv) events(sessionID string) []api.Event {
	e.t.Helper()
	var page api.Page[api.Event]
	e.must(200, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000", e.apiKey, nil, &page)
	return page.Data
}

func (e *cpEnv) work(envID, workID string) api.Work {
	e.t.Helper()
	var w api.Work
	e.must(200, "GET", "/v1/environments/"+envID+"/work/"+workID, e.apiKey, nil, &w)
	return w
}

// credentialCount counts live credentials of a kind, to show that a refused
// call minted nothing.
func (e *cpEnv) credentialCount(kind storage.CredentialKind) int {
	n, err := e.db.CountCredentials(context.Background(), kind)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
