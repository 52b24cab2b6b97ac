package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// Event types memstore produces or accepts. Other types round-trip through
// Event unchanged.
const (
	EventUserMessage             = "user.message"
	EventUserInterrupt           = "user.interrupt"
	EventUserToolResult          = "user.tool_result"
	EventAgentMessage            = "agent.message"
	EventAgentToolUse            = "agent.tool_use"
	EventSessionStatusRunning    = "session.status_running"
	EventSessionStatusIdle       = "session.status_idle"
	EventSessionStatusTerminated = "session.status_terminated"
	// EventSessionStatusRescheduled is in the hosted API's union; memstore
	// never reschedules a session, so it is read, never written.
	EventSessionStatusRescheduled = "session.status_rescheduled"
	EventSessionError             = "session.error"
	EventSessionDeleted           = "session.deleted"
	EventUserToolConfirmation     = "user.tool_confirmation"
	EventAgentThinking            = "agent.thinking"
	EventSpanModelRequestStart    = "span.model_request_start"
	EventSpanModelRequestEnd      = "span.model_request_end"
)

// Permissions of an agent.tool_use (evaluated_permission) and verdicts of a
// user.tool_confirmation (result).
const (
	PermissionAllow = "allow"
	PermissionAsk   = "ask"
	PermissionDeny  = "deny"
)

// Stop reasons of session.status_idle.
const (
	StopEndTurn        = "end_turn"
	StopRequiresAction = "requires_action"
)

// Retry statuses of a session.error.
const (
	// RetryRetrying: the runtime retries on its own; nothing to do.
	RetryRetrying = "retrying"
	// RetryExhausted: this turn is over, the session is idle again and
	// accepts a new user.message.
	RetryExhausted = "exhausted"
	// RetryTerminal: the session terminates.
	RetryTerminal = "terminal"
)

// Event is one entry of a session's event log. The fields memstore reads or
// writes are typed; any other field is kept in Extra and written back as it
// came, so clients may send (and read) event types memstore does not model.
type Event struct {
	ID          string     `json:"id,omitempty"`
	Type        string     `json:"type"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`

	// Content: user.message, agent.message, user.tool_result.
	Content []ContentBlock `json:"content,omitempty"`
	// agent.tool_use: the call.
	Name                string          `json:"name,omitempty"`
	Input               json.RawMessage `json:"input,omitempty"`
	EvaluatedPermission string          `json:"evaluated_permission,omitempty"`
	// user.tool_result: the answer to the agent.tool_use with id ToolUseID
	// (also named by user.tool_confirmation). is_error also marks a failed
	// span.model_request_end.
	ToolUseID string `json:"tool_use_id,omitempty"`
	IsError   *bool  `json:"is_error,omitempty"`
	// user.custom_tool_result: the answer to the agent.custom_tool_use with
	// this id.
	CustomToolUseID string `json:"custom_tool_use_id,omitempty"`
	// agent.mcp_tool_use: the MCP server the call goes to;
	// agent.mcp_tool_result: the agent.mcp_tool_use it answers.
	MCPServerName string `json:"mcp_server_name,omitempty"`
	MCPToolUseID  string `json:"mcp_tool_use_id,omitempty"`
	// user.tool_confirmation: "allow" or "deny", with an optional message
	// for the model when denied.
	Result      string  `json:"result,omitempty"`
	DenyMessage *string `json:"deny_message,omitempty"`
	// span.model_request_end: the span.model_request_start it closes and
	// the request's token usage.
	ModelRequestStartID string      `json:"model_request_start_id,omitempty"`
	ModelUsage          *ModelUsage `json:"model_usage,omitempty"`
	// session.status_idle.
	StopReason  *StopReason     `json:"stop_reason,omitempty"`
	StopDetails json.RawMessage `json:"stop_details,omitempty"`
	// session.error.
	Error *SessionError `json:"error,omitempty"`

	Extra Extra `json:"-"`
}

var eventFieldNames = []string{"id", "type", "processed_at", "content", "name", "input", "evaluated_permission", "tool_use_id", "is_error", "custom_tool_use_id", "mcp_server_name", "mcp_tool_use_id",
	"result", "deny_message", "model_request_start_id", "model_usage", "stop_reason", "stop_details", "error"}

// ModelUsage is the token usage of one model request.
type ModelUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// MarshalJSON writes the typed fields that are set, then Extra. Blocks
// without Extra go in as plain structs: encoding/json scans what a
// Marshaler returns once more, and for a text of 1 KB that scan was two
// thirds of the event's encoding.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	return marshalWithExtra(struct {
		// These shadow plain's fields of the same names (encoding/json
		// writes the shallower), in plain's order: the output is plain's.
		ID          string     `json:"id,omitempty"`
		Type        string     `json:"type"`
		ProcessedAt *time.Time `json:"processed_at,omitempty"`
		Content     []any      `json:"content,omitempty"`
		plain
	}{e.ID, e.Type, e.ProcessedAt, blocksOut(e.Content), plain(e)}, e.Extra)
}

// blocksOut is content as Event.MarshalJSON encodes it: each block as
// ContentBlock.MarshalJSON writes it.
func blocksOut(blocks []ContentBlock) []any {
	if len(blocks) == 0 {
		return nil
	}
	out := make([]any, len(blocks))
	for i, c := range blocks {
		switch {
		case len(c.Extra) > 0:
			out[i] = c
		case c.Type == "text":
			out[i] = textBlock{c.Type, c.Text}
		default:
			out[i] = otherBlock{c.Type, c.Text}
		}
	}
	return out
}

// textBlock and otherBlock are a ContentBlock's typed fields: a text
// block always has its text, even when empty.
type (
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	otherBlock struct {
		Type string `json:"type"`
		Text string `json:"text,omitempty"`
	}
)

// UnmarshalJSON reads the typed fields and keeps the rest in Extra.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	var p plain
	extra, err := unmarshalWithExtra(b, &p, eventFieldNames...)
	if err != nil {
		return err
	}
	*e = Event(p)
	e.Extra = extra
	return nil
}

// Text joins the text blocks of the event's content.
func (e Event) Text() string {
	var parts []string
	for _, c := range e.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ContentBlock is one block of an event's content. Only text blocks are
// typed; others (images, documents) keep their fields in Extra.
type ContentBlock struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Extra Extra  `json:"-"`
}

// MarshalJSON writes Type and Text, then Extra.
func (c ContentBlock) MarshalJSON() ([]byte, error) {
	if c.Type == "text" {
		return marshalWithExtra(textBlock{c.Type, c.Text}, c.Extra)
	}
	return marshalWithExtra(otherBlock{c.Type, c.Text}, c.Extra)
}

// UnmarshalJSON reads Type and Text and keeps the rest in Extra.
func (c *ContentBlock) UnmarshalJSON(b []byte) error {
	type plain ContentBlock
	var p plain
	extra, err := unmarshalWithExtra(b, &p, "type", "text")
	if err != nil {
		return err
	}
	*c = ContentBlock(p)
	c.Extra = extra
	return nil
}

// TextContent is content made of one text block.
func TextContent(text string) []ContentBlock {
	return []ContentBlock{{Type: "text", Text: text}}
}

// UserMessage is a user.message event with text, ready to send.
func UserMessage(text string) Event {
	return Event{Type: EventUserMessage, Content: TextContent(text)}
}

// UserInterrupt is a user.interrupt event, ready to send.
func UserInterrupt() Event { return Event{Type: EventUserInterrupt} }

// UserToolResult is a user.tool_result event answering the tool call
// toolUseID, ready to send.
func UserToolResult(toolUseID, text string, isError bool) Event {
	return Event{Type: EventUserToolResult, ToolUseID: toolUseID, Content: TextContent(text), IsError: &isError}
}

// StopReason says why a session went idle. EventIDs names the events that
// need action when Type is requires_action.
type StopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// SessionError is the error of a session.error event.
type SessionError struct {
	Type        string       `json:"type"` // "unknown_error", …
	Message     string       `json:"message"`
	RetryStatus *RetryStatus `json:"retry_status,omitempty"`
	// MCPServerName names the server of an mcp_connection_failed_error or
	// mcp_authentication_failed_error.
	MCPServerName string `json:"mcp_server_name,omitempty"`
}

// RetryStatus says what a client should do after a session.error.
type RetryStatus struct {
	Type string `json:"type"`
}

// SendEventsRequest is the body of POST /v1/sessions/{id}/events.
type SendEventsRequest struct {
	Events []Event `json:"events"`
}

// SendEventsResponse echoes the stored events with their ids and times.
type SendEventsResponse struct {
	Data []Event `json:"data"`
}

// EventListParams are the query parameters of GET /v1/sessions/{id}/events.
type EventListParams struct {
	Limit int
	Page  string
	Order string   // "asc" (default, oldest first) or "desc"
	Types []string // only these event types
}

// Query encodes the parameters; zero values are left out.
func (p EventListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	if p.Order != "" {
		q.Set("order", p.Order)
	}
	for _, t := range p.Types {
		q.Add("types[]", t)
	}
	return q
}

// MaxEventListLimit caps limit on the event list, higher than other lists
// because the official worker reads a session's whole history in pages of
// 1,000.
const MaxEventListLimit = 1_000
