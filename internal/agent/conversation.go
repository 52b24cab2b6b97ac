package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// modelState is what the log says about a model-driven session.
type modelState struct {
	terminated bool
	pending    bool // user.messages wait for a turn
	cur        *modelTurn
	// contextTokens is the size of the conversation the model last saw:
	// the tokens of the latest request since the latest compaction (input,
	// cached or not, and output), 0 right after a compaction.
	contextTokens int64
}

// modelTurn is the turn being worked on.
type modelTurn struct {
	interrupted bool
	suspended   bool   // idle with requires_action
	openSpan    string // id of a span.model_request_start not yet ended
	// spanContext is contextTokens when the open span started: a request
	// started over the compaction threshold is the summarisation.
	spanContext int64
	requests    int // model requests started
	// compacted: the conversation was just compacted; the request it was
	// compacted for is due.
	compacted bool
	// continuing: the last reply was cut off at max_tokens and the model
	// is to go on; continuations counts those of the turn.
	continuing    bool
	continuations int
	uses          []*toolUse
}

// toolUse is an agent.tool_use of the turn's latest reply.
type toolUse struct {
	id         string
	name       string
	input      json.RawMessage
	custom     bool   // an agent.custom_tool_use, answered by the application
	mcp        bool   // an agent.mcp_tool_use, called by the server itself
	permission string // evaluated_permission
	verdict    string // result of its user.tool_confirmation
	answered   bool
}

// resolved says whether the call needs nothing more: answered by the
// worker, or denied (by policy or by the user), which the conversation
// answers itself.
func (u *toolUse) resolved() bool {
	return u.answered || u.permission == api.PermissionDeny || u.verdict == api.PermissionDeny
}

// scanModel folds the log into a modelState:
//   - user.message queues a turn; session.status_running starts one, or
//     resumes a suspended one;
//   - span.model_request_start opens a model request, its end closes it
//     and tells the conversation's size; the reply's agent.tool_use events
//     are the calls to resolve before the next request;
//   - agent.thread_context_compacted ends a summarisation request: the
//     request it made room for is due;
//   - a retrying session.error outside a request asks the model to go on
//     after a reply cut off at max_tokens;
//   - user.tool_result answers a call (user.custom_tool_result a custom one), user.tool_confirmation lets it run or
//     denies it;
//   - user.interrupt ends the turn and drops the queued messages;
//   - session.status_idle ends the turn, except requires_action, which
//     suspends it; session.status_terminated ends everything.
func scanModel(log []api.Event) modelState {
	var (
		st     modelState
		queued int
		// latest is where the open turn's latest reply begins: only its
		// calls are resolved, so they are read after the scan, from there
		// on (taking every call the log ever held was an allocation per
		// past call on every step of a long session).
		latest int
		// open is what cur points to: a scan opens one turn at a time.
		open modelTurn
	)
	for i := range log {
		e, t := &log[i], st.cur
		switch e.Type {
		case api.EventUserMessage:
			queued++
		case api.EventUserInterrupt:
			if t != nil {
				t.interrupted = true
			}
			queued = 0
		case api.EventSessionStatusRunning:
			switch {
			case t != nil && t.suspended:
				t.suspended = false
			case t == nil && queued > 0:
				open = modelTurn{}
				st.cur = &open
				latest = i + 1
				queued--
			}
		case api.EventSpanModelRequestStart:
			if t != nil {
				t.openSpan, t.continuing, t.compacted = e.ID, false, false
				t.spanContext = st.contextTokens
				t.requests++
				latest = i + 1
			}
		case api.EventSpanModelRequestEnd:
			if t != nil && t.openSpan == e.ModelRequestStartID {
				t.openSpan = ""
			}
			if u := e.ModelUsage; u != nil && (e.IsError == nil || !*e.IsError) {
				st.contextTokens = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens
			}
		case api.EventAgentThreadContextCompacted:
			st.contextTokens = 0
			if t != nil {
				t.compacted = true
			}
		case api.EventSessionError:
			if t != nil && t.openSpan == "" && isContinuation(*e) {
				t.continuing = true
				t.continuations++
			}
		case api.EventSessionStatusIdle:
			if t != nil && e.StopReason != nil && e.StopReason.Type == api.StopRequiresAction {
				t.suspended = true
			} else {
				st.cur = nil
			}
		case api.EventSessionStatusTerminated:
			st.terminated = true
			st.cur = nil
		}
	}
	st.pending = queued > 0
	if st.cur != nil {
		st.cur.uses = latestCalls(log[latest:])
	}
	return st
}

// latestCalls reads the calls of the open turn's latest reply (the events
// from its model request on) and what resolved each: a tool result, or a
// confirmation (the first one counts).
func latestCalls(reply []api.Event) []*toolUse {
	var (
		uses []*toolUse
		byID map[string]*toolUse // read while nil: no call yet
	)
	for i := range reply {
		e := &reply[i]
		var u *toolUse
		switch e.Type {
		case api.EventAgentToolUse, api.EventAgentCustomToolUse:
			u = &toolUse{id: e.ID, name: e.Name, input: e.Input, permission: e.EvaluatedPermission, custom: e.Type == api.EventAgentCustomToolUse}
		case api.EventAgentMCPToolUse:
			u = &toolUse{id: e.ID, permission: e.EvaluatedPermission, mcp: true}
		case api.EventUserToolResult:
			if u := byID[e.ToolUseID]; u != nil {
				u.answered = true
			}
		case api.EventUserCustomToolResult:
			if u := byID[e.CustomToolUseID]; u != nil {
				u.answered = true
			}
		case api.EventAgentMCPToolResult:
			if u := byID[e.MCPToolUseID]; u != nil {
				u.answered = true
			}
		case api.EventUserToolConfirmation:
			if u := byID[e.ToolUseID]; u != nil && u.verdict == "" {
				u.verdict = e.Result
			}
		}
		if u != nil {
			if byID == nil {
				byID = map[string]*toolUse{}
			}
			byID[e.ID] = u
			uses = append(uses, u)
		}
	}
	return uses
}

// isContinuation says whether a session.error outside a model request is
// the runtime's note that it asks the model to go on: the only retrying
// error it records between requests.
func isContinuation(e api.Event) bool {
	return e.Error != nil && e.Error.RetryStatus != nil && e.Error.RetryStatus.Type == api.RetryRetrying
}

// toolPermissions reads the agent's agent_toolset_20260401 entry: each
// enabled tool and the permission its policy evaluates to ("allow" for
// always_allow, "ask" for always_ask). An agent without the entry has no
// tools.
func toolPermissions(tools []json.RawMessage) map[string]string {
	type config struct {
		Name             string `json:"name"`
		Enabled          *bool  `json:"enabled"`
		PermissionPolicy *struct {
			Type string `json:"type"`
		} `json:"permission_policy"`
	}
	out := map[string]string{}
	for _, raw := range tools {
		var ts struct {
			Type          string   `json:"type"`
			DefaultConfig config   `json:"default_config"`
			Configs       []config `json:"configs"`
		}
		if json.Unmarshal(raw, &ts) != nil || ts.Type != api.AgentToolsetType {
			continue
		}
		for _, d := range api.AgentTools() {
			c := ts.DefaultConfig
			for _, o := range ts.Configs {
				if o.Name == d.Name {
					if o.Enabled != nil {
						c.Enabled = o.Enabled
					}
					if o.PermissionPolicy != nil {
						c.PermissionPolicy = o.PermissionPolicy
					}
				}
			}
			if c.Enabled != nil && !*c.Enabled {
				continue
			}
			out[d.Name] = api.PermissionAllow
			if c.PermissionPolicy != nil && c.PermissionPolicy.Type == "always_ask" {
				out[d.Name] = api.PermissionAsk
			}
		}
	}
	return out
}

// buildRequest is the Messages API request for the session's next reply:
// the system prompt, the enabled tools, and the conversation so far, with
// prompt-caching breakpoints after each (so a long session pays for its
// prefix once).
func (c *Claude) buildRequest(v storage.SessionView) (anthropic.MessageNewParams, error) {
	settings, err := v.Session.Agent.Model.Settings()
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(v.Session.Agent.Model.ID),
		MaxTokens: c.cfg.MaxTokens,
		Messages:  conversation(v.Log),
	}
	applyModelSettings(&p, settings, c.cfg.ThinkingBudget)
	if s := v.Session.Agent.System; s != "" {
		p.System = append(p.System, anthropic.TextBlockParam{Text: s})
	}
	if s := skillsSection(v.Session.Agent.Skills); s != "" {
		p.System = append(p.System, anthropic.TextBlockParam{Text: s})
	}
	p.System = append(p.System, anthropic.TextBlockParam{Text: memorySection(v.Session.Resources)})
	p.System[len(p.System)-1].CacheControl = anthropic.NewCacheControlEphemeralParam()

	perms := toolPermissions(v.Session.Agent.Tools)
	for _, d := range api.AgentTools() {
		if _, ok := perms[d.Name]; !ok {
			continue
		}
		props := d.InputSchema["properties"]
		required, _ := d.InputSchema["required"].([]string)
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: d.Name, Description: anthropic.String(d.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: props, Required: required},
		}})
	}
	for _, t := range customTools(v.Session.Agent.Tools, perms) {
		p.Tools = append(p.Tools, t.declaration())
	}
	if c.offersMemorySearch(v, perms) {
		p.Tools = append(p.Tools, memorySearchDeclaration())
	}
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if n := len(p.Messages); n > 0 {
		blocks := *content(p.Messages[n-1])
		if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	return p, nil
}

// memorySection tells the model about its memory stores (SPEC §4) and its
// working directory.
func memorySection(res []api.SessionResource) string {
	var b strings.Builder
	if len(res) > 0 {
		b.WriteString("# Memory\n\nYou have memory stores: folders of text files that outlive this session and that other sessions share. Read them before you start, and keep what is worth remembering in them with your file tools (bash works too, but only read, write and edit are checked against read-only stores).\n")
		for _, r := range res {
			access := "read and write"
			if r.Access == api.AccessReadOnly {
				access = "read only"
			}
			fmt.Fprintf(&b, "\n- %s, mounted at %s (%s)", r.Name, r.MountPath, access)
			if r.Description != "" {
				fmt.Fprintf(&b, "\n  Description: %s", r.Description)
			}
			if r.Instructions != nil && *r.Instructions != "" {
				fmt.Fprintf(&b, "\n  Instructions: %s", *r.Instructions)
			}
		}
		b.WriteString("\n\n")
	}
	b.WriteString("Your tools run in a working directory of this session: relative paths resolve against it, and bash starts in it. It is scratch space; only the memory stores keep files after the session.")
	return b.String()
}

// conversation rebuilds the messages of the session from its log: the
// latest compaction's summary, then user messages, the agent's text and
// tool uses, and the tool results after it. Every
// tool use gets a result right after its reply, as the API requires: a
// denied call gets the user's refusal, and a call abandoned by an
// interrupt (or never answered) gets an error saying so.
func conversation(log []api.Event) []anthropic.MessageParam {
	var (
		msgs    []anthropic.MessageParam
		open    []string // tool uses of the last reply awaiting a result
		inSpan  bool     // between a model request's start and its end
		results = map[string]anthropic.ContentBlockParamUnion{}
		called  = map[string]bool{} // tool uses in the conversation
	)
	// add appends blocks to the last message when it has the same role,
	// since the API wants the roles to alternate.
	add := func(assistant bool, blocks ...anthropic.ContentBlockParamUnion) {
		if n := len(msgs); n > 0 && (msgs[n-1].OfAssistant != nil) == assistant {
			c := content(msgs[n-1])
			*c = append(*c, blocks...)
			return
		}
		if assistant {
			msgs = append(msgs, anthropic.NewAssistantMessage(blocks...))
		} else {
			msgs = append(msgs, anthropic.NewUserMessage(blocks...))
		}
	}
	// closeReply gives each open tool use its result, in call order.
	closeReply := func(missing string) {
		for _, id := range open {
			r, ok := results[id]
			if !ok {
				r = anthropic.NewToolResultBlock(id, missing, true)
			}
			add(false, r)
		}
		open = nil
	}
	summary, log := sinceCompaction(log)
	if summary != "" {
		// The summary is the stable start of every request until the next
		// compaction: a cache breakpoint keeps it read from the cache.
		b := anthropic.NewTextBlock(summaryPreamble + summary)
		b.OfText.CacheControl = anthropic.NewCacheControlEphemeralParam()
		msgs = append(msgs, anthropic.NewUserMessage(b))
	}
	for _, e := range log {
		switch e.Type {
		case api.EventUserMessage:
			closeReply("This call was abandoned: the user interrupted the turn before it returned.")
			var blocks []anthropic.ContentBlockParamUnion
			for _, c := range e.Content {
				if c.Type == "text" {
					blocks = append(blocks, anthropic.NewTextBlock(c.Text))
				}
			}
			if len(blocks) > 0 {
				add(false, blocks...)
			}
		case api.EventAgentMessage:
			closeReply("This call was abandoned: the user interrupted the turn before it returned.")
			add(true, anthropic.NewTextBlock(e.Text()))
		case api.EventAgentThinking:
			closeReply("This call was abandoned: the user interrupted the turn before it returned.")
			if b, ok := thinkingOf(e); ok {
				add(true, b)
			}
		case api.EventAgentToolUse, api.EventAgentCustomToolUse, api.EventAgentMCPToolUse:
			if e.Type == api.EventAgentMCPToolUse {
				e.Name = mcpModelName(e.MCPServerName, e.Name)
			}
			if len(open) > 0 && msgs[len(msgs)-1].OfAssistant == nil {
				closeReply("This call was abandoned: the user interrupted the turn before it returned.")
			}
			var input any = json.RawMessage(e.Input)
			if len(e.Input) == 0 {
				input = map[string]any{}
			}
			add(true, anthropic.NewToolUseBlock(e.ID, input, e.Name))
			open = append(open, e.ID)
			called[e.ID] = true
			if e.EvaluatedPermission == api.PermissionDeny {
				results[e.ID] = anthropic.NewToolResultBlock(e.ID, fmt.Sprintf("%s is not enabled for this agent; use one of the tools you were given.", e.Name), true)
			}
		case api.EventUserToolResult:
			if !called[e.ToolUseID] {
				add(false, earlierResult(e))
				break
			}
			if _, done := results[e.ToolUseID]; !done {
				results[e.ToolUseID] = toolResult(e.ToolUseID, e)
			}
		case api.EventUserCustomToolResult:
			if !called[e.CustomToolUseID] {
				e.ToolUseID = e.CustomToolUseID
				add(false, earlierResult(e))
				break
			}
			if _, done := results[e.CustomToolUseID]; !done {
				results[e.CustomToolUseID] = toolResult(e.CustomToolUseID, e)
			}
		case api.EventAgentMCPToolResult:
			if _, done := results[e.MCPToolUseID]; !done && called[e.MCPToolUseID] {
				results[e.MCPToolUseID] = toolResult(e.MCPToolUseID, e)
			}
		case api.EventUserToolConfirmation:
			if _, done := results[e.ToolUseID]; !done && e.Result == api.PermissionDeny {
				text := "The user denied this tool call."
				if e.DenyMessage != nil && *e.DenyMessage != "" {
					text += " Their message: " + *e.DenyMessage
				}
				results[e.ToolUseID] = anthropic.NewToolResultBlock(e.ToolUseID, text, true)
			}
		case api.EventSpanModelRequestStart:
			closeReply("This call never returned a result.")
			inSpan = true
		case api.EventSpanModelRequestEnd:
			inSpan = false
		case api.EventSessionError:
			if !inSpan && isContinuation(e) {
				add(false, anthropic.NewTextBlock("Your reply was cut off at the max_tokens limit. Continue exactly where it stopped, without repeating what you already wrote; do less in each step if you can."))
			}
		}
	}
	closeReply("This call was abandoned: the user interrupted the turn before it returned.")
	return msgs
}

// toolResult is the tool_result block of a user.tool_result or
// user.custom_tool_result: its text, marked when it is an error.
func toolResult(id string, e api.Event) anthropic.ContentBlockParamUnion {
	return anthropic.NewToolResultBlock(id, e.Text(), e.IsError != nil && *e.IsError)
}

// thinkingBlock is the one content block of an agent.thinking event: the
// model's thinking with its signature, or a redacted_thinking block's
// opaque data. It is kept as the API sent it, since the API wants it back,
// unchanged, in the requests that follow while a tool loop goes on.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// thinkingEvent records a thinking or redacted_thinking block of a reply.
func thinkingEvent(b anthropic.ContentBlockUnion) api.Event {
	raw, _ := json.Marshal(thinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature, Data: b.Data})
	var c api.ContentBlock
	json.Unmarshal(raw, &c)
	return api.Event{Type: api.EventAgentThinking, Content: []api.ContentBlock{c}}
}

// thinkingOf is the block an agent.thinking event recorded, for the next
// request; an event without one (from elsewhere) adds nothing.
func thinkingOf(e api.Event) (anthropic.ContentBlockParamUnion, bool) {
	if len(e.Content) != 1 {
		return anthropic.ContentBlockParamUnion{}, false
	}
	raw, _ := json.Marshal(e.Content[0])
	var b thinkingBlock
	json.Unmarshal(raw, &b)
	switch {
	case b.Type == "thinking" && b.Signature != "":
		return anthropic.NewThinkingBlock(b.Signature, b.Thinking), true
	case b.Type == "redacted_thinking" && b.Data != "":
		return anthropic.NewRedactedThinkingBlock(b.Data), true
	}
	return anthropic.ContentBlockParamUnion{}, false
}

// content is the blocks of a user or assistant message.
func content(m anthropic.MessageParam) *[]anthropic.ContentBlockParamUnion {
	if m.OfAssistant != nil {
		return &m.OfAssistant.Content
	}
	return &m.OfUser.Content
}
