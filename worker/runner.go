package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/toolset"
)

// Tool runner timing.
const (
	// eventPageSize is the history page the runner asks for. Servers that
	// allow less return less; memstore clamps rather than refuses.
	eventPageSize = api.MaxEventListLimit
	// Reconnects after a dropped stream back off from 0.5 s to 10 s, and
	// start over once a connection has stayed up for streamStable.
	reconnectBase = 500 * time.Millisecond
	reconnectMax  = 10 * time.Second
	streamStable  = 5 * time.Second
	// A tool result is posted with attempts of up to sendTimeout each, and
	// retried (1 s doubling to 30 s) for as long as the lease lasts: past
	// that, the session belongs to the queue again. A result posted while
	// the item winds down gets sendWhileStopping in all.
	sendTimeout       = 15 * time.Second
	sendRetryBase     = time.Second
	sendRetryMax      = 30 * time.Second
	sendWhileStopping = 10 * time.Second
)

// Why the runner ended on its own.
var (
	errSessionEnded = errors.New("the session ended")
	errIdle         = errors.New("the session stayed idle after its turn")
	errInterrupted  = errors.New("the user interrupted the session")
)

// tools runs one tool call; *toolset.Toolset is the real one.
type tools interface {
	Run(ctx context.Context, name string, input json.RawMessage) toolset.Result
}

// call is one agent.tool_use seen on the session.
type call struct {
	id    string
	name  string
	input json.RawMessage
	// answered: a user.tool_result for it exists (ours or anyone's).
	answered bool
	// ran: this runner started it. A call is run at most once, whatever
	// reconnects and history replays bring: its result, if the post
	// failed, is lost rather than produced twice.
	ran bool
	// dropped: an interrupt or a denied permission means it must not run.
	dropped bool
	// held: the call awaits a user.tool_confirmation.
	held bool
}

// runner serves one session's tool calls: it follows the session's events
// (a live stream, reconciled with the listed history after every
// connection, deduplicated by event id) and runs each unanswered
// agent.tool_use of the toolset once, in order, posting its result.
//
// Three goroutines: the reader feeds events into the state, the dispatcher
// runs calls one at a time, and run waits for the end. The state is shared
// under mu; wake tells the dispatcher that something changed.
type runner struct {
	c         *client.Client
	sessionID string
	tools     tools
	// afterCall runs after each call's result is posted, with the result
	// (which names the memory files the call wrote): it queues the memory
	// work the call calls for (or, in inline mode, runs the sync that is due
	// while no tool is touching the files).
	afterCall func(ctx context.Context, res toolset.Result)
	// sendWindow is how long a result post is retried: the lease TTL.
	sendWindow func() time.Duration
	maxIdle    time.Duration // <= 0: never end on idle
	clock      clock
	log        *slog.Logger
	faultPoint func(string) // Config.FaultPoint, or nil
	// toolCalled counts each call run (the worker's metrics), or is nil.
	toolCalled func(name string, isError bool)
	// tracer records a span per call (trace.go), or is nil.
	tracer trace.Tracer
	// inner is the context of the reader and the dispatcher, cancel ends
	// it, and readErr gets the reader's end (set by start).
	inner   context.Context
	cancel  context.CancelCauseFunc
	readErr chan error

	mu        sync.Mutex
	seen      map[string]bool  // event ids handled
	calls     []*call          // in log order
	byID      map[string]*call // agent.tool_use id → call
	running   *call
	cancelRun context.CancelCauseFunc
	// catchingUp: the history is being listed. No call starts until the
	// listing is done, because a later event of the history (a
	// user.interrupt, a result another worker posted) may answer the call.
	catchingUp bool
	idleGen    int         // bumped on every arm and disarm of the idle countdown
	stopIdle   func() bool // stops the idle countdown; nil when disarmed
	ended      error       // errSessionEnded or errIdle, once
	done       chan struct{}
	wake       chan struct{}
}

func newRunner(c *client.Client, sessionID string, sendWindow func() time.Duration, maxIdle time.Duration, clk clock, log *slog.Logger) *runner {
	return &runner{
		c: c, sessionID: sessionID, sendWindow: sendWindow, maxIdle: maxIdle, clock: clk, log: log,
		seen: map[string]bool{}, byID: map[string]*call{},
		done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
}

// start begins following the session's events, before its tools are
// ready: the stream is open and the history listed while the memory mounts,
// so the first call runs as soon as run is given the tools. Calls wait
// until then. A runner started is either run or stopped.
func (r *runner) start(ctx context.Context) {
	r.inner, r.cancel = context.WithCancelCause(ctx)
	r.readErr = make(chan error, 1)
	go func() { r.readErr <- r.read(r.inner) }()
}

// stop ends a runner that was started but will not be run.
func (r *runner) stop() {
	r.cancel(nil)
	<-r.readErr
	r.disarmIdle()
}

// run serves the session with t until it terminates or is deleted, stays
// idle for maxIdle after a turn, the event stream fails for good, or ctx
// ends. clean says the session ended on its own (terminated, deleted or
// idle), which is what earns the item its final memory sync. afterCall
// runs after each call's result is posted.
//
// When ctx ends (shutdown, a stop, a lost lease) the running call is
// cancelled and, unless the lease is lost, its error result is still posted,
// so the agent knows the call did not complete.
func (r *runner) run(ctx context.Context, t tools, afterCall func(context.Context, toolset.Result)) (clean bool, err error) {
	if r.readErr == nil {
		r.start(ctx)
	}
	r.tools, r.afterCall = t, afterCall
	inner, cancel, readErr := r.inner, r.cancel, r.readErr
	defer cancel(nil)
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		r.dispatch(inner)
	}()

	readDone := false
	select {
	case <-r.done:
	case err = <-readErr:
		readDone = true
		if err != nil {
			err = fmt.Errorf("following the session's events: %w", err)
		}
	case <-ctx.Done():
	}
	switch {
	case err != nil:
		cancel(err)
	case r.finished():
		cancel(r.endReason())
		clean = true
	default:
		cancel(context.Cause(ctx))
	}
	<-dispatched
	if !readDone {
		<-readErr
	}
	r.disarmIdle()
	return clean && ctx.Err() == nil, err
}

func (r *runner) endReason() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// read follows the event stream, reconnecting with backoff until ctx ends
// or the runner is done. Only a permanent refusal (a 4xx other than 408,
// 409 and 429) ends it with an error.
func (r *runner) read(ctx context.Context) error {
	failures := 0
	for {
		connected := r.clock.Now()
		err := r.follow(ctx)
		if ctx.Err() != nil || r.finished() {
			return nil
		}
		if permanent(err) {
			return err
		}
		if r.clock.Now().Sub(connected) > streamStable {
			failures = 0
		}
		failures++
		d := backoff(failures, reconnectBase, reconnectMax)
		if err != nil {
			r.log.Warn("session event stream failed; reconnecting", "retry_in", d, "err", err)
		} else {
			r.log.Debug("session event stream closed by the server; reconnecting", "retry_in", d)
		}
		if !sleep(ctx, r.clock, d) {
			return nil
		}
	}
}

// follow makes one connection: it opens the stream first and lists the
// history second, so that no event can fall between the two (duplicates
// are dropped by id), then reads the stream until it ends.
func (r *runner) follow(ctx context.Context) error {
	s, err := r.c.StreamEvents(ctx, r.sessionID, client.StreamEventsParams{})
	if err != nil {
		return err
	}
	defer s.Close()
	r.setCatchingUp(true)
	for e, err := range r.c.ListAllEvents(ctx, r.sessionID, api.EventListParams{Limit: eventPageSize, Order: "asc"}) {
		if err != nil {
			return fmt.Errorf("listing the session's history: %w", err)
		}
		if r.handle(e) {
			return nil
		}
	}
	r.setCatchingUp(false)
	for s.Next() {
		if r.handle(s.Event()) {
			return nil
		}
	}
	return s.Err()
}

// setCatchingUp holds calls back while the history is listed, and lets
// them run once it is: a listing cut short keeps them held until the next
// connection's listing completes.
func (r *runner) setCatchingUp(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.catchingUp = on
	r.signal()
}

func (r *runner) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// handle folds one event into the state and reports whether the runner is
// done (the session terminated or was deleted).
func (r *runner) handle(e api.Event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended != nil {
		return true
	}
	if e.ID != "" {
		if r.seen[e.ID] {
			return false
		}
		r.seen[e.ID] = true
	}
	switch e.Type {
	case api.EventAgentToolUse:
		if r.byID[e.ID] != nil {
			return false
		}
		c := &call{id: e.ID, name: e.Name, input: e.Input}
		switch {
		case !api.IsAgentTool(e.Name):
			// Another client may own it (a custom tool): leave it
			// unanswered, as the official worker does.
			r.log.Info("tool call is not one of this worker's tools; leaving it to another client", "tool", e.Name, "tool_use_id", e.ID)
			c.dropped = true
		case e.EvaluatedPermission == api.PermissionDeny:
			c.dropped = true
		case e.EvaluatedPermission != "" && e.EvaluatedPermission != api.PermissionAllow:
			c.held = true
		}
		r.calls = append(r.calls, c)
		r.byID[e.ID] = c
		r.disarmIdleLocked()
	case api.EventUserToolResult:
		// The log is in order, so a call is always seen before its result.
		if c := r.byID[e.ToolUseID]; c != nil {
			c.answered = true
		}
	case api.EventUserToolConfirmation:
		if c := r.byID[e.ToolUseID]; c != nil && c.held {
			c.held = false
			c.dropped = e.Result != api.PermissionAllow
		}
	case api.EventUserInterrupt:
		if thread, ok := e.Extra["session_thread_id"]; ok && string(thread) != "null" {
			// An interrupt of one thread of a multi-agent session; this
			// worker serves the session as a whole.
			break
		}
		// Every call made before the interrupt is abandoned: the one
		// running is cancelled, the others never start, and none gets a
		// result (the agent has moved on).
		for _, c := range r.calls {
			if !c.answered && !c.dropped {
				c.dropped = true
			}
		}
		if r.running != nil {
			r.cancelRun(errInterrupted)
		}
	case api.EventSessionStatusTerminated, api.EventSessionDeleted:
		r.endLocked(errSessionEnded)
		return true
	case api.EventSessionStatusIdle:
		if e.StopReason == nil || e.StopReason.Type != api.StopRequiresAction {
			r.armIdleLocked()
		}
	case api.EventUserMessage, api.EventSessionStatusRunning:
		r.disarmIdleLocked()
	}
	r.signal()
	return false
}

func (r *runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *runner) endLocked(reason error) {
	if r.ended == nil {
		r.ended = reason
		close(r.done)
		if r.running != nil {
			r.cancelRun(reason)
		}
	}
}

// armIdleLocked starts the idle countdown after a turn ended: if nothing
// happens for maxIdle, the runner ends and the item is released, so an idle
// session does not hold a worker forever. The next user.message queues a
// new work item.
func (r *runner) armIdleLocked() {
	if r.maxIdle <= 0 || r.stopIdle != nil {
		return
	}
	r.idleGen++
	gen := r.idleGen
	r.stopIdle = r.clock.AfterFunc(r.maxIdle, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.idleGen != gen {
			return
		}
		if r.running != nil || r.nextLocked() != nil {
			// A call is still winding down (an interrupted one being
			// killed) or about to run: count again from now.
			r.stopIdle = nil
			r.armIdleLocked()
			return
		}
		r.log.Info("session idle after its turn; releasing the work item", "max_idle", r.maxIdle)
		r.endLocked(errIdle)
	})
}

func (r *runner) disarmIdleLocked() {
	if r.stopIdle != nil {
		r.stopIdle()
		r.stopIdle = nil
		r.idleGen++
	}
}

func (r *runner) disarmIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disarmIdleLocked()
}

// nextLocked is the first call that should run now.
func (r *runner) nextLocked() *call {
	if r.catchingUp {
		return nil
	}
	for _, c := range r.calls {
		if !c.answered && !c.ran && !c.dropped && !c.held {
			return c
		}
	}
	return nil
}

// dispatch runs calls one at a time, in log order, until ctx ends.
func (r *runner) dispatch(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		c := r.nextLocked()
		var callCtx context.Context
		if c != nil {
			// The call's context is cut from ctx's cancellation so that its
			// cause is always one of ours, and the result can still be
			// posted after ctx ends.
			var cancel context.CancelCauseFunc
			callCtx, cancel = context.WithCancelCause(context.WithoutCancel(ctx))
			c.ran, r.running, r.cancelRun = true, c, cancel
		}
		r.mu.Unlock()
		if c == nil {
			select {
			case <-r.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		r.execute(ctx, callCtx, c)
	}
}

// execute runs one call and posts its result.
func (r *runner) execute(ctx, callCtx context.Context, c *call) {
	stopWatching := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.running == c {
			r.cancelRun(context.Cause(ctx))
		}
	})
	start := r.clock.Now()
	endSpan := r.callSpan(ctx, c)
	res := r.tools.Run(callCtx, c.name, c.input)
	endSpan(res)
	stopWatching()
	if r.toolCalled != nil {
		r.toolCalled(c.name, res.IsError)
	}
	r.mu.Lock()
	r.running = nil
	r.cancelRun(nil)
	answered := c.answered
	r.mu.Unlock()
	cause := context.Cause(callCtx)

	log := r.log.With("tool", c.name, "tool_use_id", c.id)
	log.Info("tool call done", "is_error", res.IsError, "duration", r.clock.Now().Sub(start).Round(time.Millisecond), "summary", summarize(res.Content))
	r.fault("tool.ran")
	switch {
	case answered:
		return
	case errors.Is(cause, errInterrupted):
		log.Info("tool call interrupted by the user; no result is posted")
		return
	case errors.Is(cause, errSessionEnded):
		return
	case errors.Is(cause, errLeaseLost):
		log.Warn("tool call cut short by the lost lease; its result is not posted, the session's next worker sees the call unanswered")
		return
	}
	r.post(ctx, c, res, log)
	r.fault("tool.posted")
	if ctx.Err() == nil {
		r.afterCall(ctx, res)
	}
}

func (r *runner) fault(point string) {
	if r.faultPoint != nil {
		r.faultPoint(point)
	}
}

// post sends the call's result, retrying transient failures for as long as
// the lease lasts (or briefly, when the item is winding down). A retry is
// skipped once the stream shows the result landed, so a lost response does
// not post it twice.
func (r *runner) post(ctx context.Context, c *call, res toolset.Result, log *slog.Logger) {
	text := res.Content
	if text == "" {
		// Anthropic's API refuses an empty text block in a tool result.
		text = "(no output)"
	}
	ev := api.UserToolResult(c.id, text, res.IsError)
	pctx, cancel := context.WithTimeout(ctx, r.sendWindow())
	if ctx.Err() != nil {
		pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), sendWhileStopping)
	}
	defer cancel()
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(pctx, sendTimeout)
		_, err := r.c.SendEvents(actx, r.sessionID, ev)
		acancel()
		r.mu.Lock()
		if err == nil {
			c.answered = true
		}
		answered := c.answered
		r.mu.Unlock()
		if answered {
			return
		}
		if permanent(err) || pctx.Err() != nil {
			log.Error("could not post the tool result; the session waits for it until a worker answers the call", "attempts", attempt, "err", err)
			return
		}
		d := backoff(attempt, sendRetryBase, sendRetryMax)
		log.Warn("posting the tool result failed; retrying", "retry_in", d, "err", err)
		waited := sleep(pctx, r.clock, d)
		// A failed post may have landed all the same (its answer was
		// lost): the stream then shows the result, and posting it again
		// would answer the call twice.
		if r.answered(c) {
			log.Info("the tool result had reached the server after all (the session's events show it); it is not posted again")
			return
		}
		if !waited {
			log.Error("could not post the tool result before the deadline; the session waits for it until a worker answers the call", "attempts", attempt, "err", err)
			return
		}
	}
}

// answered reports whether c has a result on the session, as far as the
// events followed so far show.
func (r *runner) answered(c *call) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return c.answered
}

// summarize is the first line of a result, shortened, and how many lines
// follow, for the log.
func summarize(s string) string {
	s = strings.TrimRight(s, "\n")
	line, rest, more := strings.Cut(s, "\n")
	if r := []rune(line); len(r) > 160 {
		line = string(r[:160]) + "…"
	}
	if more {
		if n := strings.Count(rest, "\n") + 1; n == 1 {
			line += " (+1 more line)"
		} else {
			line += fmt.Sprintf(" (+%d more lines)", n)
		}
	}
	return line
}
