package server

import (
	"testing"

	"github.com/memstore/memstore/api"
)

// A tool call takes one result. A second user.tool_result for the same
// tool_use_id, in a later post or in the same batch, is refused 400 and
// nothing of its post is stored, so the runtime never consumes a call twice.
func TestDuplicateToolResultIsRefused(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	events := "/v1/sessions/" + sess.ID + "/events"
	script := `{"tool_calls":[{"name":"read","input":{"file_path":"/a"}},{"name":"read","input":{"file_path":"/b"}}]}`
	e.must(200, "POST", events, e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage(script)}}, nil)
	first := lastOfType(t, e.events(sess.ID), api.EventAgentToolUse)

	// Twice in one batch, before any answer: the whole batch is refused.
	twice := api.SendEventsRequest{Events: []api.Event{api.UserToolResult(first.ID, "one", false), api.UserToolResult(first.ID, "two", false)}}
	e.checkRefusals(t, []cpRefusal{
		{"twice in one batch", "POST", events, e.apiKey, twice, 400, api.InvalidRequest, []string{"events[1]", first.ID, "already answered"}},
	})

	e.must(200, "POST", events, e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserToolResult(first.ID, "answer", false)}}, nil)
	second := lastOfType(t, e.events(sess.ID), api.EventAgentToolUse)
	if second.ID == first.ID {
		t.Fatal("the runtime did not go on to the second call")
	}
	again := api.SendEventsRequest{Events: []api.Event{api.UserToolResult(second.ID, "fine", false), api.UserToolResult(first.ID, "again", false)}}
	e.checkRefusals(t, []cpRefusal{
		{"already answered in an earlier post", "POST", events, e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserToolResult(first.ID, "again", false)}}, 400, api.InvalidRequest, []string{"events[0]", "already answered"}},
		{"an answered one after a fresh one", "POST", events, e.apiKey, again, 400, api.InvalidRequest, []string{"events[1]", "already answered"}},
	})

	results := 0
	for _, ev := range e.events(sess.ID) {
		if ev.Type == api.EventUserToolResult {
			results++
		}
	}
	if results != 1 {
		t.Fatalf("%d tool results stored, want the one accepted", results)
	}
}

func lastOfType(t *testing.T, log []api.Event, typ string) api.Event {
	t.Helper()
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Type == typ {
			return log[i]
		}
	}
	t.Fatalf("no %s in the log", typ)
	return api.Event{}
}
