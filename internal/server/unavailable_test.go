package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// A database lost under a running server answers 503 with x-should-retry:
// true (the SDKs retry it) and changes nothing; the server recovers by
// itself, so the retried request succeeds.
func TestALostDatabaseIs503AndRecovers(t *testing.T) {
	appName := fmt.Sprintf("memstore_503_%d", time.Now().UnixNano())
	db, err := postgres.Open(t.Context(), testenv.PostgresSchema(t)+"&pool_max_conns=1&application_name="+appName, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	defer a.Close()
	srv := New(Config{App: a})
	key, _, err := a.Credentials.BootstrapAdminKey(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	admin, err := pgx.Connect(t.Context(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	list := func() *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", hs.URL+"/v1/memory_stores", nil)
		req.Header.Set("x-api-key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The pool may replace a dead idle connection before using it; try
	// until a request meets the loss head on.
	for attempt := 0; attempt < 20; attempt++ {
		if res := list(); res.StatusCode != 200 {
			t.Fatalf("before the loss: %d", res.StatusCode)
		}
		if _, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, appName); err != nil {
			t.Fatal(err)
		}
		res := list()
		if res.StatusCode == 200 {
			continue
		}
		var env api.ErrorEnvelope
		json.NewDecoder(res.Body).Decode(&env)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("x-should-retry") != "true" || env.Error == nil || env.Error.Type != api.Internal {
			t.Fatalf("a lost database answered %d x-should-retry=%q %+v", res.StatusCode, res.Header.Get("x-should-retry"), env.Error)
		}
		if res := list(); res.StatusCode != 200 {
			t.Fatalf("the retry after the loss: %d", res.StatusCode)
		}
		return
	}
	t.Fatal("no request met the lost database in 20 attempts")
}

// A write whose COMMIT ran but whose answer the connection lost is a 503
// that says the outcome is unknown and to read back first, with
// x-should-retry: false (repeated blindly, a create that landed answers
// 409 or, for a memory store, makes a second one): for a memory store's
// create (a plain transaction), a vault's (one statement, committed on its
// own), a memory create (a batch of memory writes) and an event append (a
// batch of appends) alike. Reading back finds each landed, once.
func TestAWriteWhoseCommitAnswerWasLostIs503ReadBackFirst(t *testing.T) {
	cut, through := testenv.NewCommitCutter(t, testenv.PostgresSchema(t))
	db, err := postgres.Open(t.Context(), through, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := newCPEnv(t, func(c *cpConfig) { c.App.Store = db; c.App.Now = nil })
	var st api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "lost answers"}, &st)
	env := e.environment("lost answers")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)

	lost := func(what, marker, tag string, call func() cpResp) {
		t.Helper()
		cut.ArmAt(marker, tag)
		res := call()
		if cut.Cuts() == 0 {
			t.Fatalf("%s: the proxy cut no COMMIT (answered %d)", what, res.status)
		}
		var env api.ErrorEnvelope
		res.decode(t, &env)
		if res.status != http.StatusServiceUnavailable || res.header.Get("x-should-retry") != "false" || env.Error == nil ||
			!strings.Contains(env.Error.Message, "whether it landed is unknown") || !strings.Contains(env.Error.Message, "read it back") {
			t.Fatalf("%s whose COMMIT's answer was lost: %d x-should-retry=%q %+v", what, res.status, res.header.Get("x-should-retry"), env.Error)
		}
	}
	lost("a memory store's create", "made once", "COMMIT", func() cpResp {
		return e.call("POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "made once"})
	})
	var stores api.Page[api.MemoryStore]
	e.must(200, "GET", "/v1/memory_stores?limit=100", e.apiKey, nil, &stores)
	made := 0
	for _, s := range stores.Data {
		if s.Name == "made once" {
			made++
		}
	}
	if made != 1 {
		t.Fatalf("the store whose create's COMMIT answer was lost is there %d times, want once", made)
	}
	lost("a vault's create (one statement, its own transaction)", "kept once", "INSERT 0 1", func() cpResp {
		return e.call("POST", "/v1/vaults", e.apiKey, map[string]any{"display_name": "kept once"})
	})
	var vaults api.Page[api.Vault]
	e.must(200, "GET", "/v1/vaults?limit=100", e.apiKey, nil, &vaults)
	if len(vaults.Data) != 1 || vaults.Data[0].DisplayName != "kept once" {
		t.Fatalf("vaults after the lost answer: %+v, want the one made", vaults.Data)
	}
	before := len(e.events(sess.ID))
	lost("an event append", "said once", "COMMIT", func() cpResp {
		return e.call("POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, map[string]any{"events": []any{map[string]any{
			"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "said once"}}}}})
	})
	body := map[string]any{"path": "/lost.md", "content": "landed"}
	lost("a memory create", "/lost.md", "COMMIT", func() cpResp {
		return e.call("POST", "/v1/memory_stores/"+st.ID+"/memories", e.apiKey, body)
	})

	if res := e.call("POST", "/v1/memory_stores/"+st.ID+"/memories", e.apiKey, body); res.status != http.StatusConflict {
		t.Fatalf("the create repeated: %d, want 409 (it landed)", res.status)
	}
	said := 0
	for _, ev := range e.events(sess.ID)[before:] {
		if ev.Type == api.EventUserMessage && ev.Text() == "said once" {
			said++
		}
	}
	if said != 1 {
		t.Fatalf("the lost append is in the session's log %d times, want once", said)
	}
}
