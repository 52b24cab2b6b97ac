package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// chatTerminal is what a chat talks through: lines typed (a terminal in
// its ordinary line mode, or a pipe), the screen, and Ctrl-C presses. The
// chat verb wires them to standard input and output and SIGINT; tests
// drive them directly.
type chatTerminal struct {
	in         io.Reader
	out        io.Writer
	interrupts <-chan struct{}
	// workerWait starts the short wait, from a tool call a worker is to
	// run, after which the chat checks that a worker polls the environment
	// if the call still waits (see chat.checkWorkers); the verb's is
	// time.After(chatWorkerWait).
	workerWait func() <-chan time.Time
	// customTool answers custom tool calls (--custom-tool-cmd); nil leaves
	// them to the application, and the chat says how to answer.
	customTool *customToolHook
}

// chatWorkerWait is how long tool calls may wait for a worker before the
// chat checks that one polls the session's environment: longer than a
// polling worker takes to claim the session, short enough that a person
// is not left wondering.
const chatWorkerWait = 5 * time.Second

// chat is a conversation with one session: it owns the screen, reads the
// lines typed, and follows the session's events.
type chat struct {
	c          *client.Client
	id         string
	out        io.Writer
	lines      <-chan string // closed at the end of input (Ctrl-D)
	interrupts <-chan struct{}
	events     <-chan api.Event // closed when the session is gone

	// calls are the tool calls shown waiting for their result; asking are
	// those that wait for the user's confirmation.
	calls  map[string]api.Event
	asking map[string]api.Event
	// mcpCalls are the MCP tool calls shown waiting for their result: the
	// server makes them, no worker.
	mcpCalls map[string]api.Event
	// customCalls are the custom tool calls shown waiting for their
	// result: the application (or customTool) answers them, no worker.
	customCalls map[string]api.Event
	customTool  *customToolHook

	// environmentID is the session's environment, whose workers the chat
	// checks once calls wait (workerCheck fires; workerWait arms it), until
	// it has seen one polling or told the user there is none.
	environmentID string
	workerWait    func() <-chan time.Time
	workerCheck   <-chan time.Time
	workerChecked bool
}

// runChatSession talks with session id through term until the input ends, Ctrl-C
// is pressed at the prompt, or the session terminates; then it prints the
// session's token usage.
func runChatSession(ctx context.Context, c *client.Client, id string, term chatTerminal) error {
	sess, err := c.GetSession(ctx, id)
	if err != nil {
		return err
	}
	// The stream starts with the events after it connects, so it connects
	// before the first message goes out.
	st, err := c.StreamEvents(ctx, id, client.StreamEventsParams{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan api.Event)
	go followChat(ctx, c, id, st, events)
	ch := &chat{c: c, id: id, out: term.out, lines: readLines(term.in), interrupts: term.interrupts, events: events,
		calls: map[string]api.Event{}, asking: map[string]api.Event{}, mcpCalls: map[string]api.Event{},
		customCalls: map[string]api.Event{}, customTool: term.customTool,
		environmentID: sess.EnvironmentID, workerWait: term.workerWait}
	fmt.Fprintf(term.out, "Continue it later with: memstore chat --session %s\nOne message per line. Ctrl-C interrupts a turn; at the prompt, Ctrl-C or Ctrl-D ends.\n", id)
	if err := ch.converse(ctx); err != nil {
		return err
	}
	return printUsage(c, id, term.out)
}

// readLines delivers the lines of in, closing the channel at its end. The
// goroutine outlives the chat only while in is still open, as a terminal's
// input is until the process exits.
func readLines(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(in)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	return lines
}

// converse is the prompt loop: each line typed is a message, and the turn
// it starts is followed to its end before the next prompt.
func (ch *chat) converse(ctx context.Context) error {
	prompt := true
	for {
		if prompt {
			fmt.Fprint(ch.out, "you> ")
			prompt = false
		}
		var text string
		select {
		case line, ok := <-ch.lines:
			if !ok {
				fmt.Fprintln(ch.out)
				return nil
			}
			if text = strings.TrimSpace(line); text == "" {
				prompt = true
				continue
			}
		case <-ch.interrupts:
			fmt.Fprintln(ch.out)
			return nil
		case <-ch.workerCheck:
			if ch.checkWorkers(ctx) {
				prompt = true
			}
			continue
		case e, ok := <-ch.events:
			// Something happened without us: another client's message, or
			// calls a worker ran after the chat stopped waiting for it.
			if !ok {
				return nil
			}
			if shown := ch.render(e); shown != "" {
				fmt.Fprintln(ch.out, "\n"+shown)
				prompt = true
			}
			continue
		case <-ctx.Done():
			return nil
		}
		if _, err := ch.c.SendEvents(ctx, ch.id, api.UserMessage(text)); err != nil {
			return err
		}
		over, err := ch.turn(ctx)
		if err != nil || over {
			return err
		}
		prompt = true
	}
}

// turn follows a turn until the session is idle again, asking for the
// confirmations it waits for; Ctrl-C interrupts it. over says the session
// has terminated.
func (ch *chat) turn(ctx context.Context) (over bool, err error) {
	for {
		select {
		case e, ok := <-ch.events:
			if !ok {
				return true, nil
			}
			ch.show(e)
			switch e.Type {
			case api.EventSessionStatusTerminated, api.EventSessionDeleted:
				return true, nil
			case api.EventSessionStatusIdle:
				if e.StopReason == nil || e.StopReason.Type != api.StopRequiresAction {
					ch.unanswered()
					return false, nil
				}
				asked, err := ch.confirm(ctx, e.StopReason.EventIDs)
				if err != nil {
					return false, err
				}
				answered := ch.answerCustom(ctx, e.StopReason.EventIDs)
				if !asked && !answered {
					// Nothing to ask or answer here: the calls wait for a
					// worker or the application.
					return false, nil
				}
			}
		case <-ch.workerCheck:
			ch.checkWorkers(ctx)
		case <-ch.interrupts:
			fmt.Fprintln(ch.out, "\n  interrupting the turn (Ctrl-C at the prompt ends the chat)")
			if _, err := ch.c.SendEvents(ctx, ch.id, api.UserInterrupt()); err != nil {
				return false, fmt.Errorf("the turn could not be interrupted: %w", err)
			}
		case <-ctx.Done():
			return true, nil
		}
	}
}

// confirm asks about each call of ids that awaits the user's verdict and
// posts it: y allows; an empty answer, n or Ctrl-C denies; anything else
// denies with that text as the message for the model. asked says whether
// there was any to ask about.
func (ch *chat) confirm(ctx context.Context, ids []string) (asked bool, err error) {
	for _, id := range ids {
		call, ok := ch.asking[id]
		if !ok {
			continue
		}
		delete(ch.asking, id)
		asked = true
		// The whole call: the user decides on it.
		fmt.Fprintf(ch.out, "  allow %s %s? [y/N/message] ", call.Name, oneLine(string(call.Input), 1000))
		answer := ""
		select {
		case line, ok := <-ch.lines:
			if !ok {
				fmt.Fprintln(ch.out)
			}
			answer = strings.TrimSpace(line)
		case <-ch.interrupts:
			fmt.Fprintln(ch.out)
		case <-ctx.Done():
			return false, nil
		}
		verdict := api.Event{Type: api.EventUserToolConfirmation, ToolUseID: id, Result: api.PermissionDeny}
		switch strings.ToLower(answer) {
		case "y", "yes":
			verdict.Result = api.PermissionAllow
		case "", "n", "no":
		default:
			verdict.DenyMessage = &answer
		}
		if verdict.Result == api.PermissionDeny {
			delete(ch.calls, id)
			fmt.Fprintf(ch.out, "  ✗ %s → denied\n", callSummary(call))
		}
		if _, err := ch.c.SendEvents(ctx, ch.id, verdict); err != nil {
			return asked, err
		}
	}
	return asked, nil
}

// answerCustom shows each custom tool call of ids on a line of its own and,
// with a customTool, runs it and posts its answer; without, it says how to
// answer. answered says whether any answer went out (the turn goes on).
func (ch *chat) answerCustom(ctx context.Context, ids []string) (answered bool) {
	for _, id := range ids {
		call, ok := ch.customCalls[id]
		if !ok {
			continue
		}
		if ch.customTool == nil {
			fmt.Fprintf(ch.out, "  custom tool %s waits for its answer (call %s): chat with --custom-tool-cmd CMD to answer such calls from a script, or post a user.custom_tool_result with custom_tool_use_id %s to POST /v1/sessions/%s/events\n",
				callSummary(call), id, id, ch.id)
			continue
		}
		fmt.Fprintf(ch.out, "  custom tool %s → running --custom-tool-cmd\n", callSummary(call))
		if _, err := ch.c.SendEvents(ctx, ch.id, ch.customTool.answer(ctx, call)); err != nil {
			fmt.Fprintf(ch.out, "  ✗ the answer to %s could not be posted: %v\n", id, err)
			continue
		}
		answered = true
	}
	return answered
}

// show prints an event as the conversation shows it (see render).
func (ch *chat) show(e api.Event) {
	if text := ch.render(e); text != "" {
		fmt.Fprintln(ch.out, text)
	}
}

// render is an event as the conversation shows it, "" for none: the
// agent's text as it arrives, each tool call on one line with its result,
// thinking and errors on a line each.
func (ch *chat) render(e api.Event) string {
	switch e.Type {
	case api.EventAgentMessage:
		return "agent> " + e.Text()
	case api.EventAgentThinking:
		return "  thinking " + thinkingSummary(e)
	case api.EventAgentToolUse:
		switch e.EvaluatedPermission {
		case api.PermissionDeny:
			return fmt.Sprintf("  ✗ %s → not enabled for this agent", callSummary(e))
		case api.PermissionAsk:
			ch.asking[e.ID] = e
		default:
			ch.armWorkerCheck()
		}
		ch.calls[e.ID] = e
	case api.EventUserToolResult:
		return finish(ch.calls, e.ToolUseID, e)
	case api.EventAgentMCPToolUse:
		call := e
		call.Name = "mcp " + e.MCPServerName + "/" + e.Name
		if e.EvaluatedPermission == api.PermissionAsk {
			ch.asking[e.ID] = call
		}
		ch.mcpCalls[e.ID] = call
	case api.EventAgentMCPToolResult:
		return finish(ch.mcpCalls, e.MCPToolUseID, e)
	case api.EventAgentCustomToolUse:
		ch.customCalls[e.ID] = e
	case api.EventUserCustomToolResult:
		return finish(ch.customCalls, e.CustomToolUseID, e)
	case api.EventAgentThreadContextCompacted:
		return "  compacted the conversation: the model goes on from a summary of what came before (the event log keeps everything)"
	case api.EventSessionError:
		if e.Error != nil {
			status := ""
			if e.Error.RetryStatus != nil {
				status = " (" + e.Error.RetryStatus.Type + ")"
			}
			return "  error  " + e.Error.Message + status
		}
	case api.EventSessionStatusIdle:
		if e.StopReason != nil && e.StopReason.Type == api.StopRequiresAction {
			var waiting []string
			for _, id := range e.StopReason.EventIDs {
				_, asking := ch.asking[id]
				_, custom := ch.customCalls[id]
				if !asking && !custom {
					waiting = append(waiting, id)
				}
			}
			if len(waiting) > 0 {
				ch.armWorkerCheck()
				return fmt.Sprintf("  waiting for a worker to run %s", strings.Join(waiting, ", "))
			}
		}
	case api.EventSessionStatusTerminated:
		return "  the session terminated"
	}
	return ""
}

// armWorkerCheck starts the wait after which checkWorkers runs, unless it
// runs already or has had its answer.
func (ch *chat) armWorkerCheck() {
	if !ch.workerChecked && ch.workerCheck == nil && ch.workerWait != nil {
		ch.workerCheck = ch.workerWait()
	}
}

// checkWorkers runs when calls have waited for a worker a while: if they
// still wait and no worker polls the session's environment (its queue's
// workers_polling), it says so in one line, with the command that starts
// one, and reports that it printed. The check is made once a chat, or
// again later if it could not be made.
func (ch *chat) checkWorkers(ctx context.Context) (printed bool) {
	ch.workerCheck = nil
	if len(ch.calls) == len(ch.asking) {
		return false // nothing waits for a worker any more
	}
	stats, err := ch.c.WorkStats(ctx, ch.environmentID)
	if err != nil {
		return false
	}
	ch.workerChecked = true
	if stats.WorkersPolling > 0 {
		return false
	}
	// A worker that runs as many sessions as it may stops polling: it is
	// busy, not missing, and starting one is not the only remedy.
	if busy, err := ch.otherSessionsInProgress(ctx); err == nil && len(busy) > 0 {
		shown := busy[:min(len(busy), 3)]
		more := ""
		if len(busy) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(busy)-len(shown))
		}
		fmt.Fprintf(ch.out, "\n  the worker of environment %s is busy with %d other session(s) (%s%s) and polls for no more, so the tool calls wait until it is free: let those finish, or start another worker with `memstore worker poll --environment-id %s --environment-key KEY`\n",
			ch.environmentID, len(busy), strings.Join(shown, ", "), more, ch.environmentID)
		return true
	}
	fmt.Fprintf(ch.out, "\n  no worker is polling environment %s, so the tool calls wait: start one with `memstore worker poll --environment-id %s --environment-key KEY` (a key: memstore env key create %s)\n",
		ch.environmentID, ch.environmentID, ch.environmentID)
	return true
}

// otherSessionsInProgress lists the sessions other than the chat's whose
// work items in its environment a worker holds (starting, active or
// stopping), looking at the newest items only: a check, not an audit.
func (ch *chat) otherSessionsInProgress(ctx context.Context) ([]string, error) {
	var ids []string
	seen := 0
	for w, err := range ch.c.ListAllWork(ctx, ch.environmentID, api.WorkListParams{Limit: api.MaxListLimit}) {
		if err != nil {
			return nil, err
		}
		if seen++; seen > 5*api.MaxListLimit {
			break
		}
		switch w.State {
		case api.WorkStarting, api.WorkActive, api.WorkStopping:
			if w.Data.ID != ch.id {
				ids = append(ids, w.Data.ID)
			}
		}
	}
	return ids, nil
}

// unanswered shows the calls a turn ended without (an interrupt abandoned
// them) and forgets them.
func (ch *chat) unanswered() {
	for _, calls := range []map[string]api.Event{ch.calls, ch.mcpCalls, ch.customCalls} {
		for id, call := range calls {
			fmt.Fprintf(ch.out, "  ✗ %s → no result (the turn ended)\n", callSummary(call))
			delete(calls, id)
			delete(ch.asking, id)
		}
	}
}

// callSummary is a tool call in a few words: its name and input.
func callSummary(e api.Event) string {
	return e.Name + " " + oneLine(string(e.Input), 50)
}

// thinkingSummary is the start of an agent.thinking event's thinking.
func thinkingSummary(e api.Event) string {
	if len(e.Content) == 1 {
		var b struct {
			Thinking string `json:"thinking"`
		}
		raw, _ := json.Marshal(e.Content[0])
		json.Unmarshal(raw, &b)
		if b.Thinking != "" {
			return oneLine(b.Thinking, 100)
		}
	}
	return "(redacted)"
}

// oneLine is s on one line, cut to n characters.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ⏎ ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// followChat delivers the session's events, reconnecting where it left
// off, until the session is gone or ctx ends; then it closes events.
func followChat(ctx context.Context, c *client.Client, id string, st *client.EventStream, events chan<- api.Event) {
	defer close(events)
	for {
		for st.Next() {
			e := st.Event()
			select {
			case events <- e:
			case <-ctx.Done():
				st.Close()
				return
			}
			if e.Type == api.EventSessionStatusTerminated || e.Type == api.EventSessionDeleted {
				st.Close()
				return
			}
		}
		last := st.LastEventID()
		st.Close()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if st, err = c.StreamEvents(ctx, id, client.StreamEventsParams{LastEventID: last}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// finish takes the call id answers out of calls and returns its line: a
// mark for how it went, the call, and the start of its result; "" for a
// call not shown (answered before the chat followed the session).
func finish(calls map[string]api.Event, id string, result api.Event) string {
	call, ok := calls[id]
	if !ok {
		return ""
	}
	delete(calls, id)
	mark := "✓"
	if result.IsError != nil && *result.IsError {
		mark = "✗"
	}
	return fmt.Sprintf("  %s %s → %s", mark, callSummary(call), oneLine(result.Text(), 45))
}
