package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
)

// A tool result the server did not take (a 503 before it saw the request)
// is posted again, once, and lands; a result the server took but whose
// answer was lost on the way back is not posted twice: the session's
// events show it landed before the retry is due.
func TestToolResultPostIsRetried(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := "refused before the server saw it"
		if lost {
			name = "answer lost after the server took it"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "")
			logs := &testlog.Buffer{}
			// A second call follows, so the session goes on while the
			// first result's retry waits.
			sess := f.session(script(api.ScriptEndTerminate,
				toolCall("bash", map[string]any{"command": "echo once >> runs.txt; cat runs.txt"}),
				toolCall("bash", map[string]any{"command": "sleep 1.5; echo second"})))
			var posts atomic.Int32
			failedOnce := make(chan struct{})
			f.srv.Wrap(func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if lost && r.URL.Path == "/v1/sessions/"+sess.ID+"/events/stream" {
						// The stream shows the result only once the lost
						// answer is on its way, and a moment later, as
						// over a real network: the worker then learns that
						// its post failed before it learns that it landed.
						w = &heldResults{ResponseWriter: w, until: failedOnce}
					}
					if r.Method != http.MethodPost || r.URL.Path != "/v1/sessions/"+sess.ID+"/events" || !isWorkerRequest(r) {
						h.ServeHTTP(w, r)
						return
					}
					if posts.Add(1) == 1 {
						if lost {
							h.ServeHTTP(httptest.NewRecorder(), r)
						}
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusServiceUnavailable)
						fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"try again"}}`)
						close(failedOnce)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			cfg := f.config(logs)
			if err := f.worker(cfg).RunItem(context.Background(), Item{Work: f.claim()}); err != nil {
				t.Fatal(err)
			}
			got := toolResults(f.events(sess.ID))
			if len(got) != 2 || got[0].isError || got[0].text != "once\n" || got[1].text != "second\n" {
				t.Fatalf("results = %+v, want each call's one result, posted once", got)
			}
			if f.getSession(sess.ID).Status != api.SessionTerminated {
				t.Errorf("the session did not go on after the result landed")
			}
			if logs.Line("posting the tool result failed; retrying", "level=WARN", "tool=bash") == "" {
				t.Errorf("no retry line:\n%s", logs)
			}
			if logs.Line("could not post the tool result") != "" {
				t.Errorf("the result was given up on:\n%s", logs)
			}
			if n := posts.Load(); !lost && n != 3 {
				t.Errorf("%d posts, want the refused one, its retry and the second call's result", n)
			}
			if lost && logs.Line("the tool result had reached the server after all") == "" {
				t.Errorf("no line saying the lost post had landed:\n%s", logs)
			}
		})
	}
}

// heldResults holds back every event-stream frame that carries a tool
// result until until is closed, and a tenth of a second more.
type heldResults struct {
	http.ResponseWriter
	until <-chan struct{}
}

func (h *heldResults) Write(p []byte) (int, error) {
	if strings.Contains(string(p), api.EventUserToolResult) {
		select {
		case <-h.until:
			time.Sleep(100 * time.Millisecond)
		case <-time.After(10 * time.Second):
		}
	}
	return h.ResponseWriter.Write(p)
}

func (h *heldResults) Flush() { http.NewResponseController(h.ResponseWriter).Flush() }

func (h *heldResults) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// A call that a user.interrupt already cancelled in the stored history
// never runs, however slowly the history arrives: here one event per page,
// so that the worker has fetched the call long before the interrupt. The
// interrupt, as stored, answers the call; the worker does not wait for the
// agent's later events to learn it.
func TestCallInterruptedInTheHistoryNeverRuns(t *testing.T) {
	f := newFixture(t, "")
	marker := filepath.Join(t.TempDir(), "ran")
	sess := f.session(script(api.ScriptEndIdle, toolCall("bash", map[string]any{"command": "touch " + marker})))
	if _, err := f.admin.SendEvents(context.Background(), sess.ID, api.UserInterrupt()); err != nil {
		t.Fatal(err)
	}
	f.sendScript(sess.ID, script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo after"})))
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/v1/sessions/"+sess.ID+"/events" && isWorkerRequest(r) {
				q := r.URL.Query()
				q.Set("limit", "1")
				r.URL.RawQuery = q.Encode()
			}
			h.ServeHTTP(w, r)
		})
	})
	logs := &testlog.Buffer{}
	if err := f.worker(f.config(logs)).RunItem(context.Background(), Item{Work: f.claim()}); err != nil {
		t.Fatal(err)
	}
	// Started and killed by the interrupt read next is still too late.
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) || logs.Line("tool call interrupted") != "" {
		t.Errorf("the interrupted call ran (stat: %v):\n%s", err, logs)
	}
	if got := toolResults(f.events(sess.ID)); len(got) != 1 || got[0].text != "after\n" {
		t.Errorf("results = %+v, want only the call made after the interrupt", got)
	}
}
