package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// sessionsPageSize is how many sessions the list shows.
const sessionsPageSize = 100

// sessionStatuses are the statuses the sessions list filters by.
var sessionStatuses = []string{api.SessionIdle, api.SessionRunning, api.SessionRescheduling, api.SessionTerminated}

// sessionsPage lists sessions newest first, a page at a time, filtered
// by status and agent as the API's list is; the paging link keeps the
// filter.
func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	in := r.URL.Query()
	query := storage.SessionQuery{ListQuery: storage.ListQuery{Limit: sessionsPageSize, IncludeArchived: true, After: in.Get("after")}, AgentID: in.Get("agent")}
	if status := in.Get("status"); status != "" {
		if !slices.Contains(sessionStatuses, status) {
			return badRequest("status %q is not a session status; pick one of %s, or any", status, strings.Join(sessionStatuses, ", "))
		}
		query.Statuses = []string{status}
	}
	if query.AgentID != "" && !ids.Valid(ids.Agent, query.AgentID) {
		return badRequest("agent %q is not an agent id; pick an agent from the list", query.AgentID)
	}
	if query.After != "" && !ids.Valid(ids.Session, query.After) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	sessions, err := c.store.ListSessions(r.Context(), query)
	if err != nil {
		return err
	}
	agents, err := c.store.ListAgents(r.Context(), storage.ListQuery{Limit: api.MaxListLimit, IncludeArchived: true})
	if err != nil {
		return err
	}
	next := ""
	if len(sessions) == sessionsPageSize {
		next = sessions[len(sessions)-1].ID
	}
	return c.render(w, r, q, http.StatusOK, "sessions", "Sessions", struct {
		Sessions      []api.Session
		Next          string
		Status, Agent string
		Statuses      []string
		Agents        []api.Agent
	}{sessions, next, in.Get("status"), query.AgentID, sessionStatuses, agents})
}

func (c *Console) loadSession(r *http.Request) (api.Session, error) {
	id := r.PathValue("session")
	if !ids.Valid(ids.Session, id) {
		return api.Session{}, notFound("%q is not a session id; pick a session from the list", id)
	}
	s, err := c.store.GetSession(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return s, notFound("session %s does not exist (it may have been deleted); pick a session from the list", id)
	}
	return s, err
}

// eventView is one event as the session page shows it.
type eventView struct {
	api.Event
	Seq int64
	// Input is a tool call's input, indented.
	Input string
	// Text is the event's text content.
	Text string
	// Pending marks a call awaiting the person; its row carries the forms
	// that answer it, which post to SessionID with CSRF.
	Pending         bool
	SessionID, CSRF string
}

func viewEvent(e storage.StoredEvent, sessionID, csrf string) eventView {
	return eventView{Event: e.Event, Seq: e.Seq, Text: e.Event.Text(), Input: readableJSON(e.Event.Input), SessionID: sessionID, CSRF: csrf}
}

// readableJSON indents a tool call's input and writes <, > and & as
// themselves (the API's JSON escapes them): the page escapes what it shows,
// and a person should read the text the agent sent.
func readableJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// sessionLogLimit is how many events the session page loads at first;
// the live stream brings the rest.
const sessionLogLimit = 1000

func (c *Console) sessionPage(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadSession(r)
	if err != nil {
		return err
	}
	return c.showSession(w, r, q, http.StatusOK, s, talkView{})
}

func (c *Console) showSession(w http.ResponseWriter, r *http.Request, q *request, status int, s api.Session, talk talkView) error {
	stored, err := c.store.ListEvents(r.Context(), s.ID, storage.EventQuery{Limit: sessionLogLimit})
	if err != nil {
		return err
	}
	events := make([]eventView, len(stored))
	var last int64
	for i, e := range stored {
		events[i], last = viewEvent(e, s.ID, q.CSRF), e.Seq
	}
	markPending(events)
	title := s.ID
	if s.Title != nil && *s.Title != "" {
		title = *s.Title
	}
	return c.render(w, r, q, status, "session", "Session "+title, struct {
		Session api.Session
		Events  []eventView
		LastSeq int64
		Talk    talkView
	}{s, events, last, talk})
}

// sessionStream sends a session's events after ?after=SEQ as they are
// appended, as Server-Sent Events whose data is the event's row, rendered
// (and escaped) by the same template as the page.
func (c *Console) sessionStream(w http.ResponseWriter, r *http.Request, q *request) error {
	s, err := c.loadSession(r)
	if err != nil {
		return err
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after, _ = strconv.ParseInt(id, 10, 64)
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errors.New("console: the response writer cannot stream")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	row := c.pages["session"].Lookup("event")
	for {
		// A user deleted (or signed out) meanwhile stops seeing events.
		if _, _, err := c.session(r); err != nil {
			return nil
		}
		wake := c.app.Sessions.WaitForLog(s.ID)
		events, err := c.store.ListEvents(r.Context(), s.ID, storage.EventQuery{AfterSeq: after, Limit: sessionLogLimit})
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) || r.Context().Err() != nil {
				return nil
			}
			c.log.ErrorContext(r.Context(), "console session stream failed", "session_id", s.ID, "error", err)
			return nil
		}
		for _, e := range events {
			var b bytes.Buffer
			v := viewEvent(e, s.ID, q.CSRF)
			v.Pending = awaitsPerson(e.Event)
			if err := row.Execute(&b, v); err != nil {
				return err
			}
			// An SSE data field is one line per "data:" line.
			fmt.Fprintf(w, "id: %d\nevent: row\n", e.Seq)
			for _, line := range bytes.Split(b.Bytes(), []byte("\n")) {
				fmt.Fprintf(w, "data: %s\n", line)
			}
			fmt.Fprint(w, "\n")
			after = e.Seq
		}
		flusher.Flush()
		if len(events) == sessionLogLimit {
			continue
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-c.cfg.Closing:
			return nil // the browser reconnects with Last-Event-ID
		case <-wake:
		}
	}
}
