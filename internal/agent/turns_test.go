package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
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
			if err := ra.React(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
			<-u.Arrived // a holds the turn, its model call in flight
			if err := rb.React(t.Context(), sess); err != nil {
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
	return startSession(t, s, model, "look")
}

// startSession creates a session of an agent of model in s with a user
// message of text stored, as a server that dies before its runtime reacts
// leaves it: idle, the message unanswered.
func startSession(t *testing.T, s storage.Store, model, text string) string {
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
	msg := []api.Event{api.UserMessage(text)}
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

// A server that dies between storing a user.message and reacting to it
// leaves the session idle with the message unanswered and nobody holding
// its turn. Another server's sweep finds it; while the dying server still
// holds the turn the sweep leaves it alone, and once that server is gone
// it takes the turn and answers the message, once.
func TestASweepTakesUpAMessageAServerDiedBeforeAnswering(t *testing.T) {
	for _, backend := range turnBackends {
		t.Run(backend.name, func(t *testing.T) {
			a, b, closeA := backend.open(t)
			appended := make(chan string, 100)
			rb := NewRunner(b, ByModel{Scripted: Scripted{}}, RunnerConfig{Log: slog.New(slog.DiscardHandler), TurnRetry: 10 * time.Millisecond,
				Appended: func(id string) {
					select {
					case appended <- id:
					default:
					}
				}})
			t.Cleanup(rb.Close)
			sess := startSession(t, a, api.ScriptedModel, `{"tool_calls":[],"end":"idle"}`)
			release, ok, err := a.TryTurn(t.Context(), sess) // the dying server, mid-step
			if err != nil || !ok {
				t.Fatalf("TryTurn = %v, %v", ok, err)
			}
			if err := rb.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := rb.React(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
			if log := waitForLog(t, b, sess, nil, func([]api.Event) bool { return true }); typesOf(log) != "user.message" {
				t.Fatalf("the sweep acted on a turn another server holds: %s", typesOf(log))
			}
			release() // the server dies: its turn goes with it
			closeA()
			log := waitForLog(t, b, sess, appended, func(log []api.Event) bool { return len(log) > 0 && log[len(log)-1].Type == api.EventSessionStatusIdle })
			if got := typesOf(log); got != "user.message session.status_running agent.message session.status_idle" {
				t.Fatalf("log %s", got)
			}
		})
	}
}

// views is a real store that counts the session views made of it.
type views struct {
	storage.Store
	n atomic.Int32
}

func (v *views) ViewSession(ctx context.Context, id string) (storage.SessionView, error) {
	v.n.Add(1)
	return v.Store.ViewSession(ctx, id)
}

// An idle session whose newest event is a client's but calls for nothing
// (an interrupt after the turn ended) is read by one sweep, not by every
// sweep after it, until its log moves.
func TestASweepReadsAQuietSessionOnce(t *testing.T) {
	db, _, _ := turnBackends[0].open(t)
	store := &views{Store: db}
	r := NewRunner(store, ByModel{Scripted: Scripted{}}, RunnerConfig{Log: slog.New(slog.DiscardHandler), Appended: func(string) {}})
	t.Cleanup(r.Close)
	sess := startSession(t, db, api.ScriptedModel, `{"tool_calls":[],"end":"idle"}`)
	if err := r.React(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendEvents(t.Context(), sess, []api.Event{api.UserInterrupt()}, nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int32{1, 0} {
		store.n.Store(0)
		if err := r.Sweep(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := store.n.Load(); got != want {
			t.Fatalf("sweep %d read the session %d times, want %d", i+1, got, want)
		}
	}
	msg := []api.Event{api.UserMessage(`{"tool_calls":[],"end":"idle"}`)}
	if _, err := db.AppendEvents(t.Context(), sess, msg, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.React(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	all, err := db.ListEvents(t.Context(), sess, storage.EventQuery{})
	if err != nil || all[len(all)-1].Event.Type != api.EventSessionStatusIdle || len(all) != 9 {
		t.Fatalf("after a new message the sweep did not answer it: %d events, %v", len(all), err)
	}
}
