package worker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

// The poll loop claims a session, runs its calls in order with the real
// toolset, posts each result once, and stops the item when the session
// terminates.
func TestPollLoopServesAScriptedSession(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	cfg.KeepWorkdirs = true // the files are looked at after the session
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("write", map[string]any{"file_path": "notes/today.md", "content": "alpha\nbeta\n"}),
		toolCall("edit", map[string]any{"file_path": "notes/today.md", "old_string": "beta", "new_string": "gamma"}),
		toolCall("read", map[string]any{"file_path": "notes/today.md"}),
		toolCall("bash", map[string]any{"command": "wc -l < notes/today.md"}),
		toolCall("glob", map[string]any{"pattern": "**/*.md"}),
	))
	stop := runWorker(t, f.worker(cfg))

	waitFor(t, "the session to terminate and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}

	got := toolResults(f.events(sess.ID))
	want := []toolResult{
		{"write", "wrote 11 bytes to notes/today.md", false},
		{"edit", "edited notes/today.md (1 replacement(s))", false},
		{"read", "alpha\ngamma", false},
		{"bash", "2", false},
		{"glob", filepath.Join(cfg.Workdir, sess.ID+roomSuffix, "notes/today.md"), false},
	}
	if len(got) != len(want) {
		t.Fatalf("tool results = %+v, want %d", got, len(want))
	}
	for i := range want {
		if got[i].name != want[i].name || strings.TrimSpace(got[i].text) != want[i].text || got[i].isError != want[i].isError {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Workdir, sess.ID+roomSuffix, "notes/today.md")); err != nil || string(b) != "alpha\ngamma\n" {
		t.Errorf("file on disk = %q, %v", b, err)
	}
	for _, line := range []string{"work item claimed", "session served", "work item stopped"} {
		if logs.Line(line, "work_id=", "session_id="+sess.ID) == "" {
			t.Errorf("no log line %q with work_id and session_id:\n%s", line, logs)
		}
	}
}

// cutStreams makes the server end the first n event streams after d, as a
// proxy or a restart would.
func cutStreams(ts *testServer, n int32, d time.Duration) *atomic.Int32 {
	var cut atomic.Int32
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/events/stream") && cut.Add(1) <= n {
				ctx, cancel := context.WithTimeout(r.Context(), d)
				defer cancel()
				r = r.WithContext(ctx)
			}
			h.ServeHTTP(w, r)
		})
	}
	ts.Wrap(wrap)
	return &cut
}

// Every reconnect lists the whole history again; a call is still run only
// once, and answered once.
func TestToolCallRunsOnceAcrossReconnects(t *testing.T) {
	f := newFixture(t, "")
	cut := cutStreams(f.srv, 3, 150*time.Millisecond)
	cfg := f.config(&testlog.Buffer{})
	cfg.KeepWorkdirs = true
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "echo one >> runs.txt; sleep 0.2"}),
		toolCall("bash", map[string]any{"command": "echo two >> runs.txt; sleep 0.2"}),
		toolCall("bash", map[string]any{"command": "echo three >> runs.txt; sleep 0.2"}),
		toolCall("read", map[string]any{"file_path": "runs.txt"}),
	))
	w := f.worker(cfg)
	if err := w.RunItem(context.Background(), Item{Work: f.claim()}); err != nil {
		t.Fatal(err)
	}
	if cut.Load() < 4 {
		t.Fatalf("only %d stream connections; the test did not force reconnects", cut.Load())
	}
	b, err := os.ReadFile(filepath.Join(cfg.Workdir, sess.ID+roomSuffix, "runs.txt"))
	if err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("runs.txt = %q, %v: each call must run exactly once", b, err)
	}
	got := toolResults(f.events(sess.ID))
	if len(got) != 4 || got[3].text != "one\ntwo\nthree\n" {
		t.Fatalf("results = %+v, want one per call", got)
	}
	if s := f.getSession(sess.ID); s.Status != api.SessionTerminated {
		t.Errorf("session status %s, want terminated", s.Status)
	}
}

// startedMarker is a bash call that shows it has started (the file appears)
// and then runs for long enough that only a cancellation ends it.
func startedMarker(name string) api.ScriptedToolCall {
	return toolCall("bash", map[string]any{"command": "touch " + name + "; sleep 120", "timeout_ms": 300000})
}

// waitStarted waits for the file name in a session's room under workdir.
func waitStarted(t *testing.T, workdir, name string) {
	t.Helper()
	waitFor(t, "the long bash call to start", func() bool {
		m, _ := filepath.Glob(filepath.Join(workdir, "*"+roomSuffix, name))
		return len(m) > 0
	})
}

// inRoom is the path of name in the one session room under workdir.
func inRoom(t *testing.T, workdir, name string) string {
	t.Helper()
	rooms, err := filepath.Glob(filepath.Join(workdir, "*"+roomSuffix))
	if err != nil || len(rooms) != 1 {
		t.Fatalf("rooms under %s = %v, %v; want one", workdir, rooms, err)
	}
	return filepath.Join(rooms[0], name)
}

// A user.interrupt cancels the running call at once; nothing is posted
// for it, the calls after it never run, and the idle session is released
// after MaxIdle.
func TestInterruptCancelsTheRunningCall(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	cfg.MaxIdle = 50 * time.Millisecond
	cfg.KeepWorkdirs = true // after.txt is looked for after the end
	sess := f.session(script(api.ScriptEndIdle,
		startedMarker("started"),
		toolCall("write", map[string]any{"file_path": "after.txt", "content": "x"}),
	))
	w := f.worker(cfg)
	done := make(chan error, 1)
	go func() { done <- w.RunItem(context.Background(), Item{Work: f.claim()}) }()
	waitStarted(t, cfg.Workdir, "started")
	if _, err := f.admin.SendEvents(context.Background(), sess.ID, api.UserInterrupt()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RunItem = %v", err)
	}
	events := f.events(sess.ID)
	if got := toolResults(events); len(got) != 0 {
		t.Errorf("results = %+v, want none for an interrupted call", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.Workdir, sess.ID+roomSuffix, "after.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the call after the interrupt ran: %v", err)
	}
	if idle := lastOfType(events, api.EventSessionStatusIdle); idle == nil || idle.StopReason.Type != api.StopEndTurn {
		t.Errorf("last idle = %+v, want end_turn", idle)
	}
	if st := f.sessionWork(sess.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped after the idle release", st)
	}
	if logs.Line("tool call interrupted by the user") == "" || logs.Line("session idle after its turn; releasing the work item") == "" {
		t.Errorf("missing interrupt or idle log lines:\n%s", logs)
	}
}

// Shutting down (SIGTERM: the context ends) during a long bash call
// cancels it, posts its error result, and stops the item; the session's
// next call is left for the next worker, so the session waits idle with
// requires_action.
func TestShutdownDuringALongCallPostsItsResultAndStopsTheItem(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	cfg.KeepWorkdirs = true // after.txt is looked for after the end
	sess := f.session(script(api.ScriptEndIdle,
		startedMarker("started"),
		toolCall("write", map[string]any{"file_path": "after.txt", "content": "x"}),
	))
	w := f.worker(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.RunItem(ctx, Item{Work: f.claim()}) }()
	waitStarted(t, cfg.Workdir, "started")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunItem = %v", err)
	}
	events := f.events(sess.ID)
	got := toolResults(events)
	if len(got) != 1 || got[0].name != "bash" || !got[0].isError || !strings.Contains(got[0].text, "the worker is shutting down") {
		t.Fatalf("results = %+v, want the cancelled bash call's error", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.Workdir, sess.ID+roomSuffix, "after.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a call ran after the shutdown began: %v", err)
	}
	if st := f.sessionWork(sess.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped", st)
	}
	s := f.getSession(sess.ID)
	idle := lastOfType(events, api.EventSessionStatusIdle)
	if s.Status != api.SessionIdle || idle == nil || idle.StopReason.Type != api.StopRequiresAction {
		t.Errorf("session %s, last idle %+v: want idle with requires_action", s.Status, idle)
	}
	if logs.Line("session cut short", "the worker is shutting down") == "" {
		t.Errorf("no shutdown log line:\n%s", logs)
	}
}

// A graceful stop (state stopping, seen on the next heartbeat) shuts the
// session down like a shutdown, and the poll loop goes on to the next item.
func TestStopRequestShutsTheSessionDownAndTheLoopGoesOn(t *testing.T) {
	f := newFixture(t, "")
	cfg := f.config(&testlog.Buffer{})
	first := f.session(script(api.ScriptEndIdle, startedMarker("started")))
	stop := runWorker(t, f.worker(cfg))
	waitStarted(t, cfg.Workdir, "started")
	item := f.sessionWork(first.ID)
	if err := f.admin.StopWork(context.Background(), f.env.ID, item.ID, api.StopWorkRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stopped item's result", func() bool { return len(toolResults(f.events(first.ID))) == 1 })
	if got := toolResults(f.events(first.ID)); !got[0].isError || !strings.Contains(got[0].text, "the work item was asked to stop") {
		t.Errorf("result = %+v, want the stop named", got[0])
	}
	waitFor(t, "the item to stop", func() bool { return f.work(item.ID).State == api.WorkStopped })

	second := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo next"})))
	waitFor(t, "the loop to serve the next session", func() bool { return f.getSession(second.ID).Status == api.SessionTerminated })
	if got := toolResults(f.events(second.ID)); len(got) != 1 || strings.TrimSpace(got[0].text) != "next" {
		t.Errorf("second session results = %+v", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A lost lease (412) stops the tools but leaves the item alone: it belongs
// to its new claim now, so it is neither stopped nor answered.
func TestLostLeaseReleasesTheItemWithoutStoppingIt(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	sess := f.session(script(api.ScriptEndIdle, startedMarker("started")))
	w := f.worker(cfg)
	work := f.claim()
	done := make(chan error, 1)
	go func() { done <- w.RunItem(context.Background(), Item{Work: work}) }()
	waitStarted(t, cfg.Workdir, "started")

	// The lease lapses on the server (its clock jumps past the TTL) and
	// another worker claims the item. A beat racing the jump can renew the
	// lease at the new time, so jump again until the claim lands.
	other := testClient(t, f.srv, client.WithBearerToken(f.key), client.WithWorkerID("other-worker"))
	for attempt := 0; ; attempt++ {
		f.srv.clock.advance(2 * api.DefaultLeaseTTLSeconds * time.Second)
		reclaimed, err := other.PollWork(context.Background(), f.env.ID, api.WorkPollParams{})
		if err != nil {
			t.Fatal(err)
		}
		if reclaimed != nil {
			if reclaimed.ID != work.ID {
				t.Fatalf("reclaimed %s, want %s", reclaimed.ID, work.ID)
			}
			break
		}
		if attempt == 20 {
			t.Fatalf("the lease never lapsed; the server holds %+v", f.work(work.ID))
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("RunItem = %v", err)
	}
	if st := f.work(work.ID).State; st == api.WorkStopped {
		t.Errorf("the worker stopped an item it no longer held")
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 0 {
		t.Errorf("results = %+v, want none after a lost lease", got)
	}
	if logs.Line("lease lost") == "" || logs.Line("work item released without stopping it") == "" || logs.Line("work item stopped") != "" {
		t.Errorf("log lines:\n%s", logs)
	}
}

// A secret without a sessions token falls back to the environment key
// for a session with no memory stores.
func TestSecretWithoutTokenUsesTheEnvironmentKey(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo ok"})))
	work := f.claim()
	empty := api.WorkSecret{}.Encode()
	work.Secret = &empty
	if err := f.worker(f.config(logs)).RunItem(context.Background(), Item{Work: work}); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || strings.TrimSpace(got[0].text) != "ok" {
		t.Errorf("results = %+v", got)
	}
	if f.work(work.ID).State != api.WorkStopped {
		t.Errorf("item not stopped")
	}
	if logs.Line("the work secret carries no sessions token; using the environment key") == "" {
		t.Errorf("no fallback log line:\n%s", logs)
	}
}

// A poll the server refuses for good ends Run with an error that says
// what to check; it does not spin.
func TestPermanentPollErrorsEndTheLoop(t *testing.T) {
	f := newFixture(t, "")
	other, err := f.admin.CreateEnvironment(context.Background(), api.CreateEnvironmentRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, key, want string
	}{
		{"wrong key", f.env.ID, "sk-memstore-env-wrong", "401"},
		{"key of another environment", other.ID, f.key, "403"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config(&testlog.Buffer{})
			cfg.EnvironmentID, cfg.EnvironmentKey = tc.env, tc.key
			err := f.worker(cfg).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--environment-key") {
				t.Fatalf("Run = %v, want a %s naming --environment-key", err, tc.want)
			}
		})
	}
}

// An on-work handler that fails gets its item force-stopped (the session
// then waits idle for the next worker) with one line that says so, and the
// loop goes on to hand over the next item.
func TestFailedOnWorkHandlerStopsTheItemAndTheLoopGoesOn(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	var handed atomic.Int32
	cfg.OnWork = func(ctx context.Context, work api.Work) error {
		if handed.Add(1) == 1 {
			return errors.New("exit status 3")
		}
		return nil
	}
	first := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo one"})))
	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the failed item to stop", func() bool { return f.sessionWork(first.ID).State == api.WorkStopped })
	second := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo two"})))
	waitFor(t, "the next item to be handed over", func() bool { return handed.Load() == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := f.sessionWork(second.ID).State; st == api.WorkStopped {
		t.Errorf("the item the handler took was stopped; it belongs to the handler now")
	}
	line := logs.Line("work item failed: the on-work command failed", "session_id="+first.ID)
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "exit status 3") {
		t.Errorf("failure line %q, want an error naming the handler's failure:\n%s", line, logs)
	}
	if got := toolResults(f.events(first.ID)); len(got) != 0 {
		t.Errorf("results = %+v: nobody served the first session", got)
	}
}
