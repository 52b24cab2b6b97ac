package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

const weatherTool = `{"type":"custom","name":"get_weather","description":"The weather in a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}`

// A reply with two custom calls and a built-in one: the custom tool is
// declared with its schema; its calls are agent.custom_tool_use (the worker
// gets only the built-in call) and the session idles with requires_action
// naming them; the next request waits for every answer, carries each as the
// tool_result of its call, and the turn ends with the model's answer. A
// restart in the wait changes nothing.
func TestCustomToolCallsWaitForTheApplication(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, append(toolsetWith(), json.RawMessage(weatherTool)))
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0),
		modeltest.ToolUse("toolu_1", "get_weather", `{"city":"Paris"}`),
		modeltest.ToolUse("toolu_2", "glob", `{"pattern":"**"}`),
		modeltest.ToolUse("toolu_3", "get_weather", `{"city":"Oslo"}`))
	h.mustSend(api.UserMessage("weather?"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.custom_tool_use agent.tool_use agent.custom_tool_use span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	tools := u.Request(0).Raw["tools"].([]any)
	decl, _ := json.Marshal(tools[len(tools)-1])
	if want := `{"cache_control":{"type":"ephemeral"},"description":"The weather in a city.","input_schema":{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"name":"get_weather"}`; string(decl) != want {
		t.Fatalf("custom tool declared as\n%s\nwant\n%s", decl, want)
	}
	custom := eventsOf(log, api.EventAgentCustomToolUse)
	builtin := eventsOf(log, api.EventAgentToolUse)[0]
	idle := eventsOf(log, api.EventSessionStatusIdle)[0]
	if idle.StopReason.Type != api.StopRequiresAction || strings.Join(idle.StopReason.EventIDs, ",") != custom[0].ID+","+custom[1].ID {
		t.Fatalf("idle %+v, custom calls %s %s", idle.StopReason, custom[0].ID, custom[1].ID)
	}
	if custom[0].Name != "get_weather" || string(custom[1].Input) != `{"city":"Oslo"}` {
		t.Fatalf("custom calls %+v", custom)
	}

	// Refusals store nothing.
	n := len(log)
	for _, bad := range []struct {
		e    api.Event
		want string
	}{
		{api.Event{Type: api.EventUserCustomToolResult, Content: api.TextContent("x")}, "needs custom_tool_use_id"},
		{api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: builtin.ID, Content: api.TextContent("x")}, "names no agent.custom_tool_use"},
		{api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: "sevt_nope", Content: api.TextContent("x")}, "names no agent.custom_tool_use"},
	} {
		err := h.send(bad.e)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, bad.want) {
			t.Fatalf("%+v: %v, want an invalid_request_error saying %q", bad.e, err, bad.want)
		}
	}
	h.restart()
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("Sunny in Paris, rain in Oslo."))
	h.mustSend(api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: custom[1].ID, Content: api.TextContent("rain")})
	err := h.send(api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: custom[1].ID, Content: api.TextContent("again")})
	if err == nil || !strings.Contains(err.Error(), "already answered") {
		t.Fatalf("a second answer: %v", err)
	}
	h.mustSend(api.Event{Type: api.EventUserCustomToolResult, CustomToolUseID: custom[0].ID, Content: api.TextContent("sunny")})
	if got := len(h.log()); got != n+3 || u.Count() != 1 {
		t.Fatalf("%d events after the refusals and two answers (want %d: theirs and running); %d requests before the worker's answer", got, n+3, u.Count())
	}
	h.mustSend(api.UserToolResult(builtin.ID, "/a.md", false))
	log = h.idleAgain(n + 3)
	if got := typesOf(log[n:]); got != "user.custom_tool_result user.custom_tool_result session.status_running user.tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log after the answers: %s", got)
	}
	msgs := u.Request(1).Raw["messages"].([]any)
	results, _ := json.Marshal(msgs[2].(map[string]any)["content"])
	want := `[{"content":[{"text":"sunny","type":"text"}],"is_error":false,"tool_use_id":"` + custom[0].ID + `","type":"tool_result"},` +
		`{"content":[{"text":"/a.md","type":"text"}],"is_error":false,"tool_use_id":"` + builtin.ID + `","type":"tool_result"},` +
		`{"cache_control":{"type":"ephemeral"},"content":[{"text":"rain","type":"text"}],"is_error":false,"tool_use_id":"` + custom[1].ID + `","type":"tool_result"}]`
	if string(results) != want {
		t.Fatalf("tool results sent:\n%s\nwant\n%s", results, want)
	}
}

// An interrupt while the session waits for a custom tool ends the turn;
// the model hears that the call was abandoned.
func TestInterruptWhileACustomToolWaits(t *testing.T) {
	u := modeltest.New(t)
	h := modelHarness(t, u, []json.RawMessage{json.RawMessage(weatherTool)})
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "get_weather", `{"city":"Paris"}`))
	h.mustSend(api.UserMessage("weather?"))
	log := h.idleAgain(0)
	h.mustSend(api.UserInterrupt())
	log = h.idleAgain(len(log))
	if got := typesOf(log); !strings.HasSuffix(got, "session.status_idle user.interrupt session.status_idle") {
		t.Fatalf("log: %s", got)
	}
	if last := eventsOf(log, api.EventSessionStatusIdle)[1]; last.StopReason.Type != api.StopEndTurn {
		t.Fatalf("after the interrupt: %+v", last.StopReason)
	}
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("ok"))
	h.mustSend(api.UserMessage("never mind"))
	h.idleAgain(len(log) + 1)
	msgs, _ := json.Marshal(u.Request(1).Raw["messages"])
	if !strings.Contains(string(msgs), `"is_error":true,"tool_use_id":"`+eventsOf(log, api.EventAgentCustomToolUse)[0].ID) || !strings.Contains(string(msgs), "abandoned") {
		t.Fatalf("the abandoned call's result: %s", msgs)
	}
}
