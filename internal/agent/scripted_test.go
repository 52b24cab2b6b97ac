package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// harness runs the runtime against a real SQLite store, the way the server
// does: client events are appended with Check as their guard, then a Runner
// lets the session react.
type harness struct {
	t      testing.TB
	ctx    context.Context
	path   string
	db     *sqlite.DB
	runner *Runner
	env    storage.Environment
	sess   api.Session
	work   string
	claude ClaudeConfig
	// appended receives the session id after each append the runner makes.
	appended chan string

	clockMu sync.Mutex
	clock   time.Time
}

func newHarness(t testing.TB, model string) *harness {
	return newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}}, nil, ClaudeConfig{})
}

// newHarnessWith starts a session of agent with resources on a runner
// whose Claude runtime has cfg.
func newHarnessWith(t testing.TB, agent api.SessionAgent, resources []api.SessionResource, cfg ClaudeConfig) *harness {
	h := &harness{t: t, ctx: context.Background(), path: filepath.Join(t.TempDir(), "m.db"), clock: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		claude: cfg, appended: make(chan string, 1000)}
	h.open()
	now := h.now()
	h.env = storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := h.db.CreateEnvironment(h.ctx, h.env); err != nil {
		t.Fatal(err)
	}
	for i := range resources {
		st, err := h.db.CreateMemoryStore(h.ctx, storage.NewMemoryStore{Name: resources[i].Name})
		if err != nil {
			t.Fatal(err)
		}
		resources[i].MemoryStoreID, resources[i].ID = st.ID, ids.New(ids.Resource)
	}
	agent.ID = ids.New(ids.Agent)
	h.sess = api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: h.env.ID, Status: api.SessionIdle,
		Agent: agent, Resources: resources, CreatedAt: now, UpdatedAt: now}
	h.work = ids.New(ids.Work)
	if _, err := h.db.CreateSession(h.ctx, h.sess, storage.Work{ID: h.work, CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) open() {
	db, err := sqlite.Open(h.ctx, h.path, sqlite.Options{Now: h.now})
	if err != nil {
		h.t.Fatal(err)
	}
	h.db = db
	h.runner = NewRunner(db, ByModel{Scripted: Scripted{}, Model: NewClaude(h.claude)}, RunnerConfig{Log: slog.New(slog.DiscardHandler), Appended: func(id string) {
		select {
		case h.appended <- id:
		default:
		}
	}})
	runner := h.runner
	h.t.Cleanup(func() {
		runner.Close()
		db.Close()
	})
}

// restart is a server restart: a new Runner on a new handle of the file.
func (h *harness) restart() {
	h.runner.Close()
	h.db.Close()
	h.open()
}

func (h *harness) now() time.Time {
	h.clockMu.Lock()
	defer h.clockMu.Unlock()
	return h.clock
}

func (h *harness) send(events ...api.Event) error {
	h.clockMu.Lock()
	h.clock = h.clock.Add(time.Second)
	h.clockMu.Unlock()
	if len(events) > 0 {
		if _, err := h.db.AppendEvents(h.ctx, h.sess.ID, events, func(v storage.SessionView) error { return Check(v, events) }); err != nil {
			return err
		}
	}
	return h.runner.React(h.ctx, h.sess.ID)
}

func (h *harness) mustSend(events ...api.Event) {
	h.t.Helper()
	if err := h.send(events...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) log() []api.Event {
	h.t.Helper()
	all, err := h.db.ListEvents(h.ctx, h.sess.ID, storage.EventQuery{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]api.Event, len(all))
	for i, e := range all {
		out[i] = e.Event
	}
	return out
}

// types lists the event types after the first skip events.
func (h *harness) types(skip int) string {
	var ts []string
	for _, e := range h.log()[skip:] {
		t := e.Type
		if e.StopReason != nil {
			t += "(" + e.StopReason.Type + ")"
		}
		if e.Type == api.EventAgentToolUse {
			t += "(" + e.Name + ")"
		}
		ts = append(ts, t)
	}
	return strings.Join(ts, " ")
}

func (h *harness) status() string {
	s, err := h.db.GetSession(h.ctx, h.sess.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return s.Status
}

// lastToolUse is the newest agent.tool_use.
func (h *harness) lastToolUse() api.Event {
	log := h.log()
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Type == api.EventAgentToolUse {
			return log[i]
		}
	}
	h.t.Fatal("no agent.tool_use in the log")
	return api.Event{}
}

func (h *harness) answer(text string, isErr bool) {
	h.t.Helper()
	h.mustSend(api.UserToolResult(h.lastToolUse().ID, text, isErr))
}

func (h *harness) stopWork() {
	h.t.Helper()
	if _, err := h.db.StopWork(h.ctx, h.env.ID, h.work, true); err != nil {
		h.t.Fatal(err)
	}
	h.mustSend() // react: what the server does after a stop
}

const twoCalls = `{"tool_calls":[{"name":"write","input":{"file_path":"/mnt/memory/n/a.md","content":"hi"}},{"name":"read","input":{"file_path":"/mnt/memory/n/a.md"}}]}`

func TestScriptRunsOneCallAtATimeThenSummarizes(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(twoCalls))
	if got := h.types(0); got != "user.message session.status_running agent.tool_use(write)" {
		t.Fatalf("after the message: %s", got)
	}
	if h.status() != api.SessionRunning {
		t.Fatalf("status = %s, want running", h.status())
	}
	call := h.lastToolUse()
	if string(call.Input) != `{"file_path":"/mnt/memory/n/a.md","content":"hi"}` || call.EvaluatedPermission != "allow" {
		t.Fatalf("tool_use = %+v", call)
	}
	h.answer("wrote 2 bytes to /mnt/memory/n/a.md", false)
	if got := h.types(3); got != "user.tool_result agent.tool_use(read)" {
		t.Fatalf("after the first result: %s", got)
	}
	h.answer("hi", false)
	if got := h.types(5); got != "user.tool_result agent.message session.status_idle(end_turn)" {
		t.Fatalf("after the last result: %s", got)
	}
	msg := h.log()[6]
	want := "Script finished: 2 tool call(s), 0 failed.\n1. write (ok): wrote 2 bytes to /mnt/memory/n/a.md\n2. read (ok): hi"
	if msg.Text() != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", msg.Text(), want)
	}
	if h.status() != api.SessionIdle {
		t.Fatalf("status = %s, want idle", h.status())
	}
}

func TestScriptTerminateEndsTheSession(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"false"}}],"end":"terminate"}`))
	h.answer("exit code: 1", true)
	if got := h.types(3); got != "user.tool_result agent.message session.status_terminated" {
		t.Fatalf("end: %s", got)
	}
	if !strings.Contains(h.log()[4].Text(), "1 failed") || !strings.Contains(h.log()[4].Text(), "bash (error): exit code: 1") {
		t.Fatalf("summary = %q", h.log()[4].Text())
	}
	if h.status() != api.SessionTerminated {
		t.Fatalf("status = %s", h.status())
	}
	n := len(h.log())
	err := h.send(api.UserMessage(twoCalls))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, "terminated") {
		t.Fatalf("message to a terminated session: %v", err)
	}
	if len(h.log()) != n {
		t.Fatal("a refused event was stored")
	}
}

func TestBadScriptIsASessionErrorNotACrash(t *testing.T) {
	for name, text := range map[string]string{
		"not json":       "please write a note",
		"unknown field":  `{"tool_calls":[],"ending":"idle"}`,
		"unknown tool":   `{"tool_calls":[{"name":"web_fetch","input":{}}]}`,
		"input not obj":  `{"tool_calls":[{"name":"read","input":"x"}]}`,
		"bad end":        `{"tool_calls":[],"end":"sleep"}`,
		"trailing stuff": `{"tool_calls":[]} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, api.ScriptedModel)
			h.mustSend(api.UserMessage(text))
			if got := h.types(0); got != "user.message session.status_running session.error session.status_idle(end_turn)" {
				t.Fatalf("log: %s", got)
			}
			e := h.log()[2].Error
			if e == nil || e.Type != "unknown_error" || e.RetryStatus == nil || e.RetryStatus.Type != api.RetryExhausted || e.Message == "" {
				t.Fatalf("session.error = %+v", e)
			}
			// The session stays usable.
			h.mustSend(api.UserMessage(`{"tool_calls":[]}`))
			if got := h.types(4); got != "user.message session.status_running agent.message session.status_idle(end_turn)" {
				t.Fatalf("next turn: %s", got)
			}
		})
	}
}

// Without an upstream key a model-backed turn ends with a session.error
// naming the variables to set, and the session stays usable.
func TestAModelWithoutAKeyIsASessionErrorNamingTheVariable(t *testing.T) {
	h := newHarness(t, "claude-opus-4-1")
	h.mustSend(api.UserMessage("hello"))
	if got := h.types(0); got != "user.message session.status_running session.error session.status_idle(end_turn)" {
		t.Fatalf("log: %s", got)
	}
	e := h.log()[2].Error
	if !strings.Contains(e.Message, ModelKeyVar) || !strings.Contains(e.Message, FallbackModelKeyVar) || e.RetryStatus.Type != api.RetryExhausted {
		t.Fatalf("session.error = %+v", e)
	}
	if h.status() != api.SessionIdle {
		t.Fatalf("status = %s", h.status())
	}
}

func TestStoppedWorkLeavesRequiresActionAndAResultResumes(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(twoCalls))
	call := h.lastToolUse()
	h.stopWork()
	log := h.log()
	last := log[len(log)-1]
	if last.Type != api.EventSessionStatusIdle || last.StopReason.Type != api.StopRequiresAction || len(last.StopReason.EventIDs) != 1 || last.StopReason.EventIDs[0] != call.ID {
		t.Fatalf("after the stop: %s (%+v)", h.types(0), last.StopReason)
	}
	if h.status() != api.SessionIdle {
		t.Fatalf("status = %s", h.status())
	}
	h.mustSend() // settling again changes nothing
	if len(h.log()) != len(log) {
		t.Fatalf("a second reaction added events: %s", h.types(len(log)))
	}
	// A new worker (a re-queued item) answers the call it finds unanswered:
	// the turn resumes.
	if _, queued, err := h.db.EnsureWork(h.ctx, h.sess.ID, storage.Work{ID: ids.New(ids.Work)}); err != nil || !queued {
		t.Fatalf("EnsureWork = %v, %v", queued, err)
	}
	h.answer("wrote", false)
	if got := h.types(len(log)); got != "user.tool_result session.status_running agent.tool_use(read)" {
		t.Fatalf("after the late answer: %s", got)
	}
}

func TestInterruptAbortsTheTurn(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(twoCalls))
	call := h.lastToolUse()
	h.mustSend(api.UserInterrupt())
	if got := h.types(3); got != "user.interrupt session.status_idle(end_turn)" {
		t.Fatalf("after the interrupt: %s", got)
	}
	// A result that arrives late is accepted and ignored.
	h.mustSend(api.UserToolResult(call.ID, "late", false))
	if got := h.types(5); got != "user.tool_result" {
		t.Fatalf("after the late result: %s", got)
	}
	h.mustSend(api.UserMessage(`{"tool_calls":[{"name":"glob","input":{"pattern":"**"}}]}`))
	if got := h.types(6); got != "user.message session.status_running agent.tool_use(glob)" {
		t.Fatalf("next turn: %s", got)
	}
}

func TestInterruptClearsRequiresAction(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(twoCalls))
	h.stopWork()
	n := len(h.log())
	h.mustSend(api.UserInterrupt())
	if got := h.types(n); got != "user.interrupt session.status_idle(end_turn)" {
		t.Fatalf("after the interrupt: %s", got)
	}
}

func TestMessagesQueueBehindTheRunningTurn(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"echo 1"}}]}`))
	h.mustSend(api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"echo 2"}}]}`))
	if got := h.types(3); got != "user.message" {
		t.Fatalf("the second message did not wait: %s", got)
	}
	h.answer("1", false)
	got := h.types(4)
	want := "user.tool_result agent.message session.status_idle(end_turn) session.status_running agent.tool_use(bash)"
	if got != want {
		t.Fatalf("after the first turn:\n%s\nwant\n%s", got, want)
	}
	if in := string(h.lastToolUse().Input); in != `{"command":"echo 2"}` {
		t.Fatalf("second turn runs %s", in)
	}
}

func TestCheckRefusals(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	for _, c := range []struct {
		e    api.Event
		want string
	}{
		{api.Event{Type: api.EventUserMessage}, "needs content"},
		{api.UserToolResult("sevt_nope", "x", false), "names no agent.tool_use"},
		{api.Event{Type: api.EventUserToolResult}, "needs tool_use_id"},
		{api.Event{Type: "agent.message", Content: api.TextContent("x")}, "cannot be sent"},
		{api.Event{}, "type is required"},
	} {
		err := h.send(api.UserMessage(`{"tool_calls":[]}`), c.e)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, c.want) {
			t.Fatalf("%+v: err = %v, want %q", c.e, err, c.want)
		}
	}
	if n := len(h.log()); n != 0 {
		t.Fatalf("refused batches stored %d events", n)
	}
}

func TestRuntimeResumesFromTheLogAfterARestart(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	h.mustSend(api.UserMessage(twoCalls))
	call := h.lastToolUse()
	h.restart()
	h.mustSend(api.UserToolResult(call.ID, "ok", false))
	if got := h.types(3); got != "user.tool_result agent.tool_use(read)" {
		t.Fatalf("after the restart: %s", got)
	}
}

func TestParseScriptNormalizesInput(t *testing.T) {
	s, err := ParseScript(`{"tool_calls":[{"name":"glob"},{"name":"read","input":{ "file_path" : "/x" }}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.ToolCalls[0].Input) != "{}" || string(s.ToolCalls[1].Input) != `{"file_path":"/x"}` || s.End != api.ScriptEndIdle {
		t.Fatalf("script = %+v", s)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"end":"idle"`) {
		t.Fatalf("marshalled: %s", b)
	}
}

// Two runners on one database (two server processes) woken for the same
// session at once: the log gets each reaction once, because an append only
// lands if the log has not moved since its step was decided.
func TestTwoRunnersNeverDoubleAReaction(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	other, err := sqlite.Open(h.ctx, h.path, sqlite.Options{Now: h.now})
	if err != nil {
		t.Fatal(err)
	}
	second := NewRunner(other, ByModel{Scripted: Scripted{}, Model: NewClaude(ClaudeConfig{})}, RunnerConfig{Log: slog.New(slog.DiscardHandler), Appended: func(string) {}})
	t.Cleanup(func() {
		second.Close()
		other.Close()
	})
	msg := []api.Event{api.UserMessage(twoCalls)}
	if _, err := h.db.AppendEvents(h.ctx, h.sess.ID, msg, func(v storage.SessionView) error { return Check(v, msg) }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for _, r := range []*Runner{h.runner, second} {
		go func() { done <- r.React(h.ctx, h.sess.ID) }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := h.types(0); got != "user.message session.status_running agent.tool_use(write)" {
		t.Fatalf("log: %s", got)
	}
}

// A client's events and the runtime's reaction that follows them with
// nothing slow between are appended together and take no turn: the send
// answers with the reaction stored even while another holder has the
// session's turn. A refused send stores nothing.
func TestAClientAppendCarriesTheReactionWithoutTheTurn(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	release, ok, err := h.db.TryTurn(h.ctx, h.sess.ID)
	if err != nil || !ok {
		t.Fatalf("took the turn: %v, %v", ok, err)
	}
	defer release()
	msg := []api.Event{api.UserMessage(`{"tool_calls":[],"end":"idle"}`)}
	res, err := h.runner.AppendClient(h.ctx, h.sess.ID, msg, func(v storage.SessionView) error { return Check(v, msg) }, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "user.message session.status_running agent.message session.status_idle"
	if got := typesOf(h.log()); got != want {
		t.Fatalf("log %s, want %s", got, want)
	}
	if len(res.Stored) != 1 || res.Stored[0].Type != api.EventUserMessage || res.Stored[0].ID == "" || !res.WorkLive || !res.Waits {
		t.Fatalf("AppendClient returned %+v", res)
	}
	bad := []api.Event{{Type: api.EventUserToolResult, ToolUseID: "sevt_nope"}}
	if _, err := h.runner.AppendClient(h.ctx, h.sess.ID, bad, func(v storage.SessionView) error { return Check(v, bad) }, false); err == nil || !strings.Contains(err.Error(), "names no agent.tool_use") {
		t.Fatalf("a result for no call: %v, want its refusal", err)
	}
	if got := typesOf(h.log()); got != want {
		t.Fatalf("after a refused send the log is %s, want %s", got, want)
	}
}

// A send that needs a work item, to a session none serves, stores only
// the client's events, and says the session does not wait: the runtime
// has a step to take (its turn starts) once an item is queued. The step is
// decided on the log as stored, not taken from a round that never ran.
func TestAClientAppendWithoutLiveWorkDoesNotWait(t *testing.T) {
	h := newHarness(t, api.ScriptedModel)
	if _, err := h.db.StopWork(h.ctx, h.env.ID, h.work, true); err != nil {
		t.Fatal(err)
	}
	msg := []api.Event{api.UserMessage(`{"tool_calls":[],"end":"idle"}`)}
	res, err := h.runner.AppendClient(h.ctx, h.sess.ID, msg, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := typesOf(h.log()); got != "user.message" {
		t.Fatalf("log %s, want the client's message alone", got)
	}
	if res.WorkLive || res.Waits {
		t.Fatalf("AppendClient returned WorkLive %v, Waits %v; want neither", res.WorkLive, res.Waits)
	}
}
