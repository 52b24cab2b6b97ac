package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Scripted is the deterministic runtime of model "scripted" (SPEC §4): the
// text of each user.message is a script of tool calls, made one at a time.
type Scripted struct{}

// Next implements Runtime. Every step of a script is decided from the log
// alone, so it never needs Work.
func (Scripted) Next(v storage.SessionView) Step {
	return Step{Emit: scan(v.Log).next(v.WorkLive)}
}

// MaxScriptToolCalls bounds one script.
const MaxScriptToolCalls = 1000

// maxResultChars bounds how much of each tool result the summary quotes.
const maxResultChars = 2000

// turn is one user.message being worked on.
type turn struct {
	msg         *api.Event // the user.message that opened it, in the log
	script      api.ScriptedScript
	invalid     string // why the message cannot be run; "" for a valid script
	calls       int    // agent.tool_use events emitted so far
	outstanding string // id of the agent.tool_use awaiting its result
	tool        string // the outstanding call's tool name
	results     []result
	errored     bool // session.error emitted
	interrupted bool // a user.interrupt arrived
	suspended   bool // idle with requires_action: the worker went away mid-call
}

// result is a call's answer: its tool's name and its user.tool_result, in
// the log (its text is read only for the summary of a turn that ends).
type result struct {
	name  string
	event *api.Event
}

func (r result) isError() bool { return r.event.IsError != nil && *r.event.IsError }

// state is what the log says about the session.
type state struct {
	terminated bool
	pending    []*api.Event // user.messages waiting for their turn, oldest first, in the log
	cur        *turn
	open       turn // what cur points to: a scan opens one turn at a time
}

// scan folds the log into a state. It is the only place that interprets
// the log, so the rules below are the runtime's whole memory:
//   - user.message queues a turn; session.status_running starts the oldest
//     queued one, or resumes a suspended turn;
//   - agent.tool_use is the turn's next call, user.tool_result its answer;
//   - user.interrupt aborts the turn and drops the messages queued so far;
//   - session.status_idle ends the turn, except with requires_action,
//     which suspends it until its call is answered;
//   - session.status_terminated ends everything.
func scan(log []api.Event) *state {
	st := &state{}
	for i := range log {
		e := &log[i]
		switch e.Type {
		case api.EventUserMessage:
			st.pending = append(st.pending, e)
		case api.EventUserInterrupt:
			if st.cur != nil {
				st.cur.interrupted = true
			}
			st.pending = nil
		case api.EventSessionStatusRunning:
			switch {
			case st.cur != nil && st.cur.suspended:
				st.cur.suspended = false
			case st.cur == nil && len(st.pending) > 0:
				st.cur = st.start(st.pending[0])
				if len(st.pending) == 1 {
					st.pending = st.pending[:0] // drained: the next message reuses the array
				} else {
					st.pending = st.pending[1:]
				}
			}
		case api.EventAgentToolUse:
			if st.cur != nil {
				st.cur.calls++
				st.cur.outstanding, st.cur.tool = e.ID, e.Name
			}
		case api.EventUserToolResult:
			// Only the open turn's outstanding call is answered here, so
			// only its tool's name is kept (a map of every call the log
			// ever held was built again on every step).
			if st.cur != nil && st.cur.outstanding != "" && e.ToolUseID == st.cur.outstanding {
				st.cur.results = append(st.cur.results, result{name: st.cur.tool, event: e})
				st.cur.outstanding, st.cur.tool = "", ""
			}
		case api.EventSessionError:
			if st.cur != nil {
				st.cur.errored = true
			}
		case api.EventSessionStatusIdle:
			if st.cur != nil && e.StopReason != nil && e.StopReason.Type == api.StopRequiresAction {
				st.cur.suspended = true
			} else {
				st.cur = nil
			}
		case api.EventSessionStatusTerminated:
			st.terminated = true
			st.cur = nil
		}
	}
	if st.cur != nil {
		st.cur.parse()
	}
	return st
}

// start opens the turn of one user.message. Its script is parsed only if
// the turn is still open when the scan ends (parse): a session's log holds
// every turn it ever ran, and parsing each of them on every step made a
// send's cost grow with the session's age.
func (st *state) start(msg *api.Event) *turn {
	st.open = turn{msg: msg, results: st.open.results[:0]} // the last turn's are done with
	return &st.open
}

// parse reads the script of the turn's message.
func (t *turn) parse() {
	script, err := ParseScript(t.msg.Text())
	if err != nil {
		t.invalid = err.Error()
		return
	}
	t.script = script
}

// ParseScript reads the text of a user.message as a script. The error says
// what is wrong and shows the expected shape.
func ParseScript(text string) (api.ScriptedScript, error) {
	const shape = `{"tool_calls":[{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"…"}}],"end":"idle"}`
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var s api.ScriptedScript
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("this agent runs the scripted model, so each user.message must be a JSON script like %s; it could not be read: %v", shape, err)
	}
	if dec.More() {
		return s, fmt.Errorf("the script must be a single JSON object like %s; found more after it", shape)
	}
	if len(s.ToolCalls) > MaxScriptToolCalls {
		return s, fmt.Errorf("the script has %d tool calls; the limit is %d, so split it over several messages", len(s.ToolCalls), MaxScriptToolCalls)
	}
	for i, c := range s.ToolCalls {
		// A call to a name outside the worker's toolset would never be
		// answered by the official worker, which leaves unknown tools to
		// "another client", and the session would wait forever.
		if !api.IsAgentTool(c.Name) {
			return s, fmt.Errorf("tool_calls[%d]: name %q is not a tool of the worker's toolset; use bash, read, write, edit, glob or grep", i, c.Name)
		}
		in := bytes.TrimSpace(c.Input)
		if len(in) == 0 || string(in) == "null" {
			s.ToolCalls[i].Input = json.RawMessage("{}")
			continue
		}
		if in[0] != '{' {
			return s, fmt.Errorf("tool_calls[%d] (%s): input must be a JSON object such as {\"file_path\":\"…\"}, got %s", i, c.Name, in)
		}
		var compact bytes.Buffer
		json.Compact(&compact, in)
		s.ToolCalls[i].Input = compact.Bytes()
	}
	switch s.End {
	case "":
		s.End = api.ScriptEndIdle
	case api.ScriptEndIdle, api.ScriptEndTerminate:
	default:
		return s, fmt.Errorf("end must be %q or %q, got %q", api.ScriptEndIdle, api.ScriptEndTerminate, s.End)
	}
	return s, nil
}

// next is the agent's move in state st: the events to append now, or none
// while it waits for a tool result or a message.
func (st *state) next(workLive bool) []api.Event {
	if st.terminated {
		return nil
	}
	t := st.cur
	if t == nil {
		if len(st.pending) > 0 {
			return []api.Event{{Type: api.EventSessionStatusRunning}}
		}
		return nil
	}
	switch {
	case t.interrupted:
		return []api.Event{idle(api.StopEndTurn)}
	case t.suspended:
		if t.outstanding == "" {
			// Someone answered the call the worker left behind: carry on.
			return []api.Event{{Type: api.EventSessionStatusRunning}}
		}
		return nil
	case t.outstanding != "":
		if !workLive {
			// The work item stopped while its call was out: nobody will
			// answer it until a worker is back.
			e := idle(api.StopRequiresAction)
			e.StopReason.EventIDs = []string{t.outstanding}
			return []api.Event{e}
		}
		return nil
	case t.invalid != "":
		if t.errored {
			return []api.Event{idle(api.StopEndTurn)}
		}
		return []api.Event{{
			Type:  api.EventSessionError,
			Error: &api.SessionError{Type: "unknown_error", Message: t.invalid, RetryStatus: &api.RetryStatus{Type: api.RetryExhausted}},
		}, idle(api.StopEndTurn)}
	case t.calls < len(t.script.ToolCalls):
		c := t.script.ToolCalls[t.calls]
		return []api.Event{{Type: api.EventAgentToolUse, Name: c.Name, Input: c.Input, EvaluatedPermission: "allow"}}
	default:
		end := idle(api.StopEndTurn)
		if t.script.End == api.ScriptEndTerminate {
			end = api.Event{Type: api.EventSessionStatusTerminated}
		}
		return []api.Event{{Type: api.EventAgentMessage, Content: api.TextContent(summary(t.results))}, end}
	}
}

func idle(reason string) api.Event {
	return api.Event{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: reason}, StopDetails: json.RawMessage("null")}
}

// summary is the agent.message closing a script: one line per call with
// its outcome, quoting the result so a test or a person can see what the
// worker did.
func summary(results []result) string {
	failed := 0
	for _, r := range results {
		if r.isError() {
			failed++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Script finished: %d tool call(s), %d failed.", len(results), failed)
	for i, r := range results {
		outcome := "ok"
		if r.isError() {
			outcome = "error"
		}
		text := r.event.Text()
		if n := len([]rune(text)); n > maxResultChars {
			text = string([]rune(text)[:maxResultChars]) + fmt.Sprintf("… [%d more characters]", n-maxResultChars)
		}
		fmt.Fprintf(&b, "\n%d. %s (%s): %s", i+1, r.name, outcome, text)
	}
	return b.String()
}
