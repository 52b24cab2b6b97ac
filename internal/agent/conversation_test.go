package agent

import (
	"testing"

	"github.com/memstore/memstore/api"
)

// Only the open turn's latest reply's calls are the turn's to resolve: an
// answer to a call of an earlier reply, or of an earlier turn, resolves
// nothing now, and of two confirmations of one call the first counts.
func TestScanModelResolvesOnlyTheLatestRepliesCalls(t *testing.T) {
	ev := func(id, typ string, set func(*api.Event)) api.Event {
		e := api.Event{ID: id, Type: typ}
		if set != nil {
			set(&e)
		}
		return e
	}
	use := func(id, permission string) api.Event {
		return ev(id, api.EventAgentToolUse, func(e *api.Event) { e.Name, e.EvaluatedPermission = "bash", permission })
	}
	result := func(id string) api.Event { return api.UserToolResult(id, "ok", false) }
	confirm := func(id, verdict string) api.Event {
		return ev("", api.EventUserToolConfirmation, func(e *api.Event) { e.ToolUseID, e.Result = id, verdict })
	}
	log := []api.Event{
		api.UserMessage("first"), ev("", api.EventSessionStatusRunning, nil),
		ev("s0", api.EventSpanModelRequestStart, nil), use("old-turn", api.PermissionAllow), ev("", api.EventSpanModelRequestEnd, func(e *api.Event) { e.ModelRequestStartID = "s0" }),
		ev("", api.EventSessionStatusIdle, func(e *api.Event) { e.StopReason = &api.StopReason{Type: api.StopEndTurn} }),
		api.UserMessage("second"), ev("", api.EventSessionStatusRunning, nil),
		ev("s1", api.EventSpanModelRequestStart, nil), use("u1", api.PermissionAllow), ev("", api.EventSpanModelRequestEnd, func(e *api.Event) { e.ModelRequestStartID = "s1" }),
		result("u1"),
		ev("s2", api.EventSpanModelRequestStart, nil), use("u2", "ask"), use("u3", api.PermissionAllow), ev("", api.EventSpanModelRequestEnd, func(e *api.Event) { e.ModelRequestStartID = "s2" }),
		result("old-turn"), result("u1"), confirm("u2", api.PermissionDeny), confirm("u2", api.PermissionAllow), result("u3"),
	}
	st := scanModel(log)
	if st.cur == nil || st.cur.requests != 2 {
		t.Fatalf("want the second turn open after 2 requests, got %+v", st.cur)
	}
	got := map[string]toolUse{}
	for _, u := range st.cur.uses {
		got[u.id] = *u
	}
	if len(st.cur.uses) != 2 || got["u2"].id == "" || got["u3"].id == "" {
		t.Fatalf("the turn's calls are %+v; want the latest reply's, u2 and u3", got)
	}
	if u := got["u2"]; u.answered || u.verdict != api.PermissionDeny || !u.resolved() {
		t.Errorf("u2 = %+v; want denied by its first confirmation, not answered", u)
	}
	if u := got["u3"]; !u.answered || u.verdict != "" {
		t.Errorf("u3 = %+v; want answered by its result", u)
	}
}
