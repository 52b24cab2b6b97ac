package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// docsServer is an MCP server of the official Go SDK on loopback with one
// tool, lookup, that counts its calls and keeps every Authorization
// header it was sent.
type docsServer struct {
	url string
	hs  *httptest.Server

	mu    sync.Mutex
	calls []string // the query of each call
	auth  []string // Authorization of each HTTP request
	lists int      // tools/list requests
}

func newDocsServer(t *testing.T, fail bool) *docsServer {
	d := &docsServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	type in struct {
		Query string `json:"query" jsonschema:"what to look up"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Looks a word up in the docs."}, func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		d.mu.Lock()
		d.calls = append(d.calls, args.Query)
		d.mu.Unlock()
		if fail {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such word: " + args.Query}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found: " + args.Query}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.mu.Lock()
		d.auth = append(d.auth, r.Header.Get("Authorization"))
		if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			d.lists++
		}
		d.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	d.url, d.hs = hs.URL+"/mcp", hs
	return d
}

func (d *docsServer) seen() (calls, auth []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...), append([]string(nil), d.auth...)
}

// mcpHarness is a server whose SQLite file and logs the test can read.
type mcpHarness struct {
	*sdkServer
	dbPath string
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newMCPHarness(t *testing.T, upstream string, mcpCfg agent.MCPConfig) *mcpHarness {
	h := &mcpHarness{dbPath: filepath.Join(t.TempDir(), "mcp.db"), logs: &syncBuffer{}}
	db, err := sqlite.Open(context.Background(), h.dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h.sdkServer = newSDKServer(t, func(a *app.Config, _ *server.Config) {
		a.Store = db
		a.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		a.Model = agent.ClaudeConfig{BaseURL: upstream, APIKey: "sk-upstream-test", MCP: mcpCfg}
		a.MCP.AllowPrivate = true
		a.SecretsKey = bytes.Repeat([]byte{7}, 32)
	})
	return h
}

// raw GETs a path with the admin key and returns the body as sent.
func (s *sdkServer) raw(path string) string {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.url+path, nil)
	req.Header.Set("x-api-key", s.apiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// waitIdle waits for the session's turn to end and returns its events.
func (s *sdkServer) waitIdle(sessionID string) []anthropic.BetaManagedAgentsSessionEventUnion {
	s.t.Helper()
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		page, err := s.client.Beta.Sessions.Events.List(context.Background(), sessionID, anthropic.BetaSessionEventListParams{})
		if err != nil {
			s.t.Fatal(err)
		}
		if n := len(page.Data); n > 0 && page.Data[n-1].Type == api.EventSessionStatusIdle {
			return page.Data
		}
		if time.Now().After(bound) { // a safety bound, not a timing
			var types []string
			for _, e := range page.Data {
				types = append(types, e.Type)
			}
			s.t.Fatalf("the session never went idle: %v", types)
		}
	}
}

func types(log []anthropic.BetaManagedAgentsSessionEventUnion) string {
	var out []string
	for _, e := range log {
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

func (s *sdkServer) say(sessionID, text string) {
	s.t.Helper()
	if _, err := s.client.Beta.Sessions.Events.Send(context.Background(), sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}},
	}}}); err != nil {
		s.t.Fatal(err)
	}
}

// mcpAgent creates, with the SDK, an agent whose one MCP server is url,
// its tools allowed (or asked about).
func (s *sdkServer) mcpAgent(url string, ask bool) (agentID, envID string) {
	s.t.Helper()
	ctx := context.Background()
	env, err := s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "mcp"})
	if err != nil {
		s.t.Fatal(err)
	}
	policy := anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParamsPermissionPolicyUnion{OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{}}
	if ask {
		policy = anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParamsPermissionPolicyUnion{OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}
	}
	ag, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "docs agent", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: url}},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "docs",
			DefaultConfig: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParams{PermissionPolicy: policy}}}}})
	if err != nil {
		s.t.Fatal(err)
	}
	return ag.ID, env.ID
}

// An agent with an MCP server of the official MCP Go SDK: the tool is
// declared to the model with the server's schema, called once for the
// model's one call, recorded as agent.mcp_tool_use/agent.mcp_tool_result,
// and its output sent back; the bearer of the session's vault reaches the
// server and nothing else — no API answer, event, log line, nor the
// database file.
func TestAnMCPToolIsCalledWithTheVaultsBearerWhichStaysSecret(t *testing.T) {
	t.Parallel()
	const bearer = "tok-mcp-9f8e7d6c5b4a"
	docs := newDocsServer(t, false)
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "mcp__docs__lookup", `{"query":"memstore"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("memstore is in the docs."))
	s := newMCPHarness(t, u.URL, agent.MCPConfig{})
	ctx := context.Background()
	c := s.client

	vault, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := c.Beta.Vaults.Credentials.New(ctx, vault.ID, anthropic.BetaVaultCredentialNewParams{Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{
		OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{Token: bearer, MCPServerURL: docs.url}}})
	if err != nil {
		t.Fatal(err)
	}
	if cred.Auth.Type != "static_bearer" || cred.Auth.MCPServerURL != docs.url || cred.VaultID != vault.ID {
		t.Fatalf("credential %s", cred.RawJSON())
	}
	agentID, envID := s.mcpAgent(docs.url, false)
	sess, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		VaultIDs: []string{vault.ID}})
	if err != nil {
		t.Fatal(err)
	}
	s.say(sess.ID, "Is memstore in the docs?")
	log := s.waitIdle(sess.ID)

	want := "user.message session.status_running span.model_request_start agent.mcp_tool_use span.model_request_end agent.mcp_tool_result span.model_request_start agent.message span.model_request_end session.status_idle"
	if got := types(log); got != want {
		t.Fatalf("log %s\nwant %s", got, want)
	}
	use, result := log[3].AsAgentMCPToolUse(), log[5].AsAgentMCPToolResult()
	if use.Name != "lookup" || use.MCPServerName != "docs" || use.Input["query"] != "memstore" || use.EvaluatedPermission != "allow" {
		t.Fatalf("the call: %s", log[3].RawJSON())
	}
	if result.MCPToolUseID != use.ID || result.IsError || len(result.Content) != 1 || result.Content[0].Text != "found: memstore" {
		t.Fatalf("the result: %s", log[5].RawJSON())
	}
	calls, auth := docs.seen()
	if len(calls) != 1 || calls[0] != "memstore" {
		t.Fatalf("the MCP server was called %d times (%v), want once", len(calls), calls)
	}
	// Both model requests offered the tool; the list was asked for once.
	docs.mu.Lock()
	lists := docs.lists
	docs.mu.Unlock()
	if lists != 1 {
		t.Fatalf("the MCP server was asked for its tools %d times over two model requests, want once (the list is kept for %s)", lists, "30s")
	}
	for _, a := range auth {
		if a != "Bearer "+bearer {
			t.Fatalf("the MCP server got Authorization %q, want the vault's bearer", a)
		}
	}

	// The model was offered the tool with the server's schema, and got its
	// output as the tool_result of its call.
	if n := u.Count(); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	tools, _ := json.Marshal(u.Request(0).Raw["tools"])
	if !strings.Contains(string(tools), `"description":"Looks a word up in the docs."`) || !strings.Contains(string(tools), `"name":"mcp__docs__lookup"`) ||
		!strings.Contains(string(tools), `"properties":{"query":{"description":"what to look up","type":"string"}},"required":["query"]`) {
		t.Fatalf("tools declared: %s", tools)
	}
	msgs, _ := json.Marshal(u.Request(1).Raw["messages"])
	if !strings.Contains(string(msgs), `"content":[{"text":"found: memstore","type":"text"}],"is_error":false,"tool_use_id":"`+use.ID+`"`) ||
		!strings.Contains(string(msgs), `"id":"`+use.ID+`","input":{"query":"memstore"},"name":"mcp__docs__lookup","type":"tool_use"`) {
		t.Fatalf("the second request's messages: %s", msgs)
	}

	// The bearer is nowhere but at the MCP server.
	answers := []string{
		s.raw("/v1/vaults"), s.raw("/v1/vaults/" + vault.ID), s.raw("/v1/vaults/" + vault.ID + "/credentials"),
		s.raw("/v1/vaults/" + vault.ID + "/credentials/" + cred.ID), s.raw("/v1/sessions/" + sess.ID),
		s.raw("/v1/sessions/" + sess.ID + "/events"), s.raw("/v1/agents/" + agentID), cred.RawJSON(),
	}
	for _, a := range answers {
		if strings.Contains(a, bearer) {
			t.Fatalf("an API answer carries the bearer: %s", a)
		}
	}
	requireFields(t, "a vault", answers[1], anthropic.BetaManagedAgentsVault{})
	requireFields(t, "a credential", answers[3], anthropic.BetaManagedAgentsCredential{})
	requireFields(t, "agent.mcp_tool_use", log[3].RawJSON(), anthropic.BetaManagedAgentsAgentMCPToolUseEvent{})
	requireFields(t, "agent.mcp_tool_result", log[5].RawJSON(), anthropic.BetaManagedAgentsAgentMCPToolResultEvent{})
	if !strings.Contains(answers[3], docs.url) {
		t.Fatalf("the credential does not show its URL: %s", answers[3])
	}
	if logs := s.logs.String(); strings.Contains(logs, bearer) || !strings.Contains(logs, "vault credential created") {
		t.Fatalf("the logs: %s", logs)
	}
	for _, f := range []string{s.dbPath, s.dbPath + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(bearer)) {
			t.Fatalf("%s holds the bearer in clear", filepath.Base(f))
		}
	}
	if b, _ := os.ReadFile(s.dbPath + "-wal"); !bytes.Contains(b, []byte(cred.ID)) {
		if b2, _ := os.ReadFile(s.dbPath); !bytes.Contains(b2, []byte(cred.ID)) {
			t.Fatal("the credential is in neither the database nor its WAL: the search for the bearer read the wrong files")
		}
	}
}

// An MCP server that fails never stalls the session: a tool that reports
// an error, and a server gone between the listing and the call, each give
// the model an error result it sees, a session.error that says what
// happened, and the turn goes on to the model's answer.
func TestAFailingMCPServerGivesTheModelAnErrorResultAndTheTurnGoesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind, text string
		toolError        bool
	}{
		{"the tool reports an error", "mcp_tool_error", "no such word: memstore", true},
		{"the server is gone at the call", "mcp_connection_failed_error", "The call of lookup on MCP server \"docs\" failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := newDocsServer(t, tc.toolError)
			u := modeltest.New(t)
			answer := modeltest.Answer(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "mcp__docs__lookup", `{"query":"memstore"}`))
			u.Queue(func(w http.ResponseWriter, r *http.Request) {
				if !tc.toolError {
					docs.hs.Close() // listed, then gone
				}
				answer(w, r)
			})
			u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("The docs are not available."))
			s := newMCPHarness(t, u.URL, agent.MCPConfig{CallTimeout: 10 * time.Second})
			agentID, envID := s.mcpAgent(docs.url, false)
			sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{EnvironmentID: envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}})
			if err != nil {
				t.Fatal(err)
			}
			s.say(sess.ID, "Is memstore in the docs?")
			log := s.waitIdle(sess.ID)
			want := "user.message session.status_running span.model_request_start agent.mcp_tool_use span.model_request_end agent.mcp_tool_result session.error span.model_request_start agent.message span.model_request_end session.status_idle"
			if !tc.toolError {
				// The next request lists the tools again, and says the
				// server is still gone.
				want = strings.Replace(want, "span.model_request_start agent.message", "span.model_request_start session.error agent.message", 1)
				if e := log[8].AsSessionError(); e.Error.Type != "mcp_connection_failed_error" || e.Error.RetryStatus.Type != "retrying" {
					t.Fatalf("the second request's session.error: %s", log[8].RawJSON())
				}
				if tools := u.Request(1).Raw["tools"]; tools != nil {
					t.Fatalf("the tools of a server that is gone were offered: %v", tools)
				}
			}
			if got := types(log); got != want {
				t.Fatalf("log %s\nwant %s", got, want)
			}
			result, e := log[5].AsAgentMCPToolResult(), log[6].AsSessionError()
			if !result.IsError || !strings.Contains(result.Content[0].Text, tc.text) {
				t.Fatalf("the result: %s", log[5].RawJSON())
			}
			if e.Error.Type != tc.kind || !strings.Contains(log[6].RawJSON(), `"mcp_server_name":"docs"`) {
				t.Fatalf("the session.error: %s", log[6].RawJSON())
			}
			msgs, _ := json.Marshal(u.Request(1).Raw["messages"])
			if !strings.Contains(string(msgs), `"is_error":true,"tool_use_id":"`+log[3].ID+`"`) {
				t.Fatalf("the model was not told the call failed: %s", msgs)
			}
			if calls, _ := docs.seen(); tc.toolError != (len(calls) == 1) {
				t.Fatalf("the tool ran %d times", len(calls))
			}
		})
	}
}

// An always_ask MCP toolset waits for the user: the call is recorded, the
// session idles with requires_action naming it, nothing reaches the MCP
// server until a user.tool_confirmation allows it, and then the call is
// made once.
func TestAnAlwaysAskMCPToolWaitsForTheUsersConfirmation(t *testing.T) {
	t.Parallel()
	docs := newDocsServer(t, false)
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "mcp__docs__lookup", `{"query":"memstore"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("Found it."))
	s := newMCPHarness(t, u.URL, agent.MCPConfig{})
	agentID, envID := s.mcpAgent(docs.url, true)
	ctx := context.Background()
	sess, err := s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}})
	if err != nil {
		t.Fatal(err)
	}
	s.say(sess.ID, "Is memstore in the docs?")
	log := s.waitIdle(sess.ID)
	idle := log[len(log)-1].AsSessionStatusIdle()
	use := log[3]
	if use.Type != api.EventAgentMCPToolUse || use.AsAgentMCPToolUse().EvaluatedPermission != "ask" || idle.StopReason.Type != "requires_action" ||
		len(idle.StopReason.EventIDs) != 1 || idle.StopReason.EventIDs[0] != use.ID {
		t.Fatalf("log %s, idle %s", types(log), log[len(log)-1].RawJSON())
	}
	if calls, _ := docs.seen(); len(calls) != 0 {
		t.Fatalf("the tool ran before it was allowed: %v", calls)
	}
	if _, err := s.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		anthropic.BetaManagedAgentsEventParamsOfUserToolConfirmation("allow", use.ID)}}); err != nil {
		t.Fatal(err)
	}
	for bound := time.Now().Add(30 * time.Second); !strings.HasSuffix(types(log), "agent.message span.model_request_end session.status_idle"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(bound) { // a safety bound, not a timing
			t.Fatalf("the turn never ended: %s", types(log))
		}
		log = s.waitIdle(sess.ID)
	}
	if calls, _ := docs.seen(); len(calls) != 1 {
		t.Fatalf("the tool ran %d times after one confirmation", len(calls))
	}
	if !strings.Contains(types(log), "user.tool_confirmation session.status_running agent.mcp_tool_result span.model_request_start") {
		t.Fatalf("log %s", types(log))
	}
}

// rawPost sends a JSON body with the admin key and returns the status and
// the body as answered.
func (s *sdkServer) rawPost(path, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Bad MCP servers, credentials and vault_ids are refused with a 400 that
// says what to fix, and nothing is stored.
func TestBadMCPServersCredentialsAndVaultIDsAreRefused(t *testing.T) {
	t.Parallel()
	u := modeltest.New(t)
	strict := newSDKServer(t, func(a *app.Config, _ *server.Config) { a.SecretsKey = bytes.Repeat([]byte{7}, 32) })
	s := newMCPHarness(t, u.URL, agent.MCPConfig{})
	many := make([]string, 21)
	for i := range many {
		many[i] = `{"type":"url","name":"s` + string(rune('a'+i)) + `","url":"https://mcp.example.com/` + string(rune('a'+i)) + `"}`
	}
	for _, tc := range []struct {
		srv       *sdkServer
		body, say string
	}{
		{strict, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[{"type":"url","name":"local","url":"http://127.0.0.1:9/mcp"}]}`, "--mcp-allow-private"},
		{s.sdkServer, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[{"type":"url","name":"docs","url":"https://mcp.example.com"}],"tools":[{"type":"mcp_toolset","mcp_server_name":"wiki"}]}`, `names none of the agent's mcp_servers`},
		{s.sdkServer, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[{"type":"url","name":"d","url":"https://a.example.com"},{"type":"url","name":"d","url":"https://b.example.com"}]}`, "used by another server"},
		{s.sdkServer, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[{"type":"stdio","name":"d","url":"https://a.example.com"}]}`, `must be \"url\"`},
		{s.sdkServer, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[` + strings.Join(many, ",") + `]}`, "at most 20"},
		{s.sdkServer, `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[{"type":"url","name":"d","url":"https://a.example.com"}],"tools":[{"type":"mcp_toolset","mcp_server_name":"d","default_config":{"permission_policy":{"type":"sometimes"}}}]}`, "permission_policy.type"},
	} {
		status, body := tc.srv.rawPost("/v1/agents", tc.body)
		if status != 400 || !strings.Contains(body, tc.say) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.body, status, body, tc.say)
		}
	}
	for _, srv := range []*sdkServer{strict, s.sdkServer} {
		if list := srv.raw("/v1/agents"); !strings.Contains(list, `"data":[]`) {
			t.Fatalf("a refused agent was stored: %s", list)
		}
	}

	var vault api.Vault
	s.post("/v1/vaults", map[string]any{"display_name": "v"}, &vault)
	for _, tc := range []struct{ body, say string }{
		{`{"auth":{"type":"static_bearer","mcp_server_url":"https://mcp.example.com"}}`, "auth.token is required"},
		{`{"auth":{"type":"mcp_oauth","mcp_server_url":"https://mcp.example.com","token":"t"}}`, `auth.type must be \"static_bearer\"`},
		{`{"auth":{"type":"static_bearer","mcp_server_url":"mcp.example.com","token":"t"}}`, "not an absolute http(s) URL"},
	} {
		status, body := s.rawPost("/v1/vaults/"+vault.ID+"/credentials", tc.body)
		if status != 400 || !strings.Contains(body, tc.say) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.body, status, body, tc.say)
		}
	}
	if list := s.raw("/v1/vaults/" + vault.ID + "/credentials"); !strings.Contains(list, `"data":[]`) {
		t.Fatalf("a refused credential was stored: %s", list)
	}
	noKey := newSDKServer(t)
	var v2 api.Vault
	noKey.post("/v1/vaults", map[string]any{"display_name": "v"}, &v2)
	if status, body := noKey.rawPost("/v1/vaults/"+v2.ID+"/credentials", `{"auth":{"type":"static_bearer","mcp_server_url":"https://mcp.example.com","token":"t"}}`); status != 400 || !strings.Contains(body, "MEMSTORE_SECRETS_KEY") {
		t.Errorf("without a secrets key: %d %s", status, body)
	}

	agentID, envID := s.mcpAgent("https://mcp.example.com/mcp", false)
	for _, ids := range []string{`["vlt_01JZ0000000000000000000000"]`, `["` + vault.ID + `","` + vault.ID + `"]`, `["nope"]`} {
		status, body := s.rawPost("/v1/sessions", `{"agent":"`+agentID+`","environment_id":"`+envID+`","vault_ids":`+ids+`}`)
		if status == 200 || !strings.Contains(body, "vault_ids[") {
			t.Errorf("vault_ids %s: %d %s", ids, status, body)
		}
	}
	if list := s.raw("/v1/sessions"); !strings.Contains(list, `"data":[]`) {
		t.Fatalf("a refused session was stored: %s", list)
	}
}
