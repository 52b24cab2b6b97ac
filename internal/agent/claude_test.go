package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

const model = "claude-sonnet-4-5"

// toolsetWith is an agent's tools: the whole toolset, with overrides such
// as {"name":"bash","enabled":false}.
func toolsetWith(configs ...string) []json.RawMessage {
	return []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401","configs":[` + strings.Join(configs, ",") + `]}`)}
}

func modelHarness(t *testing.T, u *modeltest.Upstream, tools []json.RawMessage, resources ...api.SessionResource) *harness {
	return newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, System: "You keep notes.", Tools: tools}, resources, claudeConfig(u))
}

func strp(s string) *string { return &s }

// One turn with two parallel tool calls: the request carries the memory
// section, the toolset's schemas and cache breakpoints; both calls go out
// before the next request, which carries both results after their uses;
// the session's usage adds up both requests.
func TestModelTurnCallsToolsAndEndsTheTurn(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith(`{"name":"bash","enabled":false}`),
		api.SessionResource{Type: api.ResourceMemoryStore, MemoryStoreID: "memstore_1", Name: "Project notes", Description: "what we decided", MountPath: "/mnt/memory/project-notes", Access: api.AccessReadWrite, Instructions: strp("one file per decision")},
		api.SessionResource{Type: api.ResourceMemoryStore, MemoryStoreID: "memstore_2", Name: "Handbook", MountPath: "/mnt/memory/handbook", Access: api.AccessReadOnly})
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(100, 20, 0, 90),
		modeltest.Text("Let me look."),
		modeltest.ToolUse("toolu_a", "read", `{"file_path":"/mnt/memory/handbook/style.md"}`),
		modeltest.ToolUse("toolu_b", "write", `{"file_path":"/mnt/memory/project-notes/x.md","content":"hi"}`))
	h.mustSend(api.UserMessage("hello"))
	log := h.waitFor("the tool calls", func(log []api.Event) bool { return strings.Count(typesOf(log), "agent.tool_use") == 2 })
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.message agent.tool_use agent.tool_use span.model_request_end" {
		t.Fatalf("log: %s", got)
	}

	req := u.Request(0)
	// The SDK sends the key as a bearer token.
	if req.Header.Get("Authorization") != "Bearer sk-upstream-test" || string(req.Params.Model) != model || req.Params.MaxTokens != 8192 || req.Raw["stream"] != true {
		t.Fatalf("request: authorization %q model %q max_tokens %d stream %v", req.Header.Get("Authorization"), req.Params.Model, req.Params.MaxTokens, req.Raw["stream"])
	}
	sys := req.Params.System
	if len(sys) != 2 || sys[0].Text != "You keep notes." {
		t.Fatalf("system = %+v", sys)
	}
	for _, want := range []string{"Project notes, mounted at /mnt/memory/project-notes (read and write)", "Description: what we decided", "Instructions: one file per decision",
		"Handbook, mounted at /mnt/memory/handbook (read only)", "working directory"} {
		if !strings.Contains(sys[1].Text, want) {
			t.Errorf("the memory section lacks %q:\n%s", want, sys[1].Text)
		}
	}
	// The tools are the toolset's, with its schemas, bash left out.
	tools, _ := req.Raw["tools"].([]any)
	var names []string
	defs := map[string]api.ToolDefinition{}
	for _, d := range api.AgentTools() {
		defs[d.Name] = d
	}
	for _, x := range tools {
		tool := x.(map[string]any)
		name := tool["name"].(string)
		names = append(names, name)
		schema, _ := json.Marshal(tool["input_schema"])
		want, _ := json.Marshal(defs[name].InputSchema)
		if string(schema) != string(want) {
			t.Errorf("%s: input_schema %s\nwant %s", name, schema, want)
		}
	}
	if want := []string{"read", "write", "edit", "glob", "grep"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	assertBreakpoints(t, req.Raw)

	// Both calls are out; the results come back in the other order.
	uses := eventsOf(log, api.EventAgentToolUse)
	if uses[0].Name != "read" || uses[1].Name != "write" || uses[0].EvaluatedPermission != "allow" || string(uses[1].Input) != `{"file_path":"/mnt/memory/project-notes/x.md","content":"hi"}` {
		t.Fatalf("tool uses %+v", uses)
	}
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(150, 10, 90, 0), modeltest.Text("Done."))
	h.mustSend(api.UserToolResult(uses[1].ID, "wrote 2 bytes", false))
	if u.Count() != 1 {
		t.Fatal("a request went out before every call had its result")
	}
	h.mustSend(api.UserToolResult(uses[0].ID, "no such file", true))
	log = h.idleAgain(len(log))
	if got := typesOf(log[len(log)-6:]); got != "user.tool_result user.tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", typesOf(log))
	}
	msgs := u.Request(1).Raw["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3 (user, assistant, user)", len(msgs))
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	first := results[0].(map[string]any)
	second := results[1].(map[string]any)
	if first["tool_use_id"] != uses[0].ID || first["is_error"] != true || second["tool_use_id"] != uses[1].ID {
		t.Fatalf("tool results out of order or unmarked: %v", results)
	}
	assistant := msgs[1].(map[string]any)["content"].([]any)
	if assistant[1].(map[string]any)["id"] != uses[0].ID || assistant[2].(map[string]any)["id"] != uses[1].ID {
		t.Fatalf("tool uses in the transcript: %v", assistant)
	}
	sess, _ := h.db.GetSession(h.ctx, h.sess.ID)
	if sess.Status != api.SessionIdle || sess.Usage.InputTokens != 250 || sess.Usage.OutputTokens != 30 || sess.Usage.CacheReadInputTokens != 90 || sess.Usage.CacheCreation.Ephemeral5mInputTokens != 90 {
		t.Fatalf("session %s, usage %+v", sess.Status, sess.Usage)
	}
	end := eventsOf(log, api.EventSpanModelRequestEnd)[0]
	if end.ModelRequestStartID != eventsOf(log, api.EventSpanModelRequestStart)[0].ID || *end.IsError || end.ModelUsage.InputTokens != 100 {
		t.Fatalf("span end %+v", end)
	}
}

// assertBreakpoints checks the cache breakpoints: the last system block,
// the last tool and the last block of the last message.
func assertBreakpoints(t *testing.T, raw map[string]any) {
	t.Helper()
	last := func(v any) map[string]any { l := v.([]any); return l[len(l)-1].(map[string]any) }
	msgs := raw["messages"].([]any)
	for what, block := range map[string]map[string]any{
		"system": last(raw["system"]), "tools": last(raw["tools"]), "messages": last(last(msgs)["content"]),
	} {
		if cc, _ := block["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
			t.Errorf("no cache breakpoint at the end of %s: %v", what, block)
		}
	}
}

func typesOf(log []api.Event) string {
	var ts []string
	for _, e := range log {
		ts = append(ts, e.Type)
	}
	return strings.Join(ts, " ")
}

func eventsOf(log []api.Event, typ string) []api.Event {
	var out []api.Event
	for _, e := range log {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// A 429 with retry-after is retried after the time it asked for, shown as
// a session.error with retry_status retrying; the turn then goes on.
func TestRateLimitIsRetriedHonouringRetryAfter(t *testing.T) {
	u := modeltest.New(t)
	cfg := claudeConfig(u)
	var waits []time.Duration
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, Tools: toolsetWith()}, nil, cfg)
	u.Fail(429, "rate_limit_error", "slow down", "retry-after", "7")
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 2, 0, 0), modeltest.Text("hi"))
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start session.error agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	e := eventsOf(log, api.EventSessionError)[0].Error
	if e.Type != "model_rate_limited_error" || e.RetryStatus.Type != api.RetryRetrying || !strings.Contains(e.Message, "429") {
		t.Fatalf("session.error %+v", e)
	}
	if len(waits) != 1 || waits[0] != 7*time.Second || u.Count() != 2 {
		t.Fatalf("waits %v, requests %d", waits, u.Count())
	}
}

// A stream that fails part way — an error event after the 200, or a
// connection cut mid-body — is retried like a failed request, and nothing
// of the partial reply is recorded: the tool use streamed before the
// failure goes out once, from the complete reply.
func TestBrokenStreamsAreRetried(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	glob := modeltest.ToolUse("toolu_1", "glob", `{"pattern":"*.md"}`)
	u.FailMidStream("overloaded_error", "Overloaded", modeltest.Text("Looking"), glob)
	u.CutMidStream(modeltest.Text("Looking"))
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(5, 5, 0, 0), modeltest.Text("Looking"), glob)
	h.mustSend(api.UserMessage("find notes"))
	log := h.waitFor("the tool use", func(log []api.Event) bool { return len(eventsOf(log, api.EventSpanModelRequestEnd)) == 1 })
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start session.error session.error agent.message agent.tool_use span.model_request_end" {
		t.Fatalf("log: %s", got)
	}
	errs := eventsOf(log, api.EventSessionError)
	if errs[0].Error.Type != "model_overloaded_error" || !strings.Contains(errs[0].Error.Message, "Overloaded") ||
		errs[1].Error.Type != "model_request_failed_error" || errs[1].Error.RetryStatus.Type != api.RetryRetrying {
		t.Fatalf("errors: %+v %+v", errs[0].Error, errs[1].Error)
	}
	if use := eventsOf(log, api.EventAgentToolUse)[0]; string(use.Input) != `{"pattern":"*.md"}` || u.Count() != 3 {
		t.Fatalf("tool use %+v after %d requests", use, u.Count())
	}
}

// An error event that no retry cures (an invalid request) ends the turn
// at once, saying what the API said.
func TestStreamErrorThatCannotPassIsNotRetried(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	u.FailMidStream("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	e := eventsOf(log, api.EventSessionError)
	if len(e) != 1 || e[0].Error.RetryStatus.Type != api.RetryExhausted || !strings.Contains(e[0].Error.Message, "start a new session") || u.Count() != 1 {
		t.Fatalf("errors %+v after %d requests", e, u.Count())
	}
}

// An upstream that stays overloaded: every attempt is a retrying
// session.error until the last, which is exhausted; the span ends failed,
// the session goes idle, and a next message starts afresh.
func TestOverloadRetriesUntilExhausted(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	for range 3 {
		u.Fail(529, "overloaded_error", "Overloaded")
	}
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start session.error session.error session.error span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	errs := eventsOf(log, api.EventSessionError)
	if errs[0].Error.RetryStatus.Type != api.RetryRetrying || errs[1].Error.RetryStatus.Type != api.RetryRetrying || errs[2].Error.RetryStatus.Type != api.RetryExhausted ||
		errs[2].Error.Type != "model_overloaded_error" || !strings.Contains(errs[2].Error.Message, "gave up after 3 attempts") {
		t.Fatalf("errors: %+v %+v %+v", errs[0].Error, errs[1].Error, errs[2].Error)
	}
	if end := eventsOf(log, api.EventSpanModelRequestEnd)[0]; !*end.IsError || u.Count() != 3 {
		t.Fatalf("span end %+v, %d requests", end, u.Count())
	}
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("back"))
	h.mustSend(api.UserMessage("again"))
	if log := h.idleAgain(len(log)); eventsOf(log, api.EventAgentMessage)[0].Text() != "back" {
		t.Fatalf("the next turn: %s", typesOf(log))
	}
}

// A 4xx is not retried: the session.error says what to fix.
func TestBadModelIDIsExplainedNotRetried(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	u.Fail(404, "not_found_error", "model: claude-sonnet-4-5")
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	e := eventsOf(log, api.EventSessionError)
	if len(e) != 1 || e[0].Error.RetryStatus.Type != api.RetryExhausted || !strings.Contains(e[0].Error.Message, `does not know model "claude-sonnet-4-5"`) || u.Count() != 1 {
		t.Fatalf("errors %+v after %d requests; log %s", e, u.Count(), typesOf(log))
	}
}

// An interrupt while the upstream is still thinking cancels the request:
// the span ends failed, the turn ends, and nothing of the abandoned reply
// is ever recorded.
func TestInterruptCancelsASlowModelCall(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	cancelled := make(chan struct{})
	u.Hang(cancelled)
	h.mustSend(api.UserMessage("think hard"))
	<-u.Arrived
	h.mustSend(api.UserInterrupt())
	<-cancelled // the upstream saw the request go away
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start user.interrupt span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	if end := eventsOf(log, api.EventSpanModelRequestEnd)[0]; !*end.IsError {
		t.Fatalf("span end %+v", end)
	}
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("ok"))
	h.mustSend(api.UserMessage("never mind"))
	h.idleAgain(len(log))
	// The next request holds both user messages as one user turn.
	msgs := u.Request(1).Raw["messages"].([]any)
	if len(msgs) != 1 || len(msgs[0].(map[string]any)["content"].([]any)) != 2 {
		t.Fatalf("messages after the interrupt: %v", msgs)
	}
}

// always_ask: the call goes out with evaluated_permission "ask" and the
// session waits at requires_action; an allow lets the worker run it, a deny
// answers the model with the user's message and runs nothing.
func TestAlwaysAskWaitsForConfirmation(t *testing.T) {
	for _, verdict := range []string{api.PermissionAllow, api.PermissionDeny} {
		t.Run(verdict, func(t *testing.T) {
			u := modeltest.New(t)
			h := modelHarness(t, u, toolsetWith(`{"name":"write","permission_policy":{"type":"always_ask"}}`))
			u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_w", "write", `{"file_path":"/tmp/x","content":"x"}`))
			h.mustSend(api.UserMessage("write it"))
			log := h.idleAgain(0)
			use := eventsOf(log, api.EventAgentToolUse)[0]
			last := log[len(log)-1]
			if use.EvaluatedPermission != api.PermissionAsk || last.StopReason.Type != api.StopRequiresAction || !slices.Equal(last.StopReason.EventIDs, []string{use.ID}) {
				t.Fatalf("tool use %+v, then %s %+v", use, last.Type, last.StopReason)
			}
			u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("ok"))
			confirm := api.Event{Type: api.EventUserToolConfirmation, ToolUseID: use.ID, Result: verdict}
			if verdict == api.PermissionDeny {
				confirm.DenyMessage = strp("not there")
			}
			h.mustSend(confirm)
			if verdict == api.PermissionAllow {
				if got := typesOf(h.log()[len(log):]); got != "user.tool_confirmation session.status_running" {
					t.Fatalf("after the allow: %s", got)
				}
				h.mustSend(api.UserToolResult(use.ID, "wrote 1 bytes", false))
			}
			h.idleAgain(len(log) + 1)
			result := u.Request(1).Raw["messages"].([]any)[2].(map[string]any)["content"].([]any)[0].(map[string]any)
			body, _ := json.Marshal(result)
			want := "wrote 1 bytes"
			if verdict == api.PermissionDeny {
				want = "The user denied this tool call. Their message: not there"
			}
			if result["tool_use_id"] != use.ID || !strings.Contains(string(body), want) {
				t.Fatalf("the model got %s, want %q", body, want)
			}
			// A second verdict, or a result for a denied call, is refused.
			err := h.send(api.Event{Type: api.EventUserToolConfirmation, ToolUseID: use.ID, Result: api.PermissionAllow})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Type != api.InvalidRequest {
				t.Fatalf("second confirmation: %v", err)
			}
		})
	}
}

// A restart between a tool use and its result: the new runner answers the
// result with exactly one next request, and no call is emitted twice.
func TestRestartBetweenToolUseAndResult(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_1", "glob", `{"pattern":"**"}`))
	h.mustSend(api.UserMessage("look"))
	log := h.waitFor("the tool use", func(log []api.Event) bool { return len(eventsOf(log, api.EventSpanModelRequestEnd)) == 1 })
	h.restart()
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("found"))
	h.mustSend(api.UserToolResult(eventsOf(log, api.EventAgentToolUse)[0].ID, "/a.md", false))
	log = h.idleAgain(len(log))
	if n := len(eventsOf(log, api.EventAgentToolUse)); n != 1 || u.Count() != 2 {
		t.Fatalf("%d tool uses, %d requests; log %s", n, u.Count(), typesOf(log))
	}
}

// A restart in the middle of a model request: the request is made again
// by the next runner and its reply recorded once.
func TestRestartDuringAModelCallResumesTheTurn(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith())
	cancelled := make(chan struct{})
	u.Hang(cancelled)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_1", "glob", `{"pattern":"**"}`))
	h.mustSend(api.UserMessage("look"))
	<-u.Arrived
	h.restart() // the server stops: its call is abandoned
	<-cancelled
	if err := h.runner.React(h.ctx, h.sess.ID); err != nil { // the next server's Resume
		t.Fatal(err)
	}
	log := h.waitFor("the tool use", func(log []api.Event) bool { return len(eventsOf(log, api.EventAgentToolUse)) > 0 })
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end" || u.Count() != 2 {
		t.Fatalf("log %s after %d requests", got, u.Count())
	}
}

// A reply cut off at max_tokens is continued: its text is kept, its
// half-written tool use is never sent to the worker, and the next request
// asks the model to go on after it. A call to a tool the agent does not
// have is recorded as denied and answered for the model, which goes on.
func TestMaxTokensContinuesAndDisabledTools(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, toolsetWith(`{"name":"bash","enabled":false}`))
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_b", "bash", `{"command":"ls"}`))
	u.Reply(anthropic.StopReasonMaxTokens, modeltest.Usage(1, 8192, 0, 0), modeltest.Thinking("half a thou", ""), modeltest.Text("Here is a long"), modeltest.ToolUse("toolu_w", "write", `{"file_path":"/tmp/x"`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 2, 0, 0), modeltest.Text(" story."))
	h.mustSend(api.UserMessage("go"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end span.model_request_start agent.message span.model_request_end session.error span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	if use := eventsOf(log, api.EventAgentToolUse)[0]; use.EvaluatedPermission != api.PermissionDeny {
		t.Fatalf("the disabled tool's call: %+v", use)
	}
	if e := eventsOf(log, api.EventSessionError)[0].Error; !strings.Contains(e.Message, "max_tokens (8192)") || !strings.Contains(e.Message, "continuation 1 of 3") || e.RetryStatus.Type != api.RetryRetrying {
		t.Fatalf("session.error %+v", e)
	}
	result, _ := json.Marshal(u.Request(1).Raw["messages"].([]any)[2])
	if !strings.Contains(string(result), "bash is not enabled for this agent") {
		t.Fatalf("the model was told %s", result)
	}
	msgs := u.Request(2).Raw["messages"].([]any)
	tail, _ := json.Marshal(msgs[len(msgs)-2:])
	if len(msgs) != 5 || !strings.Contains(string(tail), `[{"content":[{"text":"Here is a long","type":"text"}],"role":"assistant"},{"content":[{"cache_control":{"type":"ephemeral"},"text":"Your reply was cut off at the max_tokens limit.`) {
		t.Fatalf("the continuation request ends with %s", tail)
	}
}

// Continuations are bounded: the last reply cut off ends the turn with an
// error that says what happened and what to do.
func TestMaxTokensStopsAfterTheLastContinuation(t *testing.T) {
	u := modeltest.New(t)
	cfg := claudeConfig(u)
	cfg.MaxContinuations = 1
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, Tools: toolsetWith()}, nil, cfg)
	u.Reply(anthropic.StopReasonMaxTokens, modeltest.Usage(1, 8192, 0, 0), modeltest.Text("Chapter one"))
	u.Reply(anthropic.StopReasonMaxTokens, modeltest.Usage(1, 8192, 0, 0), modeltest.Text("Chapter two"))
	h.mustSend(api.UserMessage("write a book"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.message span.model_request_end session.error span.model_request_start agent.message span.model_request_end session.error session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	e := eventsOf(log, api.EventSessionError)[1].Error
	if e.RetryStatus.Type != api.RetryExhausted || !strings.Contains(e.Message, "1 continuations did not finish it") || !strings.Contains(e.Message, "asking for less in one step") || u.Count() != 2 {
		t.Fatalf("session.error %+v after %d requests", e, u.Count())
	}
	// The next message starts a turn with continuations of its own.
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("ok"))
	h.mustSend(api.UserMessage("just the title"))
	if log := h.idleAgain(len(log)); len(eventsOf(log, api.EventSessionError)) != 2 {
		t.Fatalf("log: %s", typesOf(log))
	}
}

// Thinking blocks become agent.thinking events that keep the block (the
// signature, redacted data opaque), and go back to the model, unchanged and
// first in their reply, in the request after the tool results.
func TestThinkingIsRecordedAndSentBack(t *testing.T) {
	u := modeltest.New(t)
	cfg := claudeConfig(u)
	cfg.ThinkingBudget = 2048
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, Tools: toolsetWith()}, nil, cfg)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 50, 0, 0),
		modeltest.Thinking("The notes are probably under /mnt.", "sig-1"),
		modeltest.RedactedThinking("opaque-bytes"),
		modeltest.ToolUse("toolu_1", "glob", `{"pattern":"**"}`))
	h.mustSend(api.UserMessage("find notes"))
	log := h.waitFor("the tool use", func(log []api.Event) bool { return len(eventsOf(log, api.EventAgentToolUse)) == 1 })
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.thinking agent.thinking agent.tool_use span.model_request_end" {
		t.Fatalf("log: %s", got)
	}
	if th, _ := u.Request(0).Raw["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != 2048.0 {
		t.Fatalf("thinking param %v", u.Request(0).Raw["thinking"])
	}
	thoughts := eventsOf(log, api.EventAgentThinking)
	for i, want := range []string{`[{"signature":"sig-1","thinking":"The notes are probably under /mnt.","type":"thinking"}]`, `[{"data":"opaque-bytes","type":"redacted_thinking"}]`} {
		if got, _ := json.Marshal(thoughts[i].Content); string(got) != want {
			t.Fatalf("agent.thinking %d content %s, want %s", i, got, want)
		}
	}
	// The official SDK reads it as its agent.thinking event.
	raw, _ := json.Marshal(thoughts[0])
	var sdk anthropic.BetaManagedAgentsSessionEventUnion
	if err := json.Unmarshal(raw, &sdk); err != nil || sdk.AsAgentThinking().ID != thoughts[0].ID || sdk.AsAgentThinking().ProcessedAt.IsZero() {
		t.Fatalf("the SDK reads %s as %+v (%v)", raw, sdk.AsAgentThinking(), err)
	}
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("none"))
	h.mustSend(api.UserToolResult(eventsOf(log, api.EventAgentToolUse)[0].ID, "", false))
	h.idleAgain(len(log))
	assistant, _ := json.Marshal(u.Request(1).Raw["messages"].([]any)[1])
	want := `{"content":[{"signature":"sig-1","thinking":"The notes are probably under /mnt.","type":"thinking"},{"data":"opaque-bytes","type":"redacted_thinking"},{"id":"` +
		eventsOf(log, api.EventAgentToolUse)[0].ID + `","input":{"pattern":"**"},"name":"glob","type":"tool_use"}],"role":"assistant"}`
	if string(assistant) != want {
		t.Fatalf("the reply sent back:\n%s\nwant\n%s", assistant, want)
	}
}
