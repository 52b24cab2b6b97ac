// Package agent holds the server-side agent runtimes: what turns a session's
// events into agent.tool_use calls and consumes the worker's results.
//
// A runtime is a pure function of the session's event log (plus whether a
// live work item serves the session): storage calls it inside the
// transaction that appends events, until it has nothing more to say. So a
// reaction is never lost or doubled, two appends to one session never
// interleave, and after a restart the runtime picks up exactly where the
// log says it was — there is no other state to recover.
package agent

import (
	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Runtime is the storage.SessionRuntime the server uses for every session.
// It dispatches on the agent's model: "scripted" runs the deterministic
// script runtime; any other model is answered with a session.error, since
// memstore has no model access of its own.
type Runtime struct{}

var _ storage.SessionRuntime = Runtime{}

// Check refuses client events that the session cannot take now. Every
// refusal is an invalid_request_error (400), never a 409: the official
// worker retries 409s for a whole lease TTL, and none of these refusals
// goes away by retrying.
func (Runtime) Check(v storage.SessionView, events []api.Event) error {
	if v.Session.Status == api.SessionTerminated || v.Session.ArchivedAt != nil {
		return api.Errorf(api.InvalidRequest, "session %s is terminated; it accepts no more events (create a new session to continue)", v.Session.ID)
	}
	toolUses := map[string]bool{}
	// answered holds the tool_use_ids that already have a result, in the log
	// or earlier in this batch: a second result would let the runtime
	// consume one call twice, so it is refused, whichever copy is "right".
	answered := map[string]bool{}
	for _, e := range v.Log {
		switch e.Type {
		case api.EventAgentToolUse:
			toolUses[e.ID] = true
		case api.EventUserToolResult:
			answered[e.ToolUseID] = true
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
			if !toolUses[e.ToolUseID] {
				return api.Errorf(api.InvalidRequest, "events[%d]: tool_use_id %q names no agent.tool_use of session %s; list the session's events to find the call to answer", i, e.ToolUseID, v.Session.ID)
			}
			if answered[e.ToolUseID] {
				return api.Errorf(api.InvalidRequest, "events[%d]: tool_use_id %q is already answered in session %s; a tool call takes one user.tool_result, so send nothing more for it (list the session's events of type user.tool_result to see the answer stored)", i, e.ToolUseID, v.Session.ID)
			}
			answered[e.ToolUseID] = true
		case "":
			return api.Errorf(api.InvalidRequest, "events[%d]: type is required (user.message, user.interrupt or user.tool_result)", i)
		default:
			return api.Errorf(api.InvalidRequest, "events[%d]: type %q cannot be sent to a memstore session; send user.message, user.interrupt or user.tool_result", i, e.Type)
		}
	}
	return nil
}

// React returns the agent's next events given the log so far.
func (Runtime) React(v storage.SessionView) ([]api.Event, error) {
	st := scan(v.Log, v.Session.Agent.Model.ID)
	return st.next(v.WorkLive), nil
}
