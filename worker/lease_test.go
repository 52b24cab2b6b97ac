package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

func TestBeatIntervalIsHalfTheTTL(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		60 * time.Second:  30 * time.Second, // memstore's default lease
		10 * time.Second:  5 * time.Second,
		5 * time.Second:   2500 * time.Millisecond, // the shortest lease memstore grants
		time.Second:       time.Second,             // never more often than once a second
		600 * time.Second: 30 * time.Second,        // never less often than every 30 s
	} {
		if got := beatInterval(ttl); got != want {
			t.Errorf("beatInterval(%v) = %v, want %v", ttl, got, want)
		}
	}
}

// isWorkerRequest reports whether r was sent by the worker for its item:
// with the sessions token as a Bearer credential, where the test's admin
// client sends its API key.
func isWorkerRequest(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// The lease heartbeat starts with the item, before anything else is asked
// of the server about it: the session fetch is held here until the item's
// first heartbeat has arrived, which it would wait for in vain if the
// heartbeat only started once the session was fetched (or mounted). And the
// session is fetched once.
func TestHeartbeatStartsBeforeTheSessionIsFetched(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	st := f.memStore("Notes", map[string]string{"/a.md": "a\n"})
	sess := f.session(script(api.ScriptEndTerminate, toolCall("read", map[string]any{"file_path": "/mnt/memory/notes/a.md"})),
		attach(st, api.AccessReadWrite))
	work := f.claim()

	beat := make(chan struct{})
	var once sync.Once
	var fetches, fetchesBeforeBeat atomic.Int32
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPost && r.URL.Path == "/v1/environments/"+f.env.ID+"/work/"+work.ID+"/heartbeat":
				once.Do(func() { close(beat) })
			case r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/"+sess.ID && isWorkerRequest(r):
				fetches.Add(1)
				select {
				case <-beat:
				case <-time.After(10 * time.Second):
					fetchesBeforeBeat.Add(1)
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	if err := f.worker(cfg).RunItem(context.Background(), Item{Work: work}); err != nil {
		t.Fatal(err)
	}
	if n := fetchesBeforeBeat.Load(); n != 0 {
		t.Errorf("the session was fetched %d times before the item's first heartbeat", n)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the worker fetched the session %d times, want once", n)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || got[0].text != "a\n" {
		t.Errorf("results = %+v", got)
	}
}

// With no heartbeat period configured, the worker beats as often as the
// lease the server grants requires: here the shortest one memstore grants
// (5 s), through a call that runs longer than that. Were it to beat at the
// period it assumes before the server has said anything (every 15 s), the
// lease would lapse mid-call and another worker could claim the item. The
// worker's clock and the server's move together, by hand, through 7 s of
// the call.
func TestBeatsFollowTheLeaseTheServerGrants(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	clk := newFakeClock()
	cfg := f.config(logs)
	cfg.HeartbeatInterval = 0
	cfg.clock = clk
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "touch started; until [ -e finish ]; do sleep 0.01; done; echo done", "timeout_ms": 60000})))
	work := f.claim()
	var beats atomic.Int32
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/work/"+work.ID+"/heartbeat") {
				beats.Add(1)
				q := r.URL.Query()
				q.Set("desired_ttl_seconds", strconv.Itoa(api.MinLeaseTTLSeconds))
				r.URL.RawQuery = q.Encode()
			}
			h.ServeHTTP(w, r)
		})
	})
	done := make(chan error, 1)
	go func() { done <- f.worker(cfg).RunItem(context.Background(), Item{Work: work}) }()
	waitStarted(t, cfg.Workdir, "started")

	// The first beat has set the period from the TTL granted.
	if left := clk.waitPending(t, 1); left[0] != 2500*time.Millisecond {
		t.Fatalf("next beat in %v after a %d s lease was granted, want 2.5s", left[0], api.MinLeaseTTLSeconds)
	}
	// Another worker polls all through the call: the item must never be
	// offered to it.
	other := testClient(t, f.srv, client.WithBearerToken(f.key), client.WithWorkerID("other-worker"))
	const step, call = 250 * time.Millisecond, 7 * time.Second
	for elapsed := step; elapsed <= call; elapsed += step {
		f.srv.clock.advance(step)
		clk.Advance(step)
		clk.waitPending(t, 1) // the beat that came due, if any, is done
		got, err := other.PollWork(context.Background(), f.env.ID, api.WorkPollParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			t.Fatalf("the lease lapsed %v into the call: another worker claimed %s\n%s", elapsed, got.ID, logs)
		}
	}
	if n := beats.Load(); n != 3 {
		t.Errorf("%d heartbeats in %v of a %d s lease, want 3 (at 0, 2.5 and 5 s)", n, call, api.MinLeaseTTLSeconds)
	}
	if err := os.WriteFile(inRoom(t, cfg.Workdir, "finish"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunItem = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("RunItem did not return after the call ended:\n%s", logs)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || got[0].isError || strings.TrimSpace(got[0].text) != "done" {
		t.Errorf("results = %+v", got)
	}
	if logs.Line("lease lost") != "" {
		t.Errorf("the worker lost its lease:\n%s", logs)
	}
}

// A forced stop (state stopped, seen on the next heartbeat) shuts the
// session down at once: the running call and everything it started are
// killed, no later call runs, the folders are removed, and RunItem returns.
func TestForcedStopShutsTheSessionDown(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	cfg.KeepWorkdirs = true // after.txt is looked for after the end
	st := f.memStore("Notes", map[string]string{"/a.md": "a\n"})
	f.session(script(api.ScriptEndIdle,
		toolCall("bash", map[string]any{"command": "echo $$ > shell.pid; touch started; sleep 120", "timeout_ms": 300000}),
		toolCall("write", map[string]any{"file_path": "after.txt", "content": "x"}),
	), attach(st, api.AccessReadWrite))
	work := f.claim()
	done := make(chan error, 1)
	go func() { done <- f.worker(cfg).RunItem(context.Background(), Item{Work: work}) }()
	waitStarted(t, cfg.Workdir, "started")
	b, err := os.ReadFile(inRoom(t, cfg.Workdir, "shell.pid"))
	if err != nil {
		t.Fatal(err)
	}
	shell, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}

	if err := f.admin.StopWork(context.Background(), f.env.ID, work.ID, api.StopWorkRequest{Force: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunItem = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker kept serving a stopped item:\n%s", logs)
	}
	if err := syscall.Kill(shell, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the running call's shell (pid %d) outlived the forced stop: %v", shell, err)
	}
	if m, _ := filepath.Glob(filepath.Join(cfg.Workdir, "*"+roomSuffix, "after.txt")); len(m) != 0 {
		t.Errorf("a call ran after the forced stop: %v", m)
	}
	if st := f.work(work.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped", st)
	}
	emptyDir(t, cfg.MountRoot)
	if logs.Line("the work item was stopped on the server; shutting the session down") == "" {
		t.Errorf("no forced-stop log line:\n%s", logs)
	}
	if m := f.memories(st.ID); len(m) != 1 || m["/a.md"] != "a\n" {
		t.Errorf("the store changed: %q", m)
	}
}

// A heartbeat that fails for a reason a retry can fix is retried by the
// lease alone, with one warning per failed beat: the client does not
// repeat it inside the lease's backoff, nor warn about it.
func TestFailedBeatsAreRetriedByTheLeaseAloneWithOneWarningEach(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	cfg.Client = cfg.Client.With(client.WithLogger(logs.Text()))
	sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo ok"})))
	// The first two beats fail; the tool result is held until the third
	// beat landed, so the item lives through both retries.
	var beats atomic.Int32
	landed := make(chan struct{})
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/heartbeat") {
				switch n := beats.Add(1); {
				case n <= 2:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"try again"}}`)
					return
				case n == 3:
					defer close(landed)
				}
			}
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") && isWorkerRequest(r) {
				select {
				case <-landed:
				case <-time.After(30 * time.Second):
					t.Error("the third beat never came")
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	work := f.claim()
	if err := f.worker(cfg).RunItem(context.Background(), Item{Work: work}); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || strings.TrimSpace(got[0].text) != "ok" {
		t.Errorf("results = %+v, want the call served despite the failed beats", got)
	}
	for _, attempt := range []string{"attempt=1", "attempt=2"} {
		if logs.Line("heartbeat failed; retrying", attempt, "503") == "" {
			t.Errorf("no warning for failed beat %s:\n%s", attempt, logs)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want one per failed beat (2):\n%s", n, logs)
	}
}

// A beat that lands on the server but whose answer is lost (the connection
// is cut after the server extended the lease) leaves the worker expecting
// the heartbeat before it, so its next beat gets a 412. That is not a lost
// lease: the lease cannot have lapsed, so the server's newer heartbeat can
// only be the worker's own. The session goes on and finishes; before, the
// worker dropped the item as taken by another claim.
func TestABeatWhoseAnswerWasLostKeepsTheLease(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "until [ -e finish ]; do sleep 0.01; done; echo done", "timeout_ms": 60000})))
	work := f.claim()
	var beats atomic.Int32
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/work/"+work.ID+"/heartbeat") {
				h.ServeHTTP(w, r)
				return
			}
			switch beats.Add(1) {
			case 3: // applied, then the answer is lost with its connection
				h.ServeHTTP(httptest.NewRecorder(), r)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				conn.Close()
				return
			case 8:
				if err := os.WriteFile(inRoom(t, cfg.Workdir, "finish"), nil, 0o644); err != nil {
					t.Error(err)
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	if err := f.worker(cfg).RunItem(context.Background(), Item{Work: work}); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || got[0].text != "done\n" {
		t.Errorf("results = %+v, want the call to finish", got)
	}
	if line := logs.Line("lease lost"); line != "" {
		t.Errorf("the worker gave up the lease: %s", line)
	}
	if logs.Line("a heartbeat whose answer was lost had reached the server") == "" {
		t.Errorf("no line says the lost beat had landed:\n%s", logs)
	}
}
