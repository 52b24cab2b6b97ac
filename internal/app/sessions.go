package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Sessions drives the sessions' agent runtimes and wakes whoever follows a
// session's log (the API's event streams, the console's live page).
type Sessions struct {
	app    *App
	runner *agent.Runner
	// streams wakes, by session id, the followers of a session's log.
	streams waiters
	// hubs read each followed session's log for its followers (Follow).
	hubsMu sync.Mutex
	hubs   map[string]*logHub
}

func newSessions(a *App) *Sessions {
	s := &Sessions{app: a, streams: newWaiters(), hubs: map[string]*logHub{}}
	model := a.modelConfig()
	// The runtime's memory_search searches a session's own stores, as any
	// caller that reaches exactly those.
	model.Search = func(ctx context.Context, storeIDs []string, query string) ([]storage.SearchHit, error) {
		return a.Search(ctx, Reach{StoreIDs: storeIDs}, query)
	}
	s.runner = agent.NewRunner(a.store, agent.ByModel{Scripted: agent.Scripted{}, Model: agent.NewClaude(model)}, agent.RunnerConfig{
		Log: a.log, TurnRetry: a.cfg.TurnRetry, Appended: s.streams.wake})
	return s
}

// WaitForLog returns a channel closed at the next change of a session's
// event log; a follower takes it before it reads the log.
func (s *Sessions) WaitForLog(sessionID string) <-chan struct{} {
	return s.streams.wait(sessionID)
}

// LogChanged wakes the followers of a session's log, after a write the
// runtime need not react to before the writer answers.
func (s *Sessions) LogChanged(sessionID string) { s.streams.wake(sessionID) }

// Ended wakes a session archived or deleted: its followers, and its
// runtime, which abandons a model call in flight.
func (s *Sessions) Ended(sessionID string) {
	s.streams.wake(sessionID)
	s.runner.Wake(sessionID)
}

// React lets the runtime react to a session's log and waits for its
// reaction: after the session's events or its work changed (a work item
// stopped: its call may now need a worker, and its token's streams must
// end). A model call goes on after it returns.
func (s *Sessions) React(ctx context.Context, sessionID string) {
	s.streams.wake(sessionID)
	if err := s.runner.React(ctx, sessionID); err != nil && ctx.Err() == nil {
		s.app.log.ErrorContext(ctx, "the session's agent did not react", "session_id", sessionID, "err", err)
	}
}

// Resume lets the runtime react to every session that is not terminated,
// at startup: a turn cut short by a restart (a model call in flight, a work
// item stopped just before the crash) goes on from the session's log.
func (s *Sessions) Resume(ctx context.Context) error {
	q := storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 100}, Asc: true, Statuses: []string{api.SessionRescheduling, api.SessionRunning, api.SessionIdle}}
	for {
		list, err := s.app.store.ListSessions(ctx, q)
		if err != nil {
			return err
		}
		for _, sess := range list {
			if err := s.runner.React(ctx, sess.ID); err != nil {
				return fmt.Errorf("session %s: %w", sess.ID, err)
			}
		}
		if len(list) < q.Limit {
			return nil
		}
		q.After = list[len(list)-1].ID
	}
}

// maxSessionTitleChars bounds a session's title.
const maxSessionTitleChars = 1000

// Update checks and applies a patch to a session's title and metadata.
// A missing session is storage.ErrNotFound.
func (s *Sessions) Update(ctx context.Context, id string, req api.UpdateSessionRequest, by Caller) (api.Session, error) {
	if req.Title.Set && !req.Title.Null {
		if err := validate.Text("title", req.Title.Value, maxSessionTitleChars); err != nil {
			return api.Session{}, err
		}
	}
	sess, err := s.app.store.UpdateSession(ctx, id, func(x *api.Session) error {
		if req.Title.Set {
			if req.Title.Null {
				x.Title = nil
			} else {
				t := req.Title.Value
				x.Title = &t
			}
		}
		md, err := patchMetadata("metadata", x.Metadata, req.Metadata)
		x.Metadata = md
		x.UpdatedAt = s.app.now()
		return err
	})
	if err != nil {
		return sess, err
	}
	s.app.log.InfoContext(ctx, "session updated", "session_id", id, by.attr())
	return sess, nil
}

// Archive terminates a session (so its worker winds down, with its final
// sync), hides it from default listings, and abandons a model call in
// flight. Irreversible; archiving again changes nothing.
func (s *Sessions) Archive(ctx context.Context, id string, by Caller) (api.Session, error) {
	sess, err := s.app.store.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	if sess.Status != api.SessionTerminated {
		if _, err := s.app.store.AppendEvents(ctx, id, []api.Event{{Type: api.EventSessionStatusTerminated}}, nil); err != nil {
			return sess, err
		}
	}
	sess, err = s.app.store.UpdateSession(ctx, id, func(x *api.Session) error {
		if x.ArchivedAt == nil {
			now := s.app.now()
			x.ArchivedAt, x.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return sess, err
	}
	s.Ended(id)
	s.app.log.InfoContext(ctx, "session archived", "session_id", id, by.attr())
	return sess, nil
}

// Delete removes a session and its events; its work items stop, their
// sessions tokens stop working at once, and a model call in flight is
// abandoned. A missing session is storage.ErrNotFound.
func (s *Sessions) Delete(ctx context.Context, id string, by Caller) error {
	err := s.app.store.DeleteSession(ctx, id)
	s.app.Credentials.Revoked() // its tokens are revoked
	if err != nil {
		return err
	}
	s.Ended(id)
	s.app.log.InfoContext(ctx, "session deleted", "session_id", id, by.attr())
	return nil
}

// maxEventsPerSend bounds the events of one send.
const maxEventsPerSend = 50

// Send appends a client's events to a session's log — user messages, tool
// results, confirmations, interrupts — refused whole when the runtime's
// rules (agent.Check, run against the log they are appended to) refuse
// one. The runtime's immediate reaction is appended in the same
// transaction (agent.Runner.AppendClient), so it is in the log when Send
// returns. A message or an interrupt for a session no worker serves queues
// a work item, so a worker picks the session up again, and then the
// runtime reacts. A missing session is storage.ErrNotFound.
func (s *Sessions) Send(ctx context.Context, sessionID string, events []api.Event, by Caller) ([]api.Event, error) {
	if len(events) == 0 {
		return nil, api.Errorf(api.InvalidRequest, "events is required: send {\"events\":[{\"type\":\"user.message\",\"content\":[{\"type\":\"text\",\"text\":\"…\"}]}]}")
	}
	if len(events) > maxEventsPerSend {
		return nil, api.Errorf(api.InvalidRequest, "events has %d entries; send at most %d per request", len(events), maxEventsPerSend)
	}
	wake := false
	for i := range events {
		events[i].ID, events[i].ProcessedAt = "", nil
		if t := events[i].Type; t == api.EventUserMessage || t == api.EventUserInterrupt {
			wake = true
		}
	}
	res, err := s.runner.AppendClient(ctx, sessionID, events, func(v storage.SessionView) error { return agent.Check(v, events) }, wake)
	if err != nil {
		return nil, err
	}
	s.LogChanged(sessionID)
	queue := wake && !res.WorkLive
	if queue {
		now := s.app.now()
		work, queued, err := s.app.store.EnsureWork(ctx, sessionID, storage.Work{ID: ids.NewAt(ids.Work, now), CreatedAt: now})
		if err != nil {
			return nil, err
		}
		if queued {
			s.app.log.InfoContext(ctx, "work re-queued for session", "session_id", sessionID, "environment_id", work.EnvironmentID, "work_id", work.ID, by.attr())
			s.app.Work.Queued(work.EnvironmentID)
		}
	}
	if res.Waits && !queue {
		// Nothing to react to; a step of this server's Runner in flight
		// (a model call an interrupt cancels) still hears of the events.
		s.runner.WakeIfDriving(sessionID)
		return res.Stored, nil
	}
	s.React(ctx, sessionID)
	return res.Stored, nil
}
