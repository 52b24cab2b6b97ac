package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// controlPlane is the in-process state of the environments, work and
// sessions endpoints: the wake-ups of long polls and event streams, and who
// has been polling. Everything durable is in storage.
type controlPlane struct {
	// runner drives the sessions' agent runtimes.
	runner *agent.Runner
	// sessions wakes event streams when a session's log changes; queues
	// wakes long polls when an environment's queue gains an item.
	sessions notifier
	queues   notifier
	pollers  pollers
}

func newControlPlane() *controlPlane {
	return &controlPlane{
		sessions: notifier{chans: map[string]chan struct{}{}},
		queues:   notifier{chans: map[string]chan struct{}{}},
		pollers:  pollers{seen: map[string]map[string]time.Time{}},
	}
}

// notifier wakes goroutines waiting for a key to change, without polling:
// a waiter takes the key's channel before it reads the state, and a writer
// closes it after committing, so no change can slip between the read and
// the wait.
type notifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

// wait returns a channel closed at the next notify of key.
func (n *notifier) wait(key string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.chans[key]
	if !ok {
		ch = make(chan struct{})
		n.chans[key] = ch
	}
	return ch
}

// notify wakes every waiter of key.
func (n *notifier) notify(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch, ok := n.chans[key]; ok {
		close(ch)
		delete(n.chans, key)
	}
}

// notifyAll wakes every waiter of every key.
func (n *notifier) notifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, ch := range n.chans {
		close(ch)
		delete(n.chans, key)
	}
}

// wake delivers a change another server committed (storage.Waker); a wake
// without a topic means changes may have been missed, and wakes everyone.
// A session's log nudges this server's runner too: if it holds the
// session's turn, the change (an interrupt, say) is its to react to.
func (cp *controlPlane) wake(w storage.Wake) {
	switch w.Topic {
	case storage.TopicSession:
		cp.sessions.notify(w.Key)
		cp.runner.Nudge(w.Key)
	case storage.TopicQueue:
		cp.queues.notify(w.Key)
	default:
		cp.sessions.notifyAll()
		cp.queues.notifyAll()
	}
}

// pollers remembers when each worker (Anthropic-Worker-ID) last polled each
// environment, for workers_polling in the queue stats, when one server
// owns the database. It lives in memory: it only covers the last 30
// seconds, so a restart loses at most that much of it, and it spares the
// database a write per poll.
type pollers struct {
	mu   sync.Mutex
	seen map[string]map[string]time.Time // environment → worker → last poll
}

func (p *pollers) saw(env, worker string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.seen[env]
	if m == nil {
		m = map[string]time.Time{}
		p.seen[env] = m
	}
	m[worker] = now
}

// count returns how many workers polled env in the window before now,
// forgetting the older ones.
func (p *pollers) count(env string, now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for w, t := range p.seen[env] {
		if now.Sub(t) > api.WorkersPollingWindow {
			delete(p.seen[env], w)
			continue
		}
		n++
	}
	return n
}

// sawPoll notes a worker's poll: in the database when several servers
// share it (storage.PollLog), in memory otherwise.
func (s *Server) sawPoll(ctx context.Context, env, worker string) error {
	if worker == "" {
		return nil
	}
	if log, ok := s.store.(storage.PollLog); ok {
		return log.RecordPoll(ctx, env, worker, s.now())
	}
	s.cp.pollers.saw(env, worker, s.now())
	return nil
}

// workersPolling counts the workers that polled env in the last
// api.WorkersPollingWindow, wherever sawPoll noted them.
func (s *Server) workersPolling(ctx context.Context, env string) (int64, error) {
	if log, ok := s.store.(storage.PollLog); ok {
		return log.CountPollers(ctx, env, s.now().Add(-api.WorkersPollingWindow))
	}
	return s.cp.pollers.count(env, s.now()), nil
}

// settle lets the runtime react to a session's log and waits for its
// reaction: after the session's events or its work changed (a work item
// stopped: its call may now need a worker, and its token's streams must
// end). A model call goes on after it returns.
func (s *Server) settle(ctx context.Context, sessionID string) {
	s.cp.sessions.notify(sessionID)
	if err := s.cp.runner.Settle(ctx, sessionID); err != nil && ctx.Err() == nil {
		s.log.ErrorContext(ctx, "the session's agent did not settle", "session_id", sessionID, "err", err)
	}
}

// ---- credentials and scopes (SPEC §6) ----

func kindName(k storage.CredentialKind) string { return strings.ReplaceAll(string(k), "_", " ") }

// requireEnvironmentScope admits an API key, or an environment key of env.
func requireEnvironmentScope(p Principal, env string) error {
	switch {
	case p.Kind == storage.APIKey:
		return nil
	case p.Kind == storage.EnvironmentKey && p.EnvironmentID == env:
		return nil
	case p.Kind == storage.EnvironmentKey:
		return apiErrorf(permission, "this environment key belongs to environment %s, not %s; use that environment's key or an API key", p.EnvironmentID, env)
	default:
		return apiErrorf(permission, "a %s cannot call this endpoint; use the environment key of %s or an API key", kindName(p.Kind), env)
	}
}

// tokenWork returns the work item a sessions token was minted for, if the
// token still works: its item is not stopped and it is the item's current
// claim. (A deleted session revokes its tokens, so they never get here.)
func (s *Server) tokenWork(ctx context.Context, p Principal) (storage.Work, error) {
	w, err := s.store.GetWork(ctx, p.EnvironmentID, p.WorkID)
	if errors.Is(err, storage.ErrNotFound) {
		return w, apiErrorf(permission, "this sessions token's work item %s no longer exists; the token no longer grants access", p.WorkID)
	}
	if err != nil {
		return w, err
	}
	if w.State == api.WorkStopped {
		return w, apiErrorf(permission, "work item %s is stopped, so the sessions token minted for it no longer works; a new claim of the session brings a new token", w.ID)
	}
	if w.TokenID != p.ID {
		return w, apiErrorf(permission, "this sessions token belongs to an earlier claim of work item %s (its lease lapsed or it was reclaimed); it no longer works", w.ID)
	}
	return w, nil
}

// requireSessionScope admits an API key, an environment key of the
// session's environment, or a live sessions token of that session.
func (s *Server) requireSessionScope(ctx context.Context, p Principal, sess api.Session) error {
	switch p.Kind {
	case storage.APIKey:
		return nil
	case storage.EnvironmentKey:
		if p.EnvironmentID != sess.EnvironmentID {
			return apiErrorf(permission, "this environment key belongs to environment %s; session %s runs on %s", p.EnvironmentID, sess.ID, sess.EnvironmentID)
		}
		return nil
	case storage.SessionsToken:
		if p.SessionID != sess.ID {
			return apiErrorf(permission, "this sessions token reaches only its own session %s, not %s", p.SessionID, sess.ID)
		}
		_, err := s.tokenWork(ctx, p)
		return err
	}
	return apiErrorf(permission, "a %s cannot reach sessions", kindName(p.Kind))
}

// memoryStoreAccess decides whether p may use memory store storeID (write
// says whether the request changes it), for the memory-store endpoints:
// an API key may do everything; an environment key nothing; a sessions
// token only the stores attached to its session, writing only where the
// attachment is read_write, and only while its work item runs.
func (s *Server) memoryStoreAccess(ctx context.Context, p Principal, storeID string, write bool) error {
	switch p.Kind {
	case storage.APIKey:
		return nil
	case storage.EnvironmentKey:
		return apiErrorf(permission, "an environment key cannot reach memory stores; the worker uses the sessions token from the work secret, and operators an API key")
	case storage.SessionsToken:
	default:
		return apiErrorf(permission, "a %s cannot reach memory stores", kindName(p.Kind))
	}
	if _, err := s.tokenWork(ctx, p); err != nil {
		return err
	}
	sess, err := s.store.GetSession(ctx, p.SessionID)
	if errors.Is(err, storage.ErrNotFound) {
		return apiErrorf(permission, "this sessions token's session %s is deleted; the token no longer works", p.SessionID)
	}
	if err != nil {
		return err
	}
	for _, r := range sess.Resources {
		if r.Type != api.ResourceMemoryStore || r.MemoryStoreID != storeID {
			continue
		}
		if write && r.Access != api.AccessReadWrite {
			return apiErrorf(permission, "memory store %s is attached to session %s read_only; this sessions token may read it but not change it", storeID, sess.ID)
		}
		return nil
	}
	return apiErrorf(permission, "memory store %s is not attached to session %s; a sessions token reaches only its session's stores", storeID, sess.ID)
}

// ---- lists ----

// listLimitParam reads limit: absent is api.DefaultListLimit, otherwise 1
// to max. clamp lowers a larger value to max instead of refusing it (the
// event list, which the official worker reads 1,000 at a time).
func listLimitParam(q url.Values, max int, clamp bool) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return api.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, apiErrorf(invalidRequest, "limit must be a whole number from 1 to %d, got %q", max, v)
	}
	if n > max {
		if clamp {
			return max, nil
		}
		return 0, apiErrorf(invalidRequest, "limit must be a whole number from 1 to %d, got %d; page through with next_page", max, n)
	}
	return n, nil
}

// listing is the paging of a control-plane list, read from limit and page:
// the page shows up to limit items after position after ("" for the first
// page). Storage is asked for one row more, which tells whether a next
// page exists. Cursors name the list (kind), so that one list's cursor is
// refused by another.
type listing struct {
	kind  string
	limit int
	after string
}

// listParams reads limit (see listLimitParam) and page for a list of kind.
func listParams(q url.Values, kind string, max int, clamp bool) (listing, error) {
	l := listing{kind: kind}
	var err error
	if l.limit, err = listLimitParam(q, max, clamp); err != nil {
		return l, err
	}
	if v := q.Get("page"); v != "" {
		if l.after, err = storage.DecodeCursor(kind, v); err != nil {
			return l, badCursor()
		}
	}
	return l, nil
}

// query is the storage query for the page.
func (l listing) query(includeArchived bool) storage.ListQuery {
	return storage.ListQuery{After: l.after, Limit: l.limit + 1, IncludeArchived: includeArchived}
}

// cutPage turns the rows storage returned for l into the page: the first
// limit of them in their wire form, and a next_page at the last one shown
// when a row was left over. pos is a row's position for the cursor.
func cutPage[S, T any](l listing, rows []S, pos func(S) string, wire func(S) T) api.Page[T] {
	page := api.Page[T]{Data: make([]T, 0, min(len(rows), l.limit))}
	for i, x := range rows {
		if i == l.limit {
			next := storage.EncodeCursor(l.kind, pos(rows[i-1]))
			page.NextPage = &next
			break
		}
		page.Data = append(page.Data, wire(x))
	}
	return page
}

// orderParam reads order, asc or desc; absent is the list's default.
func orderParam(q url.Values, defaultAsc bool) (asc bool, err error) {
	switch v := q.Get("order"); v {
	case "":
		return defaultAsc, nil
	case "asc", "desc":
		return v == "asc", nil
	default:
		return false, apiErrorf(invalidRequest, "order must be asc or desc, got %q", v)
	}
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, apiErrorf(invalidRequest, "%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// arrayParam reads a repeated query parameter in either spelling: the
// official SDKs send name[]=a&name[]=b, curl users often name=a&name=b.
func arrayParam(q url.Values, name string) []string {
	return append(append([]string(nil), q[name+"[]"]...), q[name]...)
}

// ---- metadata ----

// patchMetadata merges a patch into stored metadata: a key mapped to null
// or "" is deleted, any other value set. The result is checked whole.
func patchMetadata(field string, stored map[string]string, patch map[string]*string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range stored {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil || *v == "" {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	if err := validate.Metadata(field, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Resume lets the runtime react to every session that is not terminated,
// at startup: a turn cut short by a restart (a model call in flight, a work
// item stopped just before the crash) goes on from the session's log.
func (s *Server) Resume(ctx context.Context) error {
	q := storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 100}, Asc: true, Statuses: []string{api.SessionRescheduling, api.SessionRunning, api.SessionIdle}}
	for {
		list, err := s.store.ListSessions(ctx, q)
		if err != nil {
			return err
		}
		for _, sess := range list {
			if err := s.cp.runner.Settle(ctx, sess.ID); err != nil {
				return fmt.Errorf("session %s: %w", sess.ID, err)
			}
		}
		if len(list) < q.Limit {
			return nil
		}
		q.After = list[len(list)-1].ID
	}
}
