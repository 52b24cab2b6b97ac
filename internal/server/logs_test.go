package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/testlog"
)

// A whole worker's round — keys minted, a session claimed, its sessions
// token used on the queue, the session and a store — leaves no key, token
// or work secret in the log, and every access line names the credential
// that made the request by id.
func TestLogsNameCredentialsByIDAndNeverHoldSecrets(t *testing.T) {
	var out testlog.Buffer
	e := newCPEnv(t, func(c *cpConfig) { c.App.Logger = slog.New(slog.NewJSONHandler(&out, nil)) })
	env := e.environment("e")
	envKey := e.envKey(env.ID)
	var st api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "notes"}, &st)
	e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": []any{map[string]any{"type": "memory_store", "memory_store_id": st.ID}}})
	var work *api.Work
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work/poll", envKey, nil, &work, "Anthropic-Worker-ID", "host-1")
	sec, err := api.DecodeWorkSecret(*work.Secret)
	if err != nil {
		t.Fatal(err)
	}
	e.heartbeat(env.ID, work.ID, sec.SessionsToken, api.NoHeartbeat)
	write := e.must(200, "POST", "/v1/memory_stores/"+st.ID+"/memories", sec.SessionsToken, api.CreateMemoryRequest{Path: "/a.md", Content: "x"}, nil)

	logged := out.String()
	for name, secret := range map[string]string{"API key": e.apiKey, "environment key": envKey, "sessions token": sec.SessionsToken, "work secret": *work.Secret} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log holds the %s", name)
		}
	}
	token, err := e.db.CredentialByHash(context.Background(), secret.Hash(sec.SessionsToken))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(logged), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %s", line)
		}
		if rec["msg"] != "http request" {
			continue
		}
		if rec["credential_id"] == nil || rec["credential_id"] == "" {
			t.Errorf("an authenticated request's access line has no credential_id: %s", line)
		}
		if rec["request_id"] == write.header.Get("request-id") {
			found = true
			if rec["credential_id"] != token.ID {
				t.Errorf("the token's write is logged as credential %v, want %s", rec["credential_id"], token.ID)
			}
		}
		if strings.HasSuffix(rec["path"].(string), "/work/poll") && rec["worker_id"] != "host-1" {
			t.Errorf("the poll's access line lacks its worker_id: %s", line)
		}
	}
	if !found {
		t.Fatal("no access line carries the request-id of the token's write")
	}
}

// Every line a request logs carries its request id, added by the logger
// from the request's context: the access line and the handler's own lines
// (here "memory created"), none of which names it by hand.
func TestEveryLineOfARequestCarriesItsRequestID(t *testing.T) {
	var out testlog.Buffer
	e := newCPEnv(t, func(c *cpConfig) { c.App.Logger = slog.New(slog.NewJSONHandler(&out, nil)) })
	var st api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "notes"}, &st)
	write := e.must(200, "POST", "/v1/memory_stores/"+st.ID+"/memories", e.apiKey, api.CreateMemoryRequest{Path: "/a.md", Content: "x"}, nil)
	id := write.header.Get("request-id")
	msgs := map[any]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %s", line)
		}
		if rec["request_id"] == id {
			msgs[rec["msg"]]++
		}
	}
	if msgs["memory created"] != 1 || msgs["http request"] != 1 {
		t.Fatalf("lines carrying the write's request id %s: %v; want its access line and \"memory created\" once each\n%s", id, msgs, out.String())
	}
}

// A handler served beside the API (the console) that logs through the
// app's Logger gets the request id on its lines too.
func TestLinesOfHandlersBesideTheAPICarryTheRequestID(t *testing.T) {
	var out testlog.Buffer
	a := app.New(app.Config{Store: newCPEnv(t).db, Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	defer a.Close()
	srv := New(Config{App: a})
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Logger().InfoContext(r.Context(), "console page served")
	})
	hs := httptest.NewServer(srv.HandlerWithConsole(console))
	defer hs.Close()
	res, err := http.Get(hs.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	recs := out.Records(t, slog.LevelInfo, "console page served")
	if len(recs) != 1 || recs[0]["request_id"] != res.Header.Get("request-id") || res.Header.Get("request-id") == "" {
		t.Fatalf("console lines = %v; want one carrying request id %q", recs, res.Header.Get("request-id"))
	}
}
