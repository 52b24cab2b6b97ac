package storage

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/webhooks"
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

// AppendRows is what an append needs of a backend, inside one of its write
// transactions. A backend that locks rows locks the session in View, so
// that appends to one session run one at a time.
type AppendRows interface {
	// View reads the session, its log and whether a live item serves it.
	View(ctx context.Context, sessionID string) (SessionView, error)
	// Now is the transaction's clock.
	Now(ctx context.Context) (time.Time, error)
	// Emit puts webhook events in the outbox.
	Emit(ctx context.Context, evs ...webhooks.Event) error
	// StoreEvents stores events, in order, at the end of the log of
	// session sess, writes its row back as sess and wakes whoever follows
	// the session at commit. It returns the sequence number of the last
	// event, or 0 where the backend reads it only after the transaction's
	// function returned (a shared transaction's, sqlstore.QueryDeferrer):
	// the view the append returns has it then.
	StoreEvents(ctx context.Context, sess api.Session, events []api.Event) (int64, error)
}

// AppendIn is AppendEvents in rows: guard (when not nil) sees the session
// as the transaction does and may refuse, then the events are stamped,
// stored and announced to webhooks as AppendStepsIn does one round. It returns the view as it is afterwards (its Log includes
// the new events, and so does its Seq unless StoreEvents left it to the
// store, which sets it once the write returns) and the stored copies of
// events.
func AppendIn(ctx context.Context, rows AppendRows, sessionID string, events []api.Event, guard AppendGuard) (SessionView, []api.Event, error) {
	return AppendStepsIn(ctx, rows, sessionID, func(v SessionView, round int) ([]api.Event, error) {
		if round > 0 {
			return nil, nil
		}
		if guard != nil {
			if err := guard(v); err != nil {
				return nil, err
			}
		}
		return events, nil
	})
}

// MaxStepRounds bounds the rounds of one AppendSteps: a runtime that keeps
// emitting commits every so many rounds and is asked again in a new
// transaction, so no transaction holds a session's lock for long.
const MaxStepRounds = 16

// AppendStepsIn is AppendSteps in rows. The transaction's clock is read
// once: the events of one transaction are stamped a microsecond apart
// (Append.Next). The events of every round are stored in one statement,
// and the webhook outbox and the session row written once, after the last
// round; until then the view's Seq stays the log's before the append.
func AppendStepsIn(ctx context.Context, rows AppendRows, sessionID string, step AppendStep) (SessionView, []api.Event, error) {
	view, err := rows.View(ctx, sessionID)
	if err != nil {
		return SessionView{}, nil, err
	}
	var (
		ap    *Append
		now   time.Time
		out   []api.Event
		hooks []webhooks.Event
	)
	for round := range MaxStepRounds {
		shown := view
		shown.Log = slices.Clip(view.Log) // its room is this append's
		events, err := step(shown, round)
		if err != nil {
			return SessionView{}, nil, err
		}
		if len(events) == 0 {
			break
		}
		if ap == nil {
			ap = NewAppend(view)
			if now, err = rows.Now(ctx); err != nil {
				return SessionView{}, nil, err
			}
		}
		for _, e := range events {
			e = ap.Next(e, now)
			hooks = append(hooks, webhooks.ForSessionEvent(sessionID, e)...)
			view.Log = append(view.Log, e)
			out = append(out, e)
		}
		view.Session = ap.Session
	}
	if ap == nil {
		return view, nil, nil
	}
	if err := rows.Emit(ctx, hooks...); err != nil {
		return SessionView{}, nil, err
	}
	if view.Seq, err = rows.StoreEvents(ctx, view.Session, out); err != nil {
		return SessionView{}, nil, fmt.Errorf("append %d events to session %s: %w", len(out), sessionID, err)
	}
	return view, out, nil
}

// SessionRows is what creating a session needs of a backend, inside one of
// its write transactions.
type SessionRows interface {
	AppendRows
	// StoreArchived reports whether memory store storeID is archived;
	// ErrNotFound when there is none. A backend that locks rows holds the
	// store's row (shared) until commit: a store deleted or archived
	// meanwhile waits, then sees the session attached.
	StoreArchived(ctx context.Context, storeID string) (bool, error)
	// InsertSession stores a new session with its resources, in order.
	InsertSession(ctx context.Context, sess api.Session) error
	// InsertWork stores a new work item.
	InsertWork(ctx context.Context, w Work) error
}

// CreateSessionIn is CreateSession in rows: every attached store must
// exist (ErrNotFound) and not be archived (ErrStoreArchived); the session
// is stored with w, its first work item as package workqueue makes it, and
// initial is appended to its log. It returns the view as it is afterwards.
func CreateSessionIn(ctx context.Context, rows SessionRows, sess api.Session, w Work, initial []api.Event) (SessionView, error) {
	for _, r := range sess.Resources {
		archived, err := rows.StoreArchived(ctx, r.MemoryStoreID)
		if err == nil && archived {
			err = ErrStoreArchived
		}
		if err != nil {
			return SessionView{}, fmt.Errorf("attach memory store %s: %w", r.MemoryStoreID, err)
		}
	}
	if err := rows.InsertSession(ctx, sess); err != nil {
		return SessionView{}, fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	if err := rows.InsertWork(ctx, w); err != nil {
		return SessionView{}, err
	}
	if err := rows.Emit(ctx, webhooks.Of(webhooks.SessionCreated, sess.ID)); err != nil {
		return SessionView{}, err
	}
	view, _, err := AppendIn(ctx, rows, sess.ID, initial, nil)
	return view, err
}
