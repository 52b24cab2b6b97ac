package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"time"

	"github.com/memstore/memstore/api"
)

// ListEvents returns one page of a session's event log, oldest first unless
// p.Order says otherwise.
func (c *Client) ListEvents(ctx context.Context, sessionID string, p api.EventListParams) (*api.Page[api.Event], error) {
	path, err := route("/v1/sessions/{session_id}/events", sessionID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.Event])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: p.Query()}, out)
}

// ListAllEvents yields a session's whole event log matching p, page after
// page; it stops at the first error, which it yields. A worker reads the
// history with it after opening a stream, to catch what happened before the
// stream attached.
func (c *Client) ListAllEvents(ctx context.Context, sessionID string, p api.EventListParams) iter.Seq2[api.Event, error] {
	return all(p.Page, func(page string) (*api.Page[api.Event], error) {
		p.Page = page
		return c.ListEvents(ctx, sessionID, p)
	})
}

// SendEvents appends events (user.message, user.interrupt,
// user.tool_result, …) to a session and returns them as stored, with ids.
// Not retried: a repeat of a send that landed would deliver the events
// twice.
func (c *Client) SendEvents(ctx context.Context, sessionID string, events ...api.Event) (*api.SendEventsResponse, error) {
	path, err := route("/v1/sessions/{session_id}/events", sessionID)
	if err != nil {
		return nil, err
	}
	out := new(api.SendEventsResponse)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, body: api.SendEventsRequest{Events: events}}, out)
}

// StreamEventsParams configures StreamEvents.
type StreamEventsParams struct {
	// LastEventID resumes after this event (sent as Last-Event-ID) on a
	// server that supports it; pass the LastEventID of the stream that
	// ended. Servers that do not resume send only new events, so a caller
	// that must miss nothing also lists the history after connecting.
	LastEventID string
	// IdleTimeout ends the stream with ErrStreamIdle when nothing at all,
	// not even a keep-alive, arrives for this long: a connection that died
	// without a word is otherwise noticed only by TCP, many minutes later.
	// 0 means DefaultStreamIdleTimeout; a negative value never times out,
	// for a server that sends no keep-alives.
	IdleTimeout time.Duration
}

// StreamEvents opens a session's live event stream (Server-Sent Events).
// Connecting is retried like any GET; once connected, a dropped stream is
// not re-opened behind the caller's back: Next returns false, and the caller
// reconnects with the stream's LastEventID when it wants more. A stream
// that stays silent for longer than p.IdleTimeout ends the same way, with
// ErrStreamIdle. The stream lives as long as ctx, so do not bound it with a
// client-wide timeout.
func (c *Client) StreamEvents(ctx context.Context, sessionID string, p StreamEventsParams) (*EventStream, error) {
	path, err := route("/v1/sessions/{session_id}/events/stream", sessionID)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Accept": {"text/event-stream"}}
	if p.LastEventID != "" {
		h.Set("Last-Event-ID", p.LastEventID)
	}
	res, _, err := c.send(ctx, request{method: http.MethodGet, path: path, header: h}, false)
	if err != nil {
		return nil, err
	}
	if ct := res.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "text/event-stream" {
			res.Body.Close()
			return nil, fmt.Errorf("client: GET %s: expected an event stream, got Content-Type %q; check that the base URL points at the API", path, ct)
		}
	}
	body := res.Body
	switch {
	case p.IdleTimeout == 0:
		body = watchIdle(body, DefaultStreamIdleTimeout, time.Now, realAfter)
	case p.IdleTimeout > 0:
		body = watchIdle(body, p.IdleTimeout, time.Now, realAfter)
	}
	return &EventStream{body: body, rd: newSSEReader(body, maxSSELine), lastID: p.LastEventID}, nil
}

// EventStream reads a session's events as they happen:
//
//	for s.Next() { e := s.Event(); … }
//	if err := s.Err(); err != nil { … }
//
// Keep-alive comments and ping frames are skipped. An error frame ends the
// stream with the *api.Error it carries.
type EventStream struct {
	body   io.ReadCloser
	rd     *sseReader
	event  api.Event
	lastID string
	err    error
	done   bool
}

// Next reads the next event, blocking until one arrives. It returns false
// when the stream ends: cleanly (Err is nil; the server closed it) or not.
func (s *EventStream) Next() bool {
	if s.done {
		return false
	}
	for {
		f, err := s.rd.next()
		if err != nil {
			s.done = true
			if !errors.Is(err, io.EOF) {
				s.err = fmt.Errorf("client: event stream: %w", err)
			}
			return false
		}
		switch f.Event {
		case "ping":
			continue
		case "error":
			s.done = true
			s.err = streamError(f.Data)
			return false
		}
		var e api.Event
		if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
			s.done = true
			s.err = fmt.Errorf("client: event stream: decoding %q frame: %w", f.Event, err)
			return false
		}
		s.event = e
		switch {
		case f.ID != "":
			s.lastID = f.ID
		case e.ID != "":
			s.lastID = e.ID
		}
		return true
	}
}

// streamError decodes the data of an error frame, an error envelope or a
// bare error object.
func streamError(data string) error {
	var env api.ErrorEnvelope
	if json.Unmarshal([]byte(data), &env) == nil && env.Error != nil && env.Error.Type != "" {
		return env.Error
	}
	var ae api.Error
	if json.Unmarshal([]byte(data), &ae) == nil && ae.Type != "" {
		return &ae
	}
	return &api.Error{Type: api.Internal, Message: "event stream error: " + data}
}

// Event is the event Next read.
func (s *EventStream) Event() api.Event { return s.event }

// Err is why the stream ended, nil for a clean end.
func (s *EventStream) Err() error { return s.err }

// LastEventID is the id of the last event read (the frame's id: field, or
// the event's own id when the server sends none), or the id the stream was
// opened with before any. Pass it to the next StreamEvents to resume.
func (s *EventStream) LastEventID() string { return s.lastID }

// ReconnectDelay is the wait the server asked for before reconnecting (the
// SSE retry: field), 0 when it did not say.
func (s *EventStream) ReconnectDelay() time.Duration { return s.rd.retry }

// Close ends the stream and releases its connection.
func (s *EventStream) Close() error {
	s.done = true
	return s.body.Close()
}
