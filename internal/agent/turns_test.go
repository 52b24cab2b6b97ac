package agent

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// turnBackends open two servers on one database: on SQLite one process owns
// the file, so both runners share its handle (the in-process path); on
// PostgreSQL each has its own handle, as separate processes do.
var turnBackends = []struct {
	name string
	open func(t *testing.T) (a, b storage.Store, closeA func())
}{
	{"sqlite", func(t *testing.T) (storage.Store, storage.Store, func()) {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db, db, func() {}
	}},
	{"postgres", func(t *testing.T) (storage.Store, storage.Store, func()) {
		url := testenv.PostgresSchema(t)
		open := func() *postgres.DB {
			db, err := postgres.Open(t.Context(), url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		a, b := open(), open()
		return a, b, func() { a.Close() }
	}},
}

// Two servers' runners woken for the same model-backed session: one takes
// the turn and makes the model call, the other only waits; when the holder
// dies mid-call, the other takes the turn over, makes the call again and
// the tool call is emitted once.
func TestATurnRunsOnOneServerAndMovesWhenItsHolderDies(t *testing.T) {
	for _, backend := range turnBackends {
		t.Run(backend.name, func(t *testing.T) {
			u := modeltest.New(t)
			a, b, closeA := backend.open(t)
			appended := make(chan string, 100)
			newServer := func(s storage.Store) *Runner {
				r := NewRunner(s, ByModel{Scripted: Scripted{}, Model: NewClaude(claudeConfig(u))}, RunnerConfig{
					Log: slog.New(slog.DiscardHandler), TurnRetry: 10 * time.Millisecond,
					Appended: func(id string) {
						select {
						case appended <- id:
						default:
						}
					}})
				t.Cleanup(r.Close)
				return r
			}
			ra, rb := newServer(a), newServer(b)
			sess := startModelSession(t, a)

			cancelled := make(chan struct{})
			u.Hang(cancelled)
			// The second call is answered by another upstream, once the test
			// has checked that it came after the first server died.
			second := modeltest.New(t)
			second.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_1", "glob", `{"pattern":"**"}`))
			target, _ := url.Parse(second.URL)
			u.Queue(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-cancelled:
				default:
					t.Error("a second model call while the first server still held the turn")
				}
				httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
			})
			if err := ra.Settle(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
			<-u.Arrived // a holds the turn, its model call in flight
			if err := rb.Settle(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
			if n := u.Count(); n != 1 {
				t.Fatalf("the second server woke for the session and made the model call too: %d requests", n)
			}

			ra.Close() // a dies mid-call
			closeA()
			<-cancelled
			log := waitForLog(t, b, sess, appended, func(log []api.Event) bool { return len(eventsOf(log, api.EventAgentToolUse)) > 0 })
			if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end" || u.Count() != 2 {
				t.Fatalf("log %s after %d requests", got, u.Count())
			}
		})
	}
}

// startModelSession creates a session of a model-backed agent in s with a
// user message waiting for the agent's reaction.
func startModelSession(t *testing.T, s storage.Store) string {
	t.Helper()
	ctx, now := t.Context(), time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle,
		Agent: api.SessionAgent{ID: ids.New(ids.Agent), Model: api.ModelConfig{ID: model}, Tools: toolsetWith()}, CreatedAt: now, UpdatedAt: now}
	if _, err := s.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	msg := []api.Event{api.UserMessage("look")}
	if _, err := s.AppendEvents(ctx, sess.ID, msg, func(v storage.SessionView) error { return Check(v, msg) }); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// waitForLog waits until the session's log satisfies done, woken by the
// runners' appends (a safety bound ends a test that would hang).
func waitForLog(t *testing.T, s storage.Store, sessionID string, appended <-chan string, done func([]api.Event) bool) []api.Event {
	t.Helper()
	bound := time.After(30 * time.Second)
	for {
		all, err := s.ListEvents(t.Context(), sessionID, storage.EventQuery{})
		if err != nil {
			t.Fatal(err)
		}
		log := make([]api.Event, len(all))
		for i, e := range all {
			log[i] = e.Event
		}
		if done(log) {
			return log
		}
		select {
		case <-appended:
		case <-bound:
			t.Fatalf("the session never got there; log: %s", typesOf(log))
		}
	}
}
