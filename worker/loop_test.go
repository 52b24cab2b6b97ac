package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

// permanent is the one rule that sorts every failure of the worker's
// requests: the poll, the heartbeat, the event stream and the result post.
func TestPermanentSortsFailures(t *testing.T) {
	status := func(code int) error { return &api.Error{StatusCode: code, Type: "some_error", Message: "m"} }
	for _, c := range []struct {
		err       error
		permanent bool
	}{
		{status(http.StatusBadRequest), true},
		{status(http.StatusUnauthorized), true},
		{status(http.StatusForbidden), true},
		{status(http.StatusNotFound), true},
		{status(http.StatusPreconditionFailed), true},
		{status(http.StatusRequestEntityTooLarge), true},
		{status(http.StatusRequestTimeout), false},
		{status(http.StatusConflict), false},
		{status(http.StatusTooManyRequests), false},
		{status(http.StatusInternalServerError), false},
		{status(http.StatusBadGateway), false},
		{status(http.StatusServiceUnavailable), false},
		{status(529), false},
		{fmt.Errorf("poll: %w", status(http.StatusUnauthorized)), true},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := permanent(c.err); got != c.permanent {
			t.Errorf("permanent(%v) = %v, want %v", c.err, got, c.permanent)
		}
	}
}

// Backoffs double from the base up to the cap, jittered down into [d/2, d].
func TestBackoffDoublesUpToItsCapWithJitter(t *testing.T) {
	for n, d := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 6: time.Minute, 50: time.Minute} {
		for range 100 {
			if got := backoff(n, pollRetryBase, pollRetryMax); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, got, d/2, d)
			}
		}
	}
}

// A poll that fails for a reason a retry can fix (here the server answers
// 503 twice) is retried by the loop alone, after a backoff, with one
// warning per failure — the client does not repeat the poll inside the
// loop's backoff, nor warn about it — and the loop goes on to serve the
// session: Run does not end. The worker's clock is moved by hand past the
// backoffs.
func TestTransientPollFailuresBackOffAndTheLoopGoesOn(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo served"})))
	var polls atomic.Int32
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/work/poll") && polls.Add(1) <= 2 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"try again"}}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	clk := newFakeClock()
	cfg := f.config(logs)
	// The client logs its retries where the worker logs: there would be
	// any the client made.
	cfg.Client = cfg.Client.With(client.WithLogger(logs.Text()))
	cfg.clock = clk
	stop := runWorker(t, f.worker(cfg))

	// The loop waits out its first backoff, 2 s jittered down into
	// [1 s, 2 s], without polling.
	left := clk.waitPending(t, 1)[0]
	if left < pollRetryBase/2 || left > pollRetryBase {
		t.Errorf("first backoff %v, want within [%v, %v]", left, pollRetryBase/2, pollRetryBase)
	}
	if n := polls.Load(); n != 1 {
		t.Errorf("%d polls before the first backoff ended, want the 1 that failed", n)
	}
	line := logs.Line("polling for work failed; retrying")
	for _, part := range []string{"level=WARN", "environment_id=" + f.env.ID, "attempt=1", "retry_in=", "503"} {
		if !strings.Contains(line, part) {
			t.Errorf("retry line %q lacks %q:\n%s", line, part, logs)
		}
	}
	clk.Advance(left)
	left = clk.waitPending(t, 1)[0]
	if n := polls.Load(); n != 2 {
		t.Errorf("%d polls before the second backoff ended, want the 2 that failed", n)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings after two failed polls, want one each:\n%s", n, logs)
	}

	clk.Advance(left)
	waitFor(t, "the session to be served after the failed polls", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil: a transient failure must not end the loop", err)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || strings.TrimSpace(got[0].text) != "served" {
		t.Errorf("results = %+v", got)
	}
}

// The poll loop and the webhook drain claim through one step, so a key
// the server refuses ends both with the same error, which names the
// environment and what to check, and nothing is claimed.
func TestRunAndDrainEndOnTheSameRefusal(t *testing.T) {
	f := newFixture(t, "")
	sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo never"})))
	cfg := f.config(&testlog.Buffer{})
	cfg.EnvironmentKey = "sk-env-wrong"
	w := f.worker(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runErr, drainErr := w.Run(ctx), w.Drain(ctx)
	for name, err := range map[string]error{"Run": runErr, "Drain": drainErr} {
		if err == nil || !strings.Contains(err.Error(), "polling environment "+f.env.ID+" was refused") || !strings.Contains(err.Error(), "401: the key is wrong or revoked") {
			t.Errorf("%s = %v, want the refusal naming the environment and the fix", name, err)
		}
	}
	if st := f.sessionWork(sess.ID).State; st != api.WorkQueued {
		t.Errorf("the session's work is %s after refused claims, want still queued", st)
	}
}
