package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func (s *Server) eventRoutes() {
	s.mux.HandleFunc("GET /v1/sessions/{session}/events", s.authed(s.listEvents))
	s.mux.HandleFunc("POST /v1/sessions/{session}/events", s.authed(s.sendEvents))
	s.mux.HandleFunc("GET /v1/sessions/{session}/events/stream", s.authed(s.streamEvents))
}

// listEvents pages through a session's log, oldest first by default. The
// limit goes up to 1,000 and larger values are lowered to it rather than
// refused: the official worker asks for 1,000 and would otherwise lose the
// history it reconciles against.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, p Principal) error {
	sess, err := s.loadSession(r, p)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	asc, err := orderParam(q, true)
	if err != nil {
		return err
	}
	kind := "events_asc"
	if !asc {
		kind = "events_desc"
	}
	l, err := listParams(q, kind, api.MaxEventListLimit, true)
	if err != nil {
		return err
	}
	eq := storage.EventQuery{Limit: l.limit + 1, Types: arrayParam(q, "types"), Desc: !asc}
	if l.after != "" {
		seq, err := strconv.ParseInt(l.after, 10, 64)
		if err != nil {
			return badCursor()
		}
		if eq.Desc {
			eq.BeforeSeq = seq
		} else {
			eq.AfterSeq = seq
		}
	}
	list, err := s.store.ListEvents(r.Context(), sess.ID, eq)
	if err != nil {
		return orMissing(err, "session", sess.ID, listSessions)
	}
	writeJSON(w, http.StatusOK, cutPage(l, list,
		func(e storage.StoredEvent) string { return strconv.FormatInt(e.Seq, 10) },
		func(e storage.StoredEvent) api.Event { return e.Event }))
	return nil
}

// sendEvents appends the client's events through app.Sessions.Send, which
// checks them against the log, queues work and lets the agent react. An
// API key reaches every session, so its send reads no session first (two
// round trips, its row and its resources): the append finds a missing
// session itself, and a send refused for another reason looks the session
// up then, so that a missing one is still answered 404 whatever else is
// wrong.
func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request, p Principal) error {
	if p.Kind != storage.APIKey {
		sess, err := s.loadSession(r, p)
		if err != nil {
			return err
		}
		return s.send(w, r, p, sess.ID)
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	err = s.send(w, r, p, id)
	if err != nil {
		if _, gone := s.store.GetSession(r.Context(), id); errors.Is(gone, storage.ErrNotFound) {
			return orMissing(gone, "session", id, listSessions)
		}
	}
	return err
}

// send is sendEvents to session id, which p may reach.
func (s *Server) send(w http.ResponseWriter, r *http.Request, p Principal, id string) error {
	var req sendEventsBody
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	stored, err := s.app.Sessions.Send(r.Context(), id, req.Events, p.Caller())
	if err != nil {
		return orMissing(err, "session", id, listSessions)
	}
	writeEvents(w, stored)
	return nil
}

// writeEvents answers with api.SendEventsResponse{Data: events}, the bytes
// writeJSON writes, without its scan of each event: encoding/json
// compacts what a Marshaler returns, and for a 1 KB message that scan was
// 7 % of the server's CPU per send in the PostgreSQL queue benchmark.
// Event.MarshalJSON's bytes are compact already unless the event carries
// a client's raw fields (Extra), which are compacted here as writeJSON
// would (TestEventsAnswerAsWriteJSONWritesThem).
func writeEvents(w http.ResponseWriter, events []api.Event) {
	if events == nil {
		writeJSON(w, http.StatusOK, api.SendEventsResponse{})
		return
	}
	parts := make([][]byte, len(events))
	size := len(`{"data":[]}`) + len(events)
	for i, e := range events {
		b, err := e.MarshalJSON()
		if err == nil && len(e.Extra) > 0 {
			var c bytes.Buffer
			err = json.Compact(&c, b)
			b = c.Bytes()
		}
		if err != nil {
			writeJSON(w, http.StatusOK, api.SendEventsResponse{Data: events}) // its error, as before
			return
		}
		parts[i] = b
		size += len(b)
	}
	out := make([]byte, 0, size)
	out = append(out, `{"data":[`...)
	for i, b := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	out = append(out, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// streamEvents serves a session's log as Server-Sent Events: one frame per
// event with id (the event id), event (its type) and data (its JSON). A
// fresh connection starts with the events appended after it; one that sends
// Last-Event-ID resumes right after that event, so a reconnecting client
// loses nothing. An idle stream sends a comment every StreamKeepalive. It
// ends when the client goes, when the session is deleted (after a
// session.deleted frame), when a sessions token stops working or an
// environment key is revoked (seen at the next event or keepalive), or when
// the server shuts down (CloseStreams).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, p Principal) error {
	sess, err := s.loadSession(r, p)
	if err != nil {
		return err
	}
	ctx := r.Context()
	var after int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if !ids.Valid(ids.Event, last) {
			return apiErrorf(invalidRequest, "Last-Event-ID %q is not an event id; reconnect without it and list the events to catch up", last)
		}
		after, err = s.store.EventSeq(ctx, sess.ID, last)
		if errors.Is(err, storage.ErrNotFound) {
			return apiErrorf(invalidRequest, "Last-Event-ID %s is not an event of session %s; reconnect without it and list the events to catch up", last, sess.ID)
		}
		if err != nil {
			return err
		}
	} else {
		latest, err := s.store.ListEvents(ctx, sess.ID, storage.EventQuery{Desc: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(latest) > 0 {
			after = latest[0].Seq
		}
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Headers go out now: the official worker waits for them before it
	// lists the history it reconciles against.
	if err := rc.Flush(); err != nil {
		return nil
	}
	s.metrics.streamsOpen.Inc()
	defer s.metrics.streamsOpen.Dec()
	log := s.log.With("session_id", sess.ID)
	keepalive := time.NewTicker(s.cfg.StreamKeepalive)
	defer keepalive.Stop()
	// The session's followers share one reader of its log (app.Follow).
	follow := s.app.Sessions.Follow(sess.ID, after)
	defer follow.Close()
	// A sessions token or an environment key is checked again at every
	// wake of the session, events or not; an API key needs only events.
	recheck := p.Kind == storage.SessionsToken || p.Kind == storage.EnvironmentKey
	for {
		changed := follow.Changed()
		if recheck {
			changed = follow.Woken()
		}
		batch, more, err := follow.Next(ctx)
		if errors.Is(err, storage.ErrNotFound) {
			writeFrame(w, sessionDeletedEvent(s.now()))
			rc.Flush()
			return nil
		}
		if err != nil {
			if ctx.Err() == nil {
				log.ErrorContext(ctx, "event stream read failed; closing it", "err", err)
			}
			return nil
		}
		for _, e := range batch {
			if _, err := w.Write(e.Frame); err != nil {
				return nil
			}
		}
		if len(batch) > 0 {
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
		if more {
			continue
		}
		if p.Kind == storage.SessionsToken {
			if _, err := s.tokenWork(ctx, p); err != nil {
				return nil
			}
		}
		if p.Kind == storage.EnvironmentKey {
			// A revoked key is refused everywhere, its open streams included.
			if _, err := s.authenticate(r); err != nil {
				return nil
			}
		}
		select {
		case <-changed:
		case <-keepalive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil
		}
	}
}

// writeFrame writes one event as an SSE frame (app.SSEFrame).
func writeFrame(w http.ResponseWriter, e api.Event) error {
	frame, err := app.SSEFrame(e)
	if err != nil {
		return err
	}
	_, err = w.Write(frame)
	return err
}
