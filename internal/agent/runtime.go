// Package agent holds the server-side agent runtimes — what turns a
// session's events into agent.tool_use calls and consumes the worker's
// results — and the Runner that drives them.
//
// A runtime is a pure function of the session's event log (plus whether a
// live work item serves the session): Next says what to do next. Steps that
// only emit events are decided and stored inside the append's transaction
// (AppendClient, storage's AppendSteps); a step with Work (a model call,
// which takes seconds) runs outside any transaction. After a restart the Runner asks Next again and picks up exactly
// where the log says the session was; there is no other state to recover.
package agent

import (
	"context"
	"slices"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Runtime decides a session's next step from its log. Next must be pure
// and quick: the Runner calls it before every step and again inside the
// transaction of every append, to check that the log still calls for it
// and to decide the emit-only steps that follow.
type Runtime interface {
	Next(v storage.SessionView) Step
}

// Step is a runtime's next move. The zero Step means the session waits (for
// a message, a tool result, a worker).
type Step struct {
	// Emit are events to append now; the Runner appends them only if the
	// log has not moved since Next saw it, and asks again if it has.
	Emit []api.Event
	// Work is slow work (a model call) to run outside any transaction, with
	// a context cancelled when the log stops calling for it. Its events go
	// through emit, which appends them only while Next still returns a step
	// with the same Key, and otherwise returns ErrStale: that is what keeps
	// a restart, a second replica or an interrupt from emitting a reaction
	// twice or too late.
	Work func(ctx context.Context, emit Emitter) error
	// Key names the step Work performs; two views that call for the same
	// work give the same Key.
	Key string
}

// Emitter appends a step's events to its session (see Step.Work).
type Emitter func(events ...api.Event) error

// ByModel is the Runtime the server uses for every session: it dispatches on
// the agent's model, "scripted" to Scripted and any other model to Model.
type ByModel struct {
	Scripted Runtime
	Model    Runtime
}

// Next implements Runtime.
func (r ByModel) Next(v storage.SessionView) Step {
	if v.Session.Agent.Model.ID == api.ScriptedModel {
		return r.Scripted.Next(v)
	}
	return r.Model.Next(v)
}

// Check refuses client events that the session cannot take now; the server
// runs it inside the append's transaction (as a storage.AppendGuard), so a
// refusal and the log it was checked against agree. Every refusal is an
// invalid_request_error (400), never a 409: the official worker retries
// 409s for a whole lease TTL, and none of these refusals goes away by
// retrying.
func Check(v storage.SessionView, events []api.Event) error {
	if v.Session.Status == api.SessionTerminated || v.Session.ArchivedAt != nil {
		return api.Errorf(api.InvalidRequest, "session %s is terminated; it accepts no more events (create a new session to continue)", v.Session.ID)
	}
	// The calls of the log and their answers, read only when an event
	// answers a call: a user.message or a user.interrupt needs none of
	// it, and reading it made every send cost its session's whole log.
	toolUses := map[string]string{} // agent.tool_use id → its evaluated_permission
	mcpUses := map[string]string{}  // the same for agent.mcp_tool_use, confirmed like agent.tool_use, never answered by the client
	customUses := map[string]bool{}
	answered := map[string]string{} // tool_use_id → the type of the event that answered it
	if slices.ContainsFunc(events, answersACall) {
		for _, e := range v.Log {
			switch e.Type {
			case api.EventAgentToolUse:
				toolUses[e.ID] = e.EvaluatedPermission
			case api.EventAgentMCPToolUse:
				mcpUses[e.ID] = e.EvaluatedPermission
			case api.EventAgentMCPToolResult:
				answered[e.MCPToolUseID] = e.Type
			case api.EventAgentCustomToolUse:
				customUses[e.ID] = true
			case api.EventUserCustomToolResult:
				answered[e.CustomToolUseID] = e.Type
			case api.EventUserToolResult, api.EventUserToolConfirmation:
				if answered[e.ToolUseID] == "" {
					answered[e.ToolUseID] = e.Type
				}
			}
		}
	}
	for i, e := range events {
		switch e.Type {
		case api.EventUserMessage:
			if len(e.Content) == 0 {
				return api.Errorf(api.InvalidRequest, "events[%d]: a user.message needs content, e.g. [{\"type\":\"text\",\"text\":\"…\"}]", i)
			}
		case api.EventUserInterrupt:
		case api.EventUserToolResult:
			if e.ToolUseID == "" {
				return api.Errorf(api.InvalidRequest, "events[%d]: a user.tool_result needs tool_use_id, the id of the agent.tool_use it answers", i)
			}
			if _, ok := toolUses[e.ToolUseID]; !ok {
				return api.Errorf(api.InvalidRequest, "events[%d]: tool_use_id %q names no agent.tool_use of session %s; list the session's events to find the call to answer", i, e.ToolUseID, v.Session.ID)
			}
			if answered[e.ToolUseID] == api.EventUserToolResult {
				return api.Errorf(api.InvalidRequest, "events[%d]: tool_use_id %q is already answered in session %s; a tool call takes one user.tool_result, so send nothing more for it (list the session's events of type user.tool_result to see the answer stored)", i, e.ToolUseID, v.Session.ID)
			}
			answered[e.ToolUseID] = e.Type
		case api.EventUserCustomToolResult:
			switch id := e.CustomToolUseID; {
			case id == "":
				return api.Errorf(api.InvalidRequest, "events[%d]: a user.custom_tool_result needs custom_tool_use_id, the id of the agent.custom_tool_use it answers", i)
			case !customUses[id]:
				return api.Errorf(api.InvalidRequest, "events[%d]: custom_tool_use_id %q names no agent.custom_tool_use of session %s; the calls awaiting an answer are in the last session.status_idle's stop_reason.event_ids", i, id, v.Session.ID)
			case answered[id] != "":
				return api.Errorf(api.InvalidRequest, "events[%d]: custom_tool_use_id %q is already answered in session %s; a custom tool call takes one user.custom_tool_result, so send nothing more for it", i, id, v.Session.ID)
			}
			answered[e.CustomToolUseID] = e.Type
		case api.EventUserToolConfirmation:
			permission, ok := toolUses[e.ToolUseID]
			if !ok {
				permission, ok = mcpUses[e.ToolUseID]
			}
			switch {
			case e.ToolUseID == "":
				return api.Errorf(api.InvalidRequest, "events[%d]: a user.tool_confirmation needs tool_use_id, the id of the agent.tool_use it allows or denies", i)
			case !ok:
				return api.Errorf(api.InvalidRequest, "events[%d]: tool_use_id %q names no agent.tool_use of session %s; the ids awaiting confirmation are in the last session.status_idle's stop_reason.event_ids", i, e.ToolUseID, v.Session.ID)
			case permission != api.PermissionAsk:
				return api.Errorf(api.InvalidRequest, "events[%d]: the agent.tool_use %s does not await confirmation (its evaluated_permission is %q)", i, e.ToolUseID, permission)
			case answered[e.ToolUseID] != "":
				return api.Errorf(api.InvalidRequest, "events[%d]: the agent.tool_use %s was already confirmed or answered", i, e.ToolUseID)
			case e.Result != api.PermissionAllow && e.Result != api.PermissionDeny:
				return api.Errorf(api.InvalidRequest, "events[%d]: result must be %q or %q, got %q", i, api.PermissionAllow, api.PermissionDeny, e.Result)
			case e.DenyMessage != nil && e.Result != api.PermissionDeny:
				return api.Errorf(api.InvalidRequest, "events[%d]: deny_message goes only with result %q", i, api.PermissionDeny)
			}
			answered[e.ToolUseID] = e.Type
		case "":
			return api.Errorf(api.InvalidRequest, "events[%d]: type is required (user.message, user.interrupt, user.tool_result, user.custom_tool_result or user.tool_confirmation)", i)
		default:
			return api.Errorf(api.InvalidRequest, "events[%d]: type %q cannot be sent to a memstore session; send user.message, user.interrupt, user.tool_result, user.custom_tool_result or user.tool_confirmation", i, e.Type)
		}
	}
	return nil
}

// answersACall reports whether a client event answers one of the agent's
// calls, which Check looks up in the log.
func answersACall(e api.Event) bool {
	switch e.Type {
	case api.EventUserToolResult, api.EventUserCustomToolResult, api.EventUserToolConfirmation:
		return true
	}
	return false
}
