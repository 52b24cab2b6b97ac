package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
)

// upstream is a Messages API served in-process: it answers each request
// with the next queued reply (the SDK's own types on the wire) and keeps
// every request it received, decoded with the SDK's params type and as
// plain JSON, for the tests to assert on.
type upstream struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	replies  []func(w http.ResponseWriter, r *http.Request)
	requests []upstreamRequest
	arrived  chan struct{}
}

type upstreamRequest struct {
	params anthropic.MessageNewParams
	raw    map[string]any
	header http.Header
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{t: t, arrived: make(chan struct{}, 100)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req upstreamRequest
		req.header = r.Header.Clone()
		if err := req.params.UnmarshalJSON(body); err != nil {
			t.Errorf("upstream: the request is not a MessageNewParams: %v", err)
		}
		json.Unmarshal(body, &req.raw)
		u.mu.Lock()
		u.requests = append(u.requests, req)
		var reply func(http.ResponseWriter, *http.Request)
		if len(u.replies) > 0 {
			reply, u.replies = u.replies[0], u.replies[1:]
		}
		u.mu.Unlock()
		u.arrived <- struct{}{}
		if reply == nil {
			t.Errorf("upstream: request %d has no reply queued", len(u.requests))
			http.Error(w, "no reply queued", http.StatusInternalServerError)
			return
		}
		reply(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) config() ClaudeConfig {
	return ClaudeConfig{BaseURL: u.srv.URL, APIKey: "sk-upstream-test", MaxAttempts: 3, Sleep: noSleep}
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func (u *upstream) queue(f func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.replies = append(u.replies, f)
}

// reply queues a 200 with a message made of blocks.
func (u *upstream) reply(stop anthropic.StopReason, usage anthropic.Usage, blocks ...anthropic.ContentBlockUnion) {
	u.queue(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(anthropic.Message{ID: "msg_test", Type: "message", Role: "assistant", Model: "claude-test",
			Content: blocks, StopReason: stop, Usage: usage})
	})
}

// fail queues an error answer in the API's envelope.
func (u *upstream) fail(status int, errType, message string, header ...string) {
	u.queue(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, errType, message)
	})
}

// hang queues a reply that never comes: it returns when the client gives
// up, closing cancelled.
func (u *upstream) hang(cancelled chan struct{}) {
	u.queue(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(cancelled)
	})
}

func (u *upstream) request(i int) upstreamRequest {
	u.t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if i >= len(u.requests) {
		u.t.Fatalf("upstream got %d requests, want at least %d", len(u.requests), i+1)
	}
	return u.requests[i]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

func text(s string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "text", Text: s}
}

func toolUseBlock(id, name, input string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

func usage(in, out, cacheRead, cacheWrite int64) anthropic.Usage {
	return anthropic.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite}
}

// waitFor waits until the session's log satisfies done, woken by the
// runner's appends (a safety bound ends a test that would hang).
func (h *harness) waitFor(what string, done func(log []api.Event) bool) []api.Event {
	h.t.Helper()
	bound := time.After(30 * time.Second)
	for {
		log := h.log()
		if done(log) {
			return log
		}
		select {
		case <-h.appended:
		case <-bound:
			h.t.Fatalf("the session never reached %s; log: %s", what, h.types(0))
		}
	}
}

// idleAgain waits for the turn to end (session.status_idle after skip).
func (h *harness) idleAgain(skip int) []api.Event {
	h.t.Helper()
	return h.waitFor("idle", func(log []api.Event) bool {
		for _, e := range log[min(skip, len(log)):] {
			if e.Type == api.EventSessionStatusIdle {
				return true
			}
		}
		return false
	})
}
