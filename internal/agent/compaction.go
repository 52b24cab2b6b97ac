package agent

import (
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// A long session outgrows the model's context window. Before that, the
// runtime compacts: the request that would come next is made instead with
// an instruction to summarise the conversation so far (the same request,
// so its prefix is read from the prompt cache), and the summary is
// recorded as agent.thread_context_compacted. From then on the
// conversation sent to the model is the summary followed by the events
// after it; the log keeps every event. The Messages API's server-side
// context management is a beta the SDK's stable params do not model, so
// summarising is the one way, for every model.

// compactAt is the size of a request (context tokens) past which the next
// request is a summarisation: three quarters of the window, and room for
// two replies in any case (the summary's and the next).
func (c *Claude) compactAt() int64 {
	return min(c.cfg.ContextWindow*3/4, c.cfg.ContextWindow-2*c.cfg.MaxTokens)
}

// summaryInstruction asks for the summary; it says what the model must keep
// to carry on from the summary alone.
const summaryInstruction = "The conversation is about to outgrow your context window, so it will be replaced by your summary of it. " +
	"Write that summary now, without calling tools: the user's requests (the latest word for word), what you did and found " +
	"(file paths, decisions, tool results that still matter), and what is left to do. Write only the summary."

// summaryPreamble introduces the summary where the conversation restarts.
const summaryPreamble = "Earlier turns of this session were compacted to fit your context window. Your summary of them:\n\n"

// summarisation turns the next request into the request for a summary.
func summarisation(p anthropic.MessageNewParams) anthropic.MessageNewParams {
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	ask := anthropic.NewTextBlock(summaryInstruction)
	if n := len(p.Messages); n > 0 && p.Messages[n-1].OfAssistant == nil {
		c := content(p.Messages[n-1])
		*c = append(*c, ask)
	} else {
		p.Messages = append(p.Messages, anthropic.NewUserMessage(ask))
	}
	return p
}

// compactionEvents records a summarisation's reply: the span's end (its
// usage counts like any request's), then the summary. A reply without
// text cannot stand for the conversation, so the turn ends with an error
// and the conversation stays as it was.
func compactionEvents(msg *anthropic.Message, start string, _ storage.SessionView) []api.Event {
	var parts []string
	for _, b := range msg.Content {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	u := msg.Usage
	end := spanEnd(start, false, api.ModelUsage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
	})
	if len(parts) == 0 {
		return []api.Event{end, sessionError("model_request_failed_error", api.RetryExhausted,
			"the conversation is near the model's context window and the model wrote no summary to compact it with; send a message to try again, or start a new session"),
			idle(api.StopEndTurn)}
	}
	return []api.Event{end, {Type: api.EventAgentThreadContextCompacted, Content: api.TextContent(strings.Join(parts, "\n\n"))}}
}

// sinceCompaction is what the conversation is rebuilt from: the summary
// of the latest compaction ("" when there was none), then the inputs that
// were waiting for the request it made room for (the turn's user message,
// the results of the latest calls: kept word for word, the model needs
// them exact), then everything after it.
func sinceCompaction(log []api.Event) (summary string, rest []api.Event) {
	k := len(log) - 1
	for k >= 0 && log[k].Type != api.EventAgentThreadContextCompacted {
		k--
	}
	if k < 0 {
		return "", log
	}
	start := k - 1 // the summarisation's span
	for start >= 0 && log[start].Type != api.EventSpanModelRequestStart {
		start--
	}
	reply := start - 1 // the end of the model's latest reply before it
	for reply >= 0 && log[reply].Type != api.EventSpanModelRequestEnd && log[reply].Type != api.EventAgentThreadContextCompacted {
		reply--
	}
	for _, e := range log[reply+1 : max(start, 0)] {
		switch e.Type {
		case api.EventUserMessage, api.EventUserToolResult, api.EventUserCustomToolResult:
			rest = append(rest, e)
		}
	}
	return log[k].Text(), append(rest, log[k+1:]...)
}

// earlierResult is the text that stands for the result of a call the
// summary replaced: the call's tool_use block is gone, so a tool_result
// block would name nothing.
func earlierResult(e api.Event) anthropic.ContentBlockParamUnion {
	what := "result"
	if e.IsError != nil && *e.IsError {
		what = "error"
	}
	return anthropic.NewTextBlock(fmt.Sprintf("The %s of your tool call %s (summarised above):\n%s", what, e.ToolUseID, e.Text()))
}
