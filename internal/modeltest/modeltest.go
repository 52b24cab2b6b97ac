// Package modeltest serves a Messages API in-process for tests: the model
// runtime's, the worker's end-to-end ones and the chat command's. It
// speaks the official SDK's own wire types and keeps every request it gets,
// so a test can assert exactly what the model was sent.
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Upstream is a Messages API served in-process: it answers each request
// with the next queued reply (the SDK's own types on the wire) and keeps
// every request it received, decoded with the SDK's params type and as
// plain JSON, for the tests to assert on.
type Upstream struct {
	t   testing.TB
	URL string
	srv *httptest.Server

	// Arrived receives a value as each request arrives (up to 100 that
	// nobody took).
	Arrived chan struct{}

	mu       sync.Mutex
	replies  []func(w http.ResponseWriter, r *http.Request)
	requests []Request
}

// Request is a request as received: decoded with the SDK's params type,
// as plain JSON, and its headers.
type Request struct {
	Params anthropic.MessageNewParams
	Raw    map[string]any
	Header http.Header
}

// New starts an Upstream for t, closed when t ends.
func New(t testing.TB) *Upstream {
	u := &Upstream{t: t, Arrived: make(chan struct{}, 100)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req Request
		req.Header = r.Header.Clone()
		if err := req.Params.UnmarshalJSON(body); err != nil {
			t.Errorf("upstream: the request is not a MessageNewParams: %v", err)
		}
		json.Unmarshal(body, &req.Raw)
		u.mu.Lock()
		u.requests = append(u.requests, req)
		var reply func(http.ResponseWriter, *http.Request)
		if len(u.replies) > 0 {
			reply, u.replies = u.replies[0], u.replies[1:]
		}
		u.mu.Unlock()
		select {
		case u.Arrived <- struct{}{}:
		default: // nobody is counting (a benchmark)
		}
		if reply == nil {
			t.Errorf("upstream: request %d has no reply queued", len(u.requests))
			http.Error(w, "no reply queued", http.StatusInternalServerError)
			return
		}
		reply(w, r)
	}))
	u.URL = u.srv.URL
	t.Cleanup(u.srv.Close)
	return u
}

// Queue adds a handler for the next request without a reply.
func (u *Upstream) Queue(f func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.replies = append(u.replies, f)
}

// Reply queues a 200 with a message made of blocks.
func (u *Upstream) Reply(stop anthropic.StopReason, usage anthropic.Usage, blocks ...anthropic.ContentBlockUnion) {
	u.Queue(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(anthropic.Message{ID: "msg_test", Type: "message", Role: "assistant", Model: "claude-test",
			Content: blocks, StopReason: stop, Usage: usage})
	})
}

// Fail queues an error answer in the API's envelope.
func (u *Upstream) Fail(status int, errType, message string, header ...string) {
	u.Queue(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, errType, message)
	})
}

// Hang queues a reply that never comes: it returns when the client gives
// up, closing cancelled.
func (u *Upstream) Hang(cancelled chan struct{}) {
	u.Queue(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(cancelled)
	})
}

// Request is the i-th request received (from 0).
func (u *Upstream) Request(i int) Request {
	u.t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if i >= len(u.requests) {
		u.t.Fatalf("upstream got %d requests, want at least %d", len(u.requests), i+1)
	}
	return u.requests[i]
}

// Count is how many requests arrived.
func (u *Upstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

// Text is a text block of a reply.
func Text(s string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "text", Text: s}
}

// ToolUse is a tool_use block of a reply; input is its JSON.
func ToolUse(id, name, input string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

// Usage is a reply's token usage.
func Usage(in, out, cacheRead, cacheWrite int64) anthropic.Usage {
	return anthropic.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite}
}
