package storage

import (
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
)

// Append is one append of events to a session, as every backend makes it:
// each event gets its id and processed_at, and the session row follows
// (status, usage, updated_at). The backend only stores what it returns.
type Append struct {
	// Session is the session row with every event so far folded in.
	Session api.Session
	last    time.Time
}

// NewAppend starts an append to the session view shows.
func NewAppend(view SessionView) *Append {
	a := &Append{Session: view.Session}
	if n := len(view.Log); n > 0 && view.Log[n-1].ProcessedAt != nil {
		a.last = *view.Log[n-1].ProcessedAt
	}
	return a
}

// Ended reports whether a session is over: terminated, nothing reacts to
// it any more.
func Ended(s api.Session) bool { return s.Status == api.SessionTerminated }

// statusAfter is the session status a status event sets, if e is one.
func statusAfter(eventType string) (string, bool) {
	switch eventType {
	case api.EventSessionStatusRunning:
		return api.SessionRunning, true
	case api.EventSessionStatusIdle:
		return api.SessionIdle, true
	case api.EventSessionStatusTerminated:
		return api.SessionTerminated, true
	case api.EventSessionStatusRescheduled:
		return api.SessionRescheduling, true
	}
	return "", false
}

// Next stamps e, appended at now, and folds it into a.Session.
// processed_at strictly increases along the log (a clock that has not moved
// gives a microsecond more): the official worker drops every tool call
// processed at or before the latest interrupt, so two events sharing a
// timestamp could hide a call made after it.
func (a *Append) Next(e api.Event, now time.Time) api.Event {
	if !now.After(a.last) {
		now = a.last.Add(time.Microsecond)
	}
	a.last = now
	e.ID = ids.NewAt(ids.Event, now)
	e.ProcessedAt = &now
	if st, ok := statusAfter(e.Type); ok {
		a.Session.Status = st
	}
	if e.Type == api.EventSpanModelRequestEnd && e.ModelUsage != nil {
		a.Session.Usage.Add(*e.ModelUsage)
	}
	a.Session.UpdatedAt = now
	return e
}
