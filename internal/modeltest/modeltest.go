// Package modeltest serves a Messages API in-process for tests: the model
// runtime's, the worker's end-to-end ones and the chat command's. It
// speaks the official SDK's own wire types — a JSON reply, or the Messages
// stream (server-sent events) when the request asks for one — and keeps
// every request it gets, so a test can assert exactly what the model was
// sent.
package modeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Upstream is a Messages API served in-process: it answers each request
// with the next queued reply (the SDK's own types on the wire) and keeps
// every request it received, decoded with the SDK's params type and as
// plain JSON, for the tests to assert on.
type Upstream struct {
	t   T
	URL string
	srv *httptest.Server

	// Arrived receives a value as each request arrives (up to 100 that
	// nobody took).
	Arrived chan struct{}

	mu        sync.Mutex
	replies   []Handler
	otherwise func(Request) Handler
	requests  []Request
}

// Handler answers one request.
type Handler func(w http.ResponseWriter, r *http.Request)

// T is what an Upstream needs of its test: *testing.T and *testing.B are
// one, and so is the by-hand server of cmd/upstream.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Request is a request as received: decoded with the SDK's params type,
// as plain JSON, and its headers.
type Request struct {
	Params anthropic.MessageNewParams
	Raw    map[string]any
	Header http.Header
}

// New starts an Upstream for t, closed when t ends.
func New(t T) *Upstream {
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
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.mu.Lock()
		u.requests = append(u.requests, req)
		var reply Handler
		switch {
		case len(u.replies) > 0:
			reply, u.replies = u.replies[0], u.replies[1:]
		case u.otherwise != nil:
			reply = u.otherwise(req)
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
func (u *Upstream) Queue(f Handler) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.replies = append(u.replies, f)
}

// Otherwise answers each request that finds no reply queued with the
// handler f picks for it, for an upstream that converses (a by-hand run).
func (u *Upstream) Otherwise(f func(Request) Handler) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.otherwise = f
}

// Reply queues a 200 with a message made of blocks: streamed event by
// event when the request asks for a stream, as one JSON body otherwise.
func (u *Upstream) Reply(stop anthropic.StopReason, usage anthropic.Usage, blocks ...anthropic.ContentBlockUnion) {
	u.Queue(Answer(stop, usage, blocks...))
}

// Answer is the handler Reply queues.
func Answer(stop anthropic.StopReason, usage anthropic.Usage, blocks ...anthropic.ContentBlockUnion) Handler {
	return func(w http.ResponseWriter, r *http.Request) {
		if !streaming(r) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(message(stop, usage, blocks))
			return
		}
		s := startStream(w, stop, usage)
		for i, b := range blocks {
			s.block(i, b)
		}
		s.end(stop, usage)
	}
}

// FailMidStream queues a stream that sends blocks and then an error event
// in the API's envelope, as the API does when it fails after the 200.
func (u *Upstream) FailMidStream(errType, message string, blocks ...anthropic.ContentBlockUnion) {
	u.Queue(func(w http.ResponseWriter, r *http.Request) {
		s := startStream(w, "", anthropic.Usage{})
		for i, b := range blocks {
			s.block(i, b)
		}
		s.raw("error", fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, errType, message))
	})
}

// CutMidStream queues a stream that sends blocks and then loses its
// connection, as a proxy that drops it would.
func (u *Upstream) CutMidStream(blocks ...anthropic.ContentBlockUnion) {
	u.Queue(func(w http.ResponseWriter, r *http.Request) {
		s := startStream(w, "", anthropic.Usage{})
		for i, b := range blocks {
			s.block(i, b)
		}
		panic(http.ErrAbortHandler) // closes the connection mid-body
	})
}

// StallMidStream queues a stream that starts, sends blocks, and then
// stalls until the client goes away (closing cancelled).
func (u *Upstream) StallMidStream(cancelled chan struct{}, blocks ...anthropic.ContentBlockUnion) {
	u.Queue(Stall(func() { close(cancelled) }, blocks...))
}

// Stall is the handler StallMidStream queues; gone runs when the client
// has gone away.
func Stall(gone func(), blocks ...anthropic.ContentBlockUnion) Handler {
	return func(w http.ResponseWriter, r *http.Request) {
		s := startStream(w, "", anthropic.Usage{})
		for i, b := range blocks {
			s.block(i, b)
		}
		<-r.Context().Done()
		gone()
	}
}

func streaming(r *http.Request) bool {
	var p struct {
		Stream bool `json:"stream"`
	}
	json.NewDecoder(r.Body).Decode(&p)
	return p.Stream
}

func message(stop anthropic.StopReason, usage anthropic.Usage, blocks []anthropic.ContentBlockUnion) anthropic.Message {
	return anthropic.Message{ID: "msg_test", Type: "message", Role: "assistant", Model: "claude-test",
		Content: blocks, StopReason: stop, Usage: usage}
}

// stream writes the Messages stream's events, each flushed as it goes.
type stream struct {
	w http.ResponseWriter
}

func startStream(w http.ResponseWriter, stop anthropic.StopReason, usage anthropic.Usage) stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	s := stream{w}
	// As the API does, message_start carries the input side of the usage
	// and no content; message_delta brings the totals.
	start := message("", anthropic.Usage{InputTokens: usage.InputTokens, CacheReadInputTokens: usage.CacheReadInputTokens,
		CacheCreationInputTokens: usage.CacheCreationInputTokens, OutputTokens: 1}, []anthropic.ContentBlockUnion{})
	s.send("message_start", anthropic.MessageStartEvent{Message: start})
	return s
}

// block streams block i: its start with the content empty, its content
// in two deltas (a thinking block's signature in a third), its stop.
func (s stream) block(i int, b anthropic.ContentBlockUnion) {
	start := anthropic.ContentBlockStartEventContentBlockUnion{Type: b.Type, ID: b.ID, Name: b.Name, Data: b.Data}
	var deltas []anthropic.RawContentBlockDeltaUnion
	switch b.Type {
	case "text":
		for _, part := range halves(b.Text) {
			deltas = append(deltas, anthropic.RawContentBlockDeltaUnion{Type: "text_delta", Text: part})
		}
	case "thinking":
		for _, part := range halves(b.Thinking) {
			deltas = append(deltas, anthropic.RawContentBlockDeltaUnion{Type: "thinking_delta", Thinking: part})
		}
		deltas = append(deltas, anthropic.RawContentBlockDeltaUnion{Type: "signature_delta", Signature: b.Signature})
	case "tool_use":
		start.Input = map[string]any{}
		for _, part := range halves(string(b.Input)) {
			deltas = append(deltas, anthropic.RawContentBlockDeltaUnion{Type: "input_json_delta", PartialJSON: part})
		}
	}
	s.send("content_block_start", anthropic.ContentBlockStartEvent{Index: int64(i), ContentBlock: start})
	for _, d := range deltas {
		s.send("content_block_delta", anthropic.ContentBlockDeltaEvent{Index: int64(i), Delta: d})
	}
	s.send("content_block_stop", anthropic.ContentBlockStopEvent{Index: int64(i)})
}

func (s stream) end(stop anthropic.StopReason, usage anthropic.Usage) {
	s.send("message_delta", anthropic.MessageDeltaEvent{Delta: anthropic.MessageDeltaEventDelta{StopReason: stop},
		// The API's totals here are cumulative: they are the message's.
		Usage: anthropic.MessageDeltaUsage{InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens,
			CacheReadInputTokens: usage.CacheReadInputTokens, CacheCreationInputTokens: usage.CacheCreationInputTokens}})
	s.send("message_stop", anthropic.MessageStopEvent{})
}

func (s stream) send(event string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.raw(event, string(data))
}

func (s stream) raw(event, data string) {
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data)
	s.w.(http.Flusher).Flush()
}

// halves splits s in two, so that every block arrives in more than one
// delta.
func halves(s string) []string {
	r := []rune(s)
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
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

// Thinking is a thinking block of a reply, with its signature.
func Thinking(thinking, signature string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "thinking", Thinking: thinking, Signature: signature}
}

// RedactedThinking is a redacted_thinking block of a reply.
func RedactedThinking(data string) anthropic.ContentBlockUnion {
	return anthropic.ContentBlockUnion{Type: "redacted_thinking", Data: data}
}

// Usage is a reply's token usage.
func Usage(in, out, cacheRead, cacheWrite int64) anthropic.Usage {
	return anthropic.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheWrite}
}
