package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/toolset"
)

const model = "claude-sonnet-4-5"

// toolsetWith is an agent's tools: the whole toolset, with overrides such
// as {"name":"bash","enabled":false}.
func toolsetWith(configs ...string) []json.RawMessage {
	return []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401","configs":[` + strings.Join(configs, ",") + `]}`)}
}

func modelHarness(t *testing.T, u *upstream, tools []json.RawMessage, resources ...api.SessionResource) *harness {
	return newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, System: "You keep notes.", Tools: tools}, resources, u.config())
}

func strp(s string) *string { return &s }

// One turn with two parallel tool calls: the request carries the memory
// section, the toolset's schemas and cache breakpoints; both calls go out
// before the next request, which carries both results after their uses;
// the session's usage adds up both requests.
func TestModelTurnCallsToolsAndEndsTheTurn(t *testing.T) {
	u := newUpstream(t)
	h := modelHarness(t, u, toolsetWith(`{"name":"bash","enabled":false}`),
		api.SessionResource{Type: api.ResourceMemoryStore, MemoryStoreID: "memstore_1", Name: "Project notes", Description: "what we decided", MountPath: "/mnt/memory/project-notes", Access: api.AccessReadWrite, Instructions: strp("one file per decision")},
		api.SessionResource{Type: api.ResourceMemoryStore, MemoryStoreID: "memstore_2", Name: "Handbook", MountPath: "/mnt/memory/handbook", Access: api.AccessReadOnly})
	u.reply(anthropic.StopReasonToolUse, usage(100, 20, 0, 90),
		text("Let me look."),
		toolUseBlock("toolu_a", "read", `{"file_path":"/mnt/memory/handbook/style.md"}`),
		toolUseBlock("toolu_b", "write", `{"file_path":"/mnt/memory/project-notes/x.md","content":"hi"}`))
	h.mustSend(api.UserMessage("hello"))
	log := h.waitFor("the tool calls", func(log []api.Event) bool { return strings.Count(typesOf(log), "agent.tool_use") == 2 })
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.message agent.tool_use agent.tool_use span.model_request_end" {
		t.Fatalf("log: %s", got)
	}

	req := u.request(0)
	// The SDK sends the key as a bearer token.
	if req.header.Get("Authorization") != "Bearer sk-upstream-test" || string(req.params.Model) != model || req.params.MaxTokens != 8192 {
		t.Fatalf("request: authorization %q model %q max_tokens %d", req.header.Get("Authorization"), req.params.Model, req.params.MaxTokens)
	}
	sys := req.params.System
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
	tools, _ := req.raw["tools"].([]any)
	var names []string
	defs := map[string]toolset.Definition{}
	for _, d := range toolset.Definitions() {
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
	assertBreakpoints(t, req.raw)

	// Both calls are out; the results come back in the other order.
	uses := eventsOf(log, api.EventAgentToolUse)
	if uses[0].Name != "read" || uses[1].Name != "write" || uses[0].EvaluatedPermission != "allow" || string(uses[1].Input) != `{"file_path":"/mnt/memory/project-notes/x.md","content":"hi"}` {
		t.Fatalf("tool uses %+v", uses)
	}
	u.reply(anthropic.StopReasonEndTurn, usage(150, 10, 90, 0), text("Done."))
	h.mustSend(api.UserToolResult(uses[1].ID, "wrote 2 bytes", false))
	if u.count() != 1 {
		t.Fatal("a request went out before every call had its result")
	}
	h.mustSend(api.UserToolResult(uses[0].ID, "no such file", true))
	log = h.idleAgain(len(log))
	if got := typesOf(log[len(log)-6:]); got != "user.tool_result user.tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", typesOf(log))
	}
	msgs := u.request(1).raw["messages"].([]any)
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
	u := newUpstream(t)
	cfg := u.config()
	var waits []time.Duration
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, Tools: toolsetWith()}, nil, cfg)
	u.fail(429, "rate_limit_error", "slow down", "retry-after", "7")
	u.reply(anthropic.StopReasonEndTurn, usage(10, 2, 0, 0), text("hi"))
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start session.error agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	e := eventsOf(log, api.EventSessionError)[0].Error
	if e.Type != "model_rate_limited_error" || e.RetryStatus.Type != api.RetryRetrying || !strings.Contains(e.Message, "429") {
		t.Fatalf("session.error %+v", e)
	}
	if len(waits) != 1 || waits[0] != 7*time.Second || u.count() != 2 {
		t.Fatalf("waits %v, requests %d", waits, u.count())
	}
}
