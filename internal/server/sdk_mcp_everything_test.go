package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/testenv"
)

// everythingVar names the executable of @modelcontextprotocol/server-everything,
// the MCP project's reference server; .ci/run installs it (npm install
// --prefix) and sets it.
const everythingVar = "MEMSTORE_MCP_EVERYTHING"

// startEverything runs server-everything in its Streamable HTTP mode as a
// real process on a free loopback port and returns its MCP URL. Without
// the executable it skips t saying how to get it, or fails t under CI.
func startEverything(t *testing.T) string {
	t.Helper()
	testenv.Long(t) // Node starts in seconds
	bin := os.Getenv(everythingVar)
	if bin == "" {
		msg := "server-everything test SKIPPED: set " + everythingVar + " to its executable (npm install --prefix /tmp/mcp-everything @modelcontextprotocol/server-everything@2026.8.31; then /tmp/mcp-everything/node_modules/.bin/mcp-server-everything), as .ci/run does"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second): // a safety bound, not a timing
		t.Fatal("server-everything never said it was listening")
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}

// The MCP project's reference server, started from npm as a real process:
// its echo tool is declared to the model with the server's own schema,
// called once for the model's call, and its answer reaches the model.
func TestServerEverythingFromNPMServesAnAgent(t *testing.T) {
	url := startEverything(t)
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "mcp__docs__echo", `{"message":"hello from memstore"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("It echoed."))
	s := newMCPHarness(t, u.URL, agent.MCPConfig{})
	agentID, envID := s.mcpAgent(url, false)
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{EnvironmentID: envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}})
	if err != nil {
		t.Fatal(err)
	}
	s.say(sess.ID, "Echo something.")
	log := s.waitIdle(sess.ID)
	want := "user.message session.status_running span.model_request_start agent.mcp_tool_use span.model_request_end agent.mcp_tool_result span.model_request_start agent.message span.model_request_end session.status_idle"
	if got := types(log); got != want {
		t.Fatalf("log %s\nwant %s", got, want)
	}
	if r := log[5].AsAgentMCPToolResult(); r.IsError || len(r.Content) != 1 || r.Content[0].Text != "Echo: hello from memstore" {
		t.Fatalf("the result: %s", log[5].RawJSON())
	}
	tools, _ := json.Marshal(u.Request(0).Raw["tools"])
	if !strings.Contains(string(tools), `"description":"Echoes back the input string"`) || !strings.Contains(string(tools), `"message":{"description":"Message to echo","type":"string"}`) {
		t.Fatalf("tools declared: %s", tools)
	}
	msgs, _ := json.Marshal(u.Request(1).Raw["messages"])
	if !strings.Contains(string(msgs), `"content":[{"text":"Echo: hello from memstore","type":"text"}],"is_error":false,"tool_use_id":"`+log[3].ID+`"`) {
		t.Fatalf("the second request's messages: %s", msgs)
	}
}
