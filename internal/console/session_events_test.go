package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// The session page shows an MCP call with its server, tool, input and
// result, an always_ask one still waiting with the forms that answer it
// (one its result answered without them), and a
// compaction as a line with the summary folded away; all of it escaped.
func TestSessionPageShowsMCPCallsAndCompactions(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"})
	agent, _ := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}})
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	// The events as the runtime appends them.
	uses, err := srv.Store.AppendEvents(ctx, sess.ID, []api.Event{
		{Type: api.EventAgentMCPToolUse, MCPServerName: "docs<1>", Name: "lookup", Input: json.RawMessage(`{"query":"a<b & c"}`), EvaluatedPermission: api.PermissionAsk},
		{Type: api.EventAgentMCPToolUse, MCPServerName: "docs<1>", Name: "edit", Input: json.RawMessage(`{}`), EvaluatedPermission: api.PermissionAsk},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := srv.Store.AppendEvents(ctx, sess.ID, []api.Event{
		{Type: api.EventAgentMCPToolResult, MCPToolUseID: uses[0].ID, Content: api.TextContent("found <script>x</script>"), IsError: &yes},
		{Type: api.EventAgentThreadContextCompacted, Content: api.TextContent("we spoke of <tags> & more")},
	}, nil); err != nil {
		t.Fatal(err)
	}

	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	status, page := v.do("GET", "/console/sessions/"+sess.ID, nil)
	if status != http.StatusOK {
		t.Fatalf("session page: %d\n%s", status, page)
	}
	for _, want := range []string{
		`MCP tool call <strong>docs&lt;1&gt;/lookup</strong> <code class="hint">` + uses[0].ID + `</code>`,
		`<pre>{` + "\n" + `  &#34;query&#34;: &#34;a&lt;b &amp; c&#34;` + "\n}</pre>",
		`MCP tool call <strong>docs&lt;1&gt;/edit</strong> <code class="hint">` + uses[1].ID + `</code> <span class="hint">asks for your permission</span>`,
		`aria-label="allow ` + uses[1].ID + `"`,
		`result of MCP call <a href="#` + uses[0].ID + `"><code>` + uses[0].ID + `</code></a> <strong class="error-text">error</strong></div><pre>found &lt;script&gt;x&lt;/script&gt;</pre>`,
		`The conversation was compacted`,
		`<details><summary>The summary</summary><pre>we spoke of &lt;tags&gt; &amp; more</pre></details>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the session page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `aria-label="allow `+uses[0].ID+`"`) {
		t.Error("the MCP call its result answered still has the forms that would confirm it")
	}
}
