package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Store is what the Runner needs of storage.
type Store interface {
	ViewSession(ctx context.Context, sessionID string) (storage.SessionView, error)
	AppendEvents(ctx context.Context, sessionID string, events []api.Event, guard storage.AppendGuard) ([]api.Event, error)
	AppendSteps(ctx context.Context, sessionID string, step storage.AppendStep) (storage.SessionView, error)
	storage.Turns
}

// ErrStale refuses an append whose step the log no longer calls for: the
// log moved on since the step was decided (a client event arrived, another
// runner got there first). The Runner decides again.
var ErrStale = errors.New("agent: the session's log moved on since this step was decided")

// Runner drives sessions: for each session it is woken for, one goroutine
// takes the session's turn (storage.Turns), asks the runtime for the next
// step and carries it out until the session waits, then gives the turn
// back. With several servers on one database every server's Runner may be
// woken for the same event; the one that takes the turn reacts, so a model
// call is made once. The others try again every TurnRetry while the turn is
// held (and the server runs Sweep now and then: that is how a turn whose
// server died is picked up). A step's
// events are appended only if the log, re-read inside the append's
// transaction, still calls for them: that, not the turn, is what keeps a
// reaction from being emitted twice when a turn changes hands mid-step.
type Runner struct {
	store     Store
	rt        Runtime
	log       *slog.Logger
	appended  func(sessionID string)
	turnRetry time.Duration

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*driven
	// quiet remembers, for Sweep, the idle candidates whose log called
	// for nothing, at the seq it was read at (a late tool result, an
	// interrupt of a finished turn): they are not read again until their
	// log moves.
	quiet map[string]int64
}

// driven is the state of one session's goroutine. Wakes are numbered: done
// is the latest wake whose consequences the goroutine has played out up to
// a wait (or the start of a step's Work), which is what React waits for.
type driven struct {
	id      string
	wake    chan struct{}
	wanted  uint64
	done    uint64
	waiters []waiter
}

type waiter struct {
	gen uint64
	ch  chan struct{}
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Log *slog.Logger
	// Appended is called after each append the Runner makes (the server
	// wakes the session's streams).
	Appended func(sessionID string)
	// TurnRetry is how often a session whose turn another holder has is
	// tried again (default DefaultTurnRetry).
	TurnRetry time.Duration
}

// DefaultTurnRetry is RunnerConfig.TurnRetry's default.
const DefaultTurnRetry = 2 * time.Second

// NewRunner returns a Runner of rt over store.
func NewRunner(store Store, rt Runtime, cfg RunnerConfig) *Runner {
	if cfg.TurnRetry <= 0 {
		cfg.TurnRetry = DefaultTurnRetry
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Runner{store: store, rt: rt, log: cfg.Log, appended: cfg.Appended, turnRetry: cfg.TurnRetry, ctx: ctx, stop: stop, sessions: map[string]*driven{}, quiet: map[string]int64{}}
}

// Wake tells the Runner that a session's log or work changed.
func (r *Runner) Wake(sessionID string) { r.wake(sessionID, false) }

// WakeIfDriving is Wake for a change another server made, or a send whose
// reaction is already stored with it (Sessions.Send): it wakes the session
// only if this Runner is driving it now (it may hold the turn, mid-step).
// Otherwise the server that made the change drives the session itself, so
// a change is not read again by every server sharing the database.
func (r *Runner) WakeIfDriving(sessionID string) {
	r.mu.Lock()
	_, driving := r.sessions[sessionID]
	r.mu.Unlock()
	if driving {
		r.wake(sessionID, false)
	}
}

// sweepPage is how many candidates Sweep reads at a time.
const sweepPage = 100

// Sweep wakes the Runner for every session whose log calls for a turn
// (storage.Turns.TurnCandidates): the turns of servers that died. A turn
// another server still holds is left to it and tried again while held
// (see Wake); one nobody holds is taken and carried on. That covers a
// server that died mid-turn and one that died between storing a client's
// event and reacting to it (an idle session whose user.message was never
// answered).
func (r *Runner) Sweep(ctx context.Context) error {
	seen := map[string]bool{}
	for after := ""; ; {
		list, err := r.store.TurnCandidates(ctx, after, sweepPage)
		if err != nil {
			return err
		}
		for _, c := range list {
			seen[c.SessionID] = true
			if c.Status != api.SessionIdle || r.callsForTurn(ctx, c) {
				r.Wake(c.SessionID)
			}
		}
		if len(list) < sweepPage {
			break
		}
		after = list[len(list)-1].SessionID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.quiet {
		if !seen[id] {
			delete(r.quiet, id)
		}
	}
	return nil
}

// callsForTurn says whether an idle candidate's log calls for a step, and
// remembers the ones whose log does not.
func (r *Runner) callsForTurn(ctx context.Context, c storage.TurnCandidate) bool {
	r.mu.Lock()
	seq, known := r.quiet[c.SessionID]
	r.mu.Unlock()
	if known && seq == c.Seq {
		return false
	}
	v, err := r.store.ViewSession(ctx, c.SessionID)
	if err != nil {
		return true // the turn reads it again, and says what failed
	}
	if step := r.rt.Next(v); len(step.Emit) > 0 || step.Work != nil {
		return true
	}
	r.mu.Lock()
	r.quiet[c.SessionID] = v.Seq
	r.mu.Unlock()
	return false
}

// React wakes a session and waits until the Runner has carried out every
// step the log calls for now that needs no Work, so that a caller (an HTTP
// handler, a test) sees the session's reaction; a model call goes on after
// it returns.
func (r *Runner) React(ctx context.Context, sessionID string) error {
	select {
	case <-r.wake(sessionID, true):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ClientAppend is what AppendClient did.
type ClientAppend struct {
	// Stored are the stored copies of the client's events.
	Stored []api.Event
	// WorkLive says a live work item served the session when they were
	// appended.
	WorkLive bool
	// Waits says the session's log, with the runtime's steps appended
	// after them, calls for nothing more now: nobody need react.
	Waits bool
}

// AppendClient appends a client's events (refused whole when guard
// refuses) and, in the same transaction, the runtime's steps that follow
// with nothing slow between them (session.status_running, an answer,
// session.status_idle): what a Runner woken for the events would append,
// in one transaction instead of several, so a sender sees the session's
// reaction without waiting for a turn. It needs no turn: a step is
// decided from the log as the append's transaction sees it, under the
// session's lock, so a Runner that reads the log afterwards finds those
// steps done. When the events need a work item (needWork) and no live
// item serves the session, only the client's events are appended: the
// caller queues the item and wakes the Runner, whose runtime then sees it.
func (r *Runner) AppendClient(ctx context.Context, sessionID string, events []api.Event, guard storage.AppendGuard, needWork bool) (ClientAppend, error) {
	var (
		from int
		live bool
		// last is the runtime's step for the log of length lastLen, the
		// last round's. When it emitted nothing, that log is the one
		// stored and Waits needs no second look (a step is decided from
		// the whole log: a long session's was a scan of it again).
		last    Step
		lastLen int
	)
	v, err := r.store.AppendSteps(ctx, sessionID, func(now storage.SessionView, round int) ([]api.Event, error) {
		if round == 0 {
			if guard != nil {
				if err := guard(now); err != nil {
					return nil, err
				}
			}
			from, live, lastLen = len(now.Log), now.WorkLive, -1
			return events, nil
		}
		if needWork && !live {
			return nil, nil
		}
		last, lastLen = r.rt.Next(now), len(now.Log)
		return last.Emit, nil
	})
	if err != nil {
		return ClientAppend{}, err
	}
	step := last
	if lastLen != len(v.Log) {
		step = r.rt.Next(v)
	}
	return ClientAppend{Stored: slices.Clone(v.Log[from : from+len(events)]), WorkLive: live, Waits: len(step.Emit) == 0 && step.Work == nil}, nil
}

// Close stops every session's goroutine, cancelling Work in flight, and
// waits for them. A session left mid-step resumes from its log when a
// Runner is next woken for it (the server's Resume at startup).
func (r *Runner) Close() {
	r.stop()
	r.wg.Wait()
}

func (r *Runner) wake(id string, wait bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ch chan struct{}
	if wait {
		ch = make(chan struct{})
	}
	if r.ctx.Err() != nil {
		if ch != nil {
			close(ch)
		}
		return ch
	}
	d := r.sessions[id]
	if d == nil {
		d = &driven{id: id, wake: make(chan struct{}, 1)}
		r.sessions[id] = d
		r.wg.Add(1)
		go r.drive(d)
	}
	d.wanted++
	if ch != nil {
		d.waiters = append(d.waiters, waiter{d.wanted, ch})
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return ch
}

// begin returns the wake the goroutine now answers: every wake so far.
func (r *Runner) begin(d *driven) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-d.wake:
	default:
	}
	return d.wanted
}

// reached records that wake gen has been played out.
func (r *Runner) reached(d *driven, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.done = max(d.done, gen)
	kept := d.waiters[:0]
	for _, w := range d.waiters {
		if w.gen <= d.done {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	d.waiters = kept
}

// retire ends the goroutine of a session that waits, unless a wake came
// that it has not played out. Forced (at Close), it ends it anyway.
func (r *Runner) retire(d *driven, force bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.wanted != d.done && !force {
		return false
	}
	delete(r.sessions, d.id)
	for _, w := range d.waiters {
		close(w.ch)
	}
	d.waiters = nil
	return true
}

func (r *Runner) drive(d *driven) {
	defer r.wg.Done()
	for {
		gen := r.begin(d)
		retry := r.turn(d, gen)
		r.reached(d, gen)
		if r.ctx.Err() != nil {
			r.retire(d, true)
			return
		}
		if !retry && r.retire(d, false) {
			return
		}
		var again <-chan time.Time
		if retry {
			again = time.After(r.turnRetry)
		}
		select {
		case <-d.wake:
		case <-again:
		case <-r.ctx.Done():
		}
	}
}

// turn takes the session's turn and advances the session. It reports
// whether to try again later: another holder has the turn (and may die
// before finishing it), or the turn could not be taken.
func (r *Runner) turn(d *driven, gen uint64) (retry bool) {
	release, ok, err := r.store.TryTurn(r.ctx, d.id)
	if err != nil {
		if r.ctx.Err() == nil {
			r.log.Error("the session's turn could not be taken; trying again", "session_id", d.id, "retry_in", r.turnRetry, "err", err)
		}
		return true
	}
	if !ok {
		return true
	}
	defer release()
	r.advance(d, gen)
	return false
}

// advance carries out the session's steps until it waits, fails, or the
// Runner closes. Steps that only emit are appended together
// (Store.AppendSteps), and the next step is decided from the view that
// append returns; the log is read again before Work (it is slow, so it
// starts from the latest log) and after a stale append.
func (r *Runner) advance(d *driven, gen uint64) {
	ctx := r.ctx
	lastWork := ""
	var v storage.SessionView
	fresh := false // v is the view the Runner's own append left
	for ctx.Err() == nil {
		if !fresh {
			var err error
			v, err = r.store.ViewSession(ctx, d.id)
			if errors.Is(err, storage.ErrNotFound) {
				return // deleted
			}
			if err != nil {
				r.failed(d.id, "the session's log could not be read", err)
				return
			}
		}
		step := r.rt.Next(v)
		if fresh && step.Work != nil && len(step.Emit) == 0 {
			fresh = false
			continue
		}
		fresh = false
		switch {
		case len(step.Emit) > 0:
			seq := v.Seq
			after, err := r.store.AppendSteps(ctx, d.id, func(now storage.SessionView, round int) ([]api.Event, error) {
				if round == 0 {
					if now.Seq != seq {
						return nil, ErrStale
					}
					return step.Emit, nil
				}
				return r.rt.Next(now).Emit, nil
			})
			if errors.Is(err, ErrStale) {
				continue
			}
			if errors.Is(err, storage.ErrNotFound) {
				return // deleted
			}
			if err != nil {
				r.failed(d.id, "the agent's events could not be stored", err)
				return
			}
			r.appended(d.id)
			v, fresh = after, true
		case step.Work != nil:
			if step.Key == lastWork {
				r.failed(d.id, "the agent's work ended without moving the session on", errors.New(step.Key))
				return
			}
			lastWork = step.Key
			if err := r.work(d, gen, step); err != nil {
				if ctx.Err() == nil {
					r.failed(d.id, "the agent's work failed", err)
				}
				return
			}
		default:
			return
		}
	}
}

// work runs a step's Work while watching the session: a wake whose log no
// longer calls for the step (an interrupt, a deletion) cancels it.
func (r *Runner) work(d *driven, gen uint64, step Step) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	emit := func(events ...api.Event) error {
		_, err := r.store.AppendEvents(r.ctx, d.id, events, func(now storage.SessionView) error {
			if r.rt.Next(now).Key != step.Key {
				return ErrStale
			}
			return nil
		})
		if err == nil {
			r.appended(d.id)
		}
		return err
	}
	done := make(chan error, 1)
	go func() { done <- step.Work(ctx, emit) }()
	r.reached(d, gen)
	for {
		select {
		case err := <-done:
			if errors.Is(err, ErrStale) || ctx.Err() != nil {
				return nil // the log moved on: decide again
			}
			return err
		case <-d.wake:
			g := r.begin(d)
			v, err := r.store.ViewSession(r.ctx, d.id)
			if err != nil || r.rt.Next(v).Key != step.Key {
				cancel()
			}
			r.reached(d, g)
		}
	}
}

// failed logs a session the Runner had to leave: it is picked up again on
// its next event, or when the server next starts.
func (r *Runner) failed(sessionID, what string, err error) {
	r.log.Error(what+"; the session waits until its next event or the server's next start", "session_id", sessionID, "err", err)
}
