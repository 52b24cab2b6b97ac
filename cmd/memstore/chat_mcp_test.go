package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/memstore/memstore/api"
)

// The chat shows an MCP call on one line with its result, names the
// server, asks about an always_ask one, and shows a compaction on a line
// of its own.
func TestChatShowsMCPCallsAndCompactions(t *testing.T) {
	var out bytes.Buffer
	ch := &chat{out: &out, calls: map[string]api.Event{}, asking: map[string]api.Event{}, mcpCalls: map[string]api.Event{}}
	no, yes := false, true
	for _, e := range []api.Event{
		{ID: "sevt_1", Type: api.EventAgentMCPToolUse, MCPServerName: "docs", Name: "lookup", Input: json.RawMessage(`{"query":"memstore"}`), EvaluatedPermission: api.PermissionAllow},
		{Type: api.EventAgentMCPToolResult, MCPToolUseID: "sevt_1", Content: api.TextContent("found: memstore"), IsError: &no},
		{ID: "sevt_2", Type: api.EventAgentMCPToolUse, MCPServerName: "docs", Name: "edit", Input: json.RawMessage(`{}`), EvaluatedPermission: api.PermissionAsk},
		{Type: api.EventAgentThreadContextCompacted, Content: api.TextContent("a summary")},
		{Type: api.EventAgentMCPToolResult, MCPToolUseID: "sevt_2", Content: api.TextContent("read only"), IsError: &yes},
	} {
		ch.show(e)
	}
	want := `  ✓ mcp docs/lookup {"query":"memstore"} → found: memstore
  compacted the conversation: the model goes on from a summary of what came before (the event log keeps everything)
  ✗ mcp docs/edit {} → read only
`
	if out.String() != want {
		t.Fatalf("the chat showed\n%s\nwant\n%s", out.String(), want)
	}
	if _, asked := ch.asking["sevt_2"]; !asked {
		t.Fatal("the always_ask call is not among those the chat asks about")
	}
}
