package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

// The model's names of MCP tools depend on the pair alone, stay within
// the API's rules, and keep two servers' tools apart.
func TestMCPModelNames(t *testing.T) {
	if got := mcpModelName("docs", "lookup"); got != "mcp__docs__lookup" {
		t.Fatalf("plain pair: %q", got)
	}
	long := mcpModelName("a-server-with-a-rather-long-name", "and_a_tool_with_an_even_longer_name_than_that")
	dotted, underscored := mcpModelName("docs.v2", "lookup"), mcpModelName("docs_v2", "lookup")
	for _, n := range []string{long, dotted} {
		if len(n) > 64 || invalidToolChars.MatchString(n) {
			t.Fatalf("%q breaks the API's name rules", n)
		}
	}
	if dotted == underscored || mcpModelName("a", "b") == mcpModelName("c", "b") {
		t.Fatalf("two pairs share a name: %q %q", dotted, underscored)
	}
	if long != mcpModelName("a-server-with-a-rather-long-name", "and_a_tool_with_an_even_longer_name_than_that") {
		t.Fatal("the name is not stable")
	}
}

// A toolset's configs: a tool's own config wins, disabled tools are left
// out, and a toolset without a policy asks.
func TestMCPToolsetPermissions(t *testing.T) {
	var ts mcpToolset
	json.Unmarshal([]byte(`{"type":"mcp_toolset","mcp_server_name":"d","default_config":{"permission_policy":{"type":"always_allow"}},
		"configs":[{"name":"rm","enabled":false},{"name":"edit","permission_policy":{"type":"always_ask"}}]}`), &ts)
	for tool, want := range map[string]string{"read": "allow", "rm": "", "edit": "ask"} {
		if got := ts.permission(tool); got != want {
			t.Errorf("%s: %q, want %q", tool, got, want)
		}
	}
	if got := (mcpToolset{}).permission("x"); got != api.PermissionAsk {
		t.Errorf("no policy: %q, want ask", got)
	}
}

// A restart while an MCP call is out: the next runner makes the call
// again (it cannot know whether the first one ran), records one result,
// and the turn ends once with the model's answer.
func TestRestartDuringAnMCPCallMakesItAgainAndRecordsOneResult(t *testing.T) {
	var calls atomic.Int32
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if calls.Add(1) == 1 {
			arrived <- struct{}{}
			select { // the first call never answers: its server stops
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { close(release); hs.Close() })

	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_1", "mcp__docs__lookup", `{}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("Found it."))
	cfg := claudeConfig(u)
	cfg.MCP.HTTPClient = http.DefaultClient // loopback: the egress rule is the service layer's
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model},
		MCPServers: []json.RawMessage{json.RawMessage(`{"type":"url","name":"docs","url":"` + hs.URL + `"}`)},
		Tools:      []json.RawMessage{json.RawMessage(`{"type":"mcp_toolset","mcp_server_name":"docs","default_config":{"permission_policy":{"type":"always_allow"}}}`)}}, nil, cfg)
	h.mustSend(api.UserMessage("look"))
	<-arrived
	h.restart()                                              // the server stops: its call is abandoned
	if err := h.runner.React(h.ctx, h.sess.ID); err != nil { // the next server's Resume
		t.Fatal(err)
	}
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.mcp_tool_use span.model_request_end agent.mcp_tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log %s", got)
	}
	if n := calls.Load(); n != 2 || u.Count() != 2 {
		t.Fatalf("%d calls, %d model requests; want 2 and 2", n, u.Count())
	}
	if r := eventsOf(log, api.EventAgentMCPToolResult)[0]; r.Text() != "found" || !strings.Contains(r.MCPToolUseID, "sevt_") {
		t.Fatalf("result %+v", r)
	}
}

// A server that refuses the session's credentials (401) is told apart
// from one that is down: its tools are left out of the request with an
// mcp_authentication_failed_error, and the model still answers.
func TestAnMCPServerRefusingTheCredentialsIsAnAuthenticationError(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("I cannot reach the docs."))
	cfg := claudeConfig(u)
	cfg.MCP.HTTPClient = http.DefaultClient
	h := newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model},
		MCPServers: []json.RawMessage{json.RawMessage(`{"type":"url","name":"docs","url":"` + hs.URL + `"}`)},
		Tools:      []json.RawMessage{json.RawMessage(`{"type":"mcp_toolset","mcp_server_name":"docs"}`)}}, nil, cfg)
	h.mustSend(api.UserMessage("look"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start session.error agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log %s", got)
	}
	e := eventsOf(log, api.EventSessionError)[0].Error
	if e.Type != "mcp_authentication_failed_error" || e.MCPServerName != "docs" || !strings.Contains(e.Message, "static_bearer") {
		t.Fatalf("session.error %+v", e)
	}
	if tools := u.Request(0).Raw["tools"]; tools != nil {
		t.Fatalf("tools offered: %v", tools)
	}
}
