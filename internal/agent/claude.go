package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// The server's variables for the model API key, in the order it reads them.
const (
	ModelKeyVar         = "MEMSTORE_MODEL_API_KEY"
	FallbackModelKeyVar = "ANTHROPIC_API_KEY"
)

// ClaudeConfig configures the Claude runtime. Zero values take the defaults.
type ClaudeConfig struct {
	// BaseURL is the Messages API to call: "" is Anthropic's; any
	// Anthropic-compatible endpoint (a proxy, a gateway) works.
	BaseURL string
	// APIKey is the upstream key; "" makes every model turn end with a
	// session.error that says which variable to set.
	APIKey string
	// HTTPClient carries the calls (default http.DefaultClient).
	HTTPClient *http.Client
	// MaxTokens caps each reply (default DefaultMaxTokens).
	MaxTokens int64
	// MaxContinuations bounds how many times one turn asks the model to
	// go on after a reply cut off at MaxTokens (default 3; negative: never).
	MaxContinuations int
	// ThinkingBudget turns budgeted extended thinking on, for the models
	// that take a budget, with this many tokens of each reply's MaxTokens
	// for it; 0 leaves it off. Models made for adaptive thinking always
	// think adaptively (see adaptiveThinking). Thinking blocks are kept
	// either way: a proxy may turn thinking on by itself.
	ThinkingBudget int64
	// ContextWindow is the model's context window in tokens (default
	// DefaultContextWindow): once a request's tokens pass three quarters of
	// it, the conversation is compacted before the next request.
	ContextWindow int64
	// MaxAttempts bounds the tries of one model request when the upstream
	// answers 429, 529, 5xx or cannot be reached (default 5).
	MaxAttempts int
	// Sleep waits between tries, or returns ctx's error when it ends first
	// (default a timer). Tests pass one that records and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Search answers the memory_search tool (memorysearch.go); nil leaves
	// the tool out.
	Search MemorySearcher
	// MCP configures the calls to agents' MCP servers.
	MCP MCPConfig
}

// DefaultMaxTokens caps a reply unless the server says otherwise.
const DefaultMaxTokens = 8192

// DefaultContextWindow is the context window of the Claude models without
// a long-context beta.
const DefaultContextWindow = 200_000

// Backoff bounds: the wait doubles from the first to the cap, unless the
// upstream's retry-after says otherwise (honoured up to maxRetryAfter).
const (
	firstBackoff  = time.Second
	maxBackoff    = 30 * time.Second
	maxRetryAfter = 2 * time.Minute
)

// Claude is the runtime of every model other than "scripted": it calls the
// Messages API through the official SDK, one streamed request per step
// (streaming is what the API asks of long replies), and turns the reply
// into events — text into agent.message, tool uses into
// agent.tool_use for the worker — until the model ends its turn.
type Claude struct {
	cfg    ClaudeConfig
	client anthropic.Client
	// mcpLists keeps each MCP server's tool list for a while (mcp.go).
	mcpLists mcpListCache
}

// NewClaude returns the Claude runtime for cfg.
func NewClaude(cfg ClaudeConfig) *Claude {
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxContinuations == 0 {
		cfg.MaxContinuations = 3
	}
	if cfg.ContextWindow <= 0 {
		cfg.ContextWindow = DefaultContextWindow
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	cfg.MCP = cfg.MCP.withDefaults()
	opts := []option.RequestOption{
		// The server resolves its own key and URL; the SDK must not pick
		// up the environment's (ANTHROPIC_AUTH_TOKEN, profiles) on its own.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		// One layer owns retries: this runtime, which shows each one as a
		// session.error.
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Claude{cfg: cfg, client: anthropic.NewClient(opts...)}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next implements Runtime.
func (c *Claude) Next(v storage.SessionView) Step {
	st := scanModel(v.Log)
	if st.terminated {
		return Step{}
	}
	t := st.cur
	if t == nil {
		if st.pending {
			return Step{Emit: []api.Event{{Type: api.EventSessionStatusRunning}}}
		}
		return Step{}
	}
	if t.interrupted {
		var out []api.Event
		if t.openSpan != "" {
			out = append(out, spanEnd(t.openSpan, true, api.ModelUsage{}))
		}
		return Step{Emit: append(out, idle(api.StopEndTurn))}
	}
	if t.openSpan != "" {
		start := t.openSpan
		return Step{Key: "model_request " + start, Work: func(ctx context.Context, emit Emitter) error {
			return c.request(ctx, v, start, emit)
		}}
	}
	if u, ok := c.pendingSearch(v, t); ok {
		return Step{Key: "memory_search " + u.id, Work: func(ctx context.Context, emit Emitter) error {
			return c.answerSearch(ctx, v, u, emit)
		}}
	}
	// asking: calls awaiting the user's confirmation, or the application's
	// answer to a custom tool; outstanding: calls the worker runs.
	var asking, outstanding, mcpDue []string
	for _, u := range t.uses {
		switch {
		case u.resolved():
		case u.mcp && (u.permission != api.PermissionAsk || u.verdict != ""):
			mcpDue = append(mcpDue, u.id)
		case u.custom, u.permission == api.PermissionAsk && u.verdict == "":
			asking = append(asking, u.id)
		default:
			outstanding = append(outstanding, u.id)
		}
	}
	switch {
	case len(mcpDue) > 0 && !t.suspended:
		// The server calls MCP tools itself, one at a time, while the
		// worker runs the built-in ones.
		id := mcpDue[0]
		return Step{Key: "mcp_call " + id, Work: func(ctx context.Context, emit Emitter) error {
			return c.callMCP(ctx, viewLike{log: v.Log, agent: v.Session.Agent, vaultIDs: v.Session.VaultIDs}, id, emit)
		}}
	case len(asking) > 0:
		if t.suspended {
			return Step{}
		}
		e := idle(api.StopRequiresAction)
		e.StopReason.EventIDs = asking
		return Step{Emit: []api.Event{e}}
	case t.suspended:
		if len(outstanding) == 0 || v.WorkLive {
			// Confirmed, or answered, or a worker is back: carry on.
			return Step{Emit: []api.Event{{Type: api.EventSessionStatusRunning}}}
		}
		return Step{}
	case len(outstanding) > 0:
		if !v.WorkLive {
			// The work item stopped with calls out: nobody answers them
			// until a worker is back.
			e := idle(api.StopRequiresAction)
			e.StopReason.EventIDs = outstanding
			return Step{Emit: []api.Event{e}}
		}
		return Step{}
	case t.requests > 0 && len(t.uses) == 0 && !t.continuing && !t.compacted:
		// A reply without tool uses always ends its turn, or asks to go on,
		// in the same append; this only guards against a log that says
		// otherwise.
		return Step{Emit: []api.Event{idle(api.StopEndTurn)}}
	case c.cfg.APIKey == "":
		return Step{Emit: []api.Event{sessionError("unknown_error", api.RetryExhausted,
			fmt.Sprintf("this server has no key for the model API, so model %q cannot run: start the server with %s (or %s) set to an Anthropic API key, or use model %q",
				v.Session.Agent.Model.ID, ModelKeyVar, FallbackModelKeyVar, api.ScriptedModel)), idle(api.StopEndTurn)}}
	default:
		return Step{Emit: []api.Event{{Type: api.EventSpanModelRequestStart}}}
	}
}

// request makes the model request that span start opened, retrying what
// may pass, and appends its outcome with the span's end.
func (c *Claude) request(ctx context.Context, v storage.SessionView, start string, emit Emitter) error {
	params, err := c.buildRequest(v)
	if err != nil {
		return emit(sessionError("model_request_failed_error", api.RetryExhausted, err.Error()), spanEnd(start, true, api.ModelUsage{}), idle(api.StopEndTurn))
	}
	tools, failures := c.mcpTools(ctx, v.Session.Agent, v.Session.VaultIDs)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, f := range failures {
		if err := emit(f.event()); err != nil {
			return err
		}
	}
	offerMCP(&params, tools)
	reply := func(msg *anthropic.Message, start string, v storage.SessionView) []api.Event {
		return mcpUses(c.replyEvents(msg, start, v), tools)
	}
	if scanModel(v.Log).cur.spanContext >= c.compactAt() {
		params, reply = summarisation(params), compactionEvents
	}
	for attempt := 1; ; attempt++ {
		msg, err := c.stream(ctx, params)
		if err == nil {
			return emit(reply(msg, start, v)...)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kind, text, wait, retry := classify(err, v.Session.Agent.Model.ID)
		if !retry || attempt == c.cfg.MaxAttempts {
			if retry {
				text = fmt.Sprintf("%s; gave up after %d attempts, so send the message again later", text, attempt)
			}
			return emit(sessionError(kind, api.RetryExhausted, text), spanEnd(start, true, api.ModelUsage{}), idle(api.StopEndTurn))
		}
		if wait == 0 {
			wait = min(firstBackoff<<(attempt-1), maxBackoff)
		}
		if err := emit(sessionError(kind, api.RetryRetrying, fmt.Sprintf("%s; retrying in %s (attempt %d of %d)", text, wait, attempt+1, c.cfg.MaxAttempts))); err != nil {
			return err
		}
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// errCutShort is a stream that ended before its message_stop.
var errCutShort = errors.New("the reply's stream ended before message_stop")

// stream makes one streaming request and accumulates its reply. A stream
// that fails or ends part way is an error like a failed request: the
// partial reply is dropped and the whole request made again.
func (c *Claude) stream(ctx context.Context, params anthropic.MessageNewParams) (*anthropic.Message, error) {
	s := c.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		e := s.Current()
		if err := msg.Accumulate(e); err != nil {
			return nil, err
		}
		if e.Type == "message_stop" {
			return &msg, nil
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return nil, errCutShort
}

// streamErrorStatus is the status an error type stands for: an error event
// in the middle of a stream comes after the 200, so only its type tells
// whether trying again may help.
var streamErrorStatus = map[anthropic.ErrorType]int{
	anthropic.ErrorTypeRateLimitError:      http.StatusTooManyRequests,
	anthropic.ErrorTypeOverloadedError:     529,
	anthropic.ErrorTypeAPIError:            http.StatusInternalServerError,
	anthropic.ErrorTypeTimeoutError:        http.StatusGatewayTimeout,
	anthropic.ErrorTypeInvalidRequestError: http.StatusBadRequest,
	anthropic.ErrorTypeAuthenticationError: http.StatusUnauthorized,
	anthropic.ErrorTypePermissionError:     http.StatusForbidden,
	anthropic.ErrorTypeNotFoundError:       http.StatusNotFound,
}

// classify turns a failed request into a session.error: its type, a
// message that says what to fix, how long the upstream asked to wait, and
// whether trying again may help.
func classify(err error, model string) (kind, text string, wait time.Duration, retry bool) {
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		return "model_request_failed_error", fmt.Sprintf("the model API call failed (%v); check the server's --model-base-url and its network", err), 0, true
	}
	status := ae.StatusCode
	if status < 400 {
		status = streamErrorStatus[ae.Type()]
		if status == 0 {
			status = http.StatusInternalServerError
		}
	}
	detail := ae.Message
	if detail == "" {
		detail = http.StatusText(ae.StatusCode)
	}
	if ae.Response != nil {
		wait = retryAfter(ae.Response.Header)
	}
	switch s := status; {
	case s == http.StatusTooManyRequests:
		return "model_rate_limited_error", "the model API is rate limiting this server's key (429: " + detail + ")", wait, true
	case s == 529:
		return "model_overloaded_error", "the model API is overloaded (529: " + detail + ")", wait, true
	case s >= 500 || s == http.StatusRequestTimeout || s == http.StatusConflict:
		return "model_request_failed_error", fmt.Sprintf("the model API failed (%d: %s)", s, detail), wait, true
	case s == http.StatusUnauthorized:
		return "model_request_failed_error", fmt.Sprintf("the model API refused the server's key (401: %s); set %s (or %s) to a valid key and restart the server", detail, ModelKeyVar, FallbackModelKeyVar), 0, false
	case s == http.StatusForbidden:
		return "model_request_failed_error", fmt.Sprintf("the server's key may not use model %q (403: %s); check the key's permissions", model, detail), 0, false
	case s == http.StatusNotFound:
		return "model_request_failed_error", fmt.Sprintf("the model API does not know model %q (404: %s); create an agent with a valid model id, e.g. claude-sonnet-4-5", model, detail), 0, false
	case s == http.StatusRequestEntityTooLarge || strings.Contains(detail, "prompt is too long"):
		return "model_request_failed_error", fmt.Sprintf("the conversation is too long for model %q (%d: %s); start a new session", model, s, detail), 0, false
	default:
		return "model_request_failed_error", fmt.Sprintf("the model API refused the request (%d: %s)", s, detail), 0, false
	}
}

// retryAfter reads retry-after-ms or retry-after (seconds or an HTTP date).
func retryAfter(h http.Header) time.Duration {
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if s, err := strconv.ParseFloat(h.Get("retry-after"), 64); err == nil {
		d = time.Duration(s * float64(time.Second))
	} else if t, err := http.ParseTime(h.Get("retry-after")); err == nil {
		d = time.Until(t)
	}
	return max(0, min(d, maxRetryAfter))
}

// replyEvents turns a reply into the events that record it, ending with
// the span's end and, unless the model asked for tools, the turn's end —
// or, for a reply cut off at max_tokens, a request to go on while the turn
// has continuations left.
func (c *Claude) replyEvents(msg *anthropic.Message, start string, v storage.SessionView) []api.Event {
	perms := toolPermissions(v.Session.Agent.Tools)
	custom := map[string]bool{}
	for _, t := range customTools(v.Session.Agent.Tools, perms) {
		custom[t.Name] = true
	}
	cut := msg.StopReason == anthropic.StopReasonMaxTokens
	var (
		out  []api.Event
		uses int
	)
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				out = append(out, api.Event{Type: api.EventAgentMessage, Content: api.TextContent(b.Text)})
			}
		case "thinking", "redacted_thinking":
			if b.Type == "thinking" && b.Signature == "" {
				continue // cut off before its signature: the API would refuse it back
			}
			out = append(out, thinkingEvent(b))
		case "tool_use":
			if cut && i == len(msg.Content)-1 {
				continue // cut off mid-input: it cannot run
			}
			perm, ok := perms[b.Name]
			if !ok {
				perm = api.PermissionDeny
			}
			if b.Name == memorySearchTool && c.offersMemorySearch(v, perms) {
				perm = api.PermissionAllow
			}
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			if custom[b.Name] {
				out = append(out, api.Event{Type: api.EventAgentCustomToolUse, Name: b.Name, Input: input})
				uses++
				continue
			}
			out = append(out, api.Event{Type: api.EventAgentToolUse, Name: b.Name, Input: input, EvaluatedPermission: perm})
			uses++
		}
	}
	u := msg.Usage
	out = append(out, spanEnd(start, false, api.ModelUsage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
	}))
	switch {
	case uses > 0:
	case cut:
		if done := scanModel(v.Log).cur.continuations; done < c.cfg.MaxContinuations {
			out = append(out, sessionError("model_request_failed_error", api.RetryRetrying,
				fmt.Sprintf("the model's reply reached max_tokens (%d) and was cut off; asking it to continue (continuation %d of %d)",
					c.cfg.MaxTokens, done+1, c.cfg.MaxContinuations)))
			break
		}
		out = append(out, sessionError("model_request_failed_error", api.RetryExhausted,
			fmt.Sprintf("the model's reply reached max_tokens (%d) and was cut off, %d continuations did not finish it, so the turn stops here; send a message asking for less in one step (one file at a time), or to continue, or give the server a higher --model-max-tokens", c.cfg.MaxTokens, max(c.cfg.MaxContinuations, 0))), idle(api.StopEndTurn))
	default:
		out = append(out, idle(api.StopEndTurn))
	}
	return out
}

func spanEnd(start string, failed bool, u api.ModelUsage) api.Event {
	return api.Event{Type: api.EventSpanModelRequestEnd, ModelRequestStartID: start, IsError: &failed, ModelUsage: &u}
}

func sessionError(kind, retry, message string) api.Event {
	return api.Event{Type: api.EventSessionError, Error: &api.SessionError{Type: kind, Message: message, RetryStatus: &api.RetryStatus{Type: retry}}}
}
