package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/testserver"
)

// The Claude runtime's memory_search, wired to the server's search: a
// memory written through the REST API is what the model's call finds, in
// the session's own store and in no other.
func TestTheModelSearchesItsSessionsStores(t *testing.T) {
	ctx := context.Background()
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "memory_search", `{"query":"zanzibar"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("Found it."))
	srv := testserver.Start(t, testserver.Options{Model: agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"}})
	admin := srv.Admin(t)
	mine, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ store, path string }{{mine.ID, "/ops/deploy.md"}, {other.ID, "/leak.md"}} {
		if _, err := admin.CreateMemory(ctx, m.store, api.CreateMemoryRequest{Path: m.path, Content: "the zanzibar dashboard"}); err != nil {
			t.Fatal(err)
		}
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: "claude-sonnet-4-5"}, Tools: []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID,
		Resources: []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: mine.ID, Access: api.AccessReadOnly}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SendEvents(ctx, sess.ID, api.UserMessage("where is the dashboard?")); err != nil {
		t.Fatal(err)
	}
	var result *api.Event
	for bound := time.Now().Add(30 * time.Second); result == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(bound) {
			t.Fatal("no user.tool_result for the model's memory_search within 30 s")
		}
		page, err := admin.ListEvents(ctx, sess.ID, api.EventListParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Data {
			if e.Type == api.EventUserToolResult {
				result = &e
			}
		}
	}
	text, _ := json.Marshal(result.Content)
	if *result.IsError || !strings.Contains(string(text), "/ops/deploy.md") || !strings.Contains(string(text), "**zanzibar**") || strings.Contains(string(text), "leak") {
		t.Fatalf("the search's answer: %s, want /ops/deploy.md from the session's store only", text)
	}
}
