package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/storage"
)

// searchHarness is a model session whose runtime searches its store with
// the real full-text index of the harness's database.
func searchHarness(t *testing.T, u *modeltest.Upstream, tools []json.RawMessage, resources ...api.SessionResource) *harness {
	var h *harness
	cfg := claudeConfig(u)
	cfg.Search = func(ctx context.Context, storeIDs []string, query string) ([]storage.SearchHit, error) {
		page, err := h.db.SearchMemories(ctx, storage.SearchQuery{StoreIDs: storeIDs, Terms: storage.SearchTerms(query), Limit: 20})
		return page.Items, err
	}
	h = newHarnessWith(t, api.SessionAgent{Model: api.ModelConfig{ID: model}, Tools: tools}, resources, cfg)
	return h
}

// toolNames lists the tools a request offered.
func toolNames(req modeltest.Request) []string {
	var out []string
	for _, tool := range req.Raw["tools"].([]any) {
		out = append(out, tool.(map[string]any)["name"].(string))
	}
	return out
}

// A session with a memory store is offered memory_search beside its
// toolset; the runtime answers the model's call from the index (the hit's
// path under the store's mount, its snippet), the worker never sees it as
// work, and the model's next request carries the answer.
func TestModelSearchesItsMemoryStores(t *testing.T) {
	u := modeltest.New(t)
	h := searchHarness(t, u, toolsetWith(),
		api.SessionResource{Type: api.ResourceMemoryStore, Name: "Notes", MountPath: "/mnt/memory/notes", Access: api.AccessReadWrite})
	storeID := h.sess.Resources[0].MemoryStoreID
	if _, err := h.db.CreateMemory(h.ctx, storage.NewMemory{StoreID: storeID, Path: "/ops/deploy.md", Content: "Check the zanzibar dashboard before a deploy.", By: storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_t"}, MaxMemories: 100}); err != nil {
		t.Fatal(err)
	}
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "memory_search", `{"query":"Zanzibar"}`))
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_2", "memory_search", `{"query":"?!"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("It is in /ops/deploy.md."))
	h.mustSend(api.UserMessage("where is the dashboard note?"))
	log := h.idleAgain(0)
	if got := typesOf(log); got != "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end user.tool_result span.model_request_start agent.tool_use span.model_request_end user.tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s", got)
	}
	if names := toolNames(u.Request(0)); names[len(names)-1] != "memory_search" {
		t.Fatalf("tools offered: %v, want memory_search after the toolset", names)
	}
	results := eventsOf(log, api.EventUserToolResult)
	found, _ := json.Marshal(results[0].Content)
	if *results[0].IsError || !strings.Contains(string(found), "/mnt/memory/notes/ops/deploy.md") || !strings.Contains(string(found), "**zanzibar** dashboard") {
		t.Fatalf("the search's answer: %s", found)
	}
	refused, _ := json.Marshal(results[1].Content)
	if !*results[1].IsError || !strings.Contains(string(refused), "no word") {
		t.Fatalf("a query without a word: %s, want an error saying so", refused)
	}
	sent, _ := json.Marshal(u.Request(1).Raw["messages"])
	if !strings.Contains(string(sent), "/mnt/memory/notes/ops/deploy.md") {
		t.Fatalf("the next request does not carry the answer: %s", sent)
	}
}

// memory_search is left out when the session has no memory store, and when
// the agent has a tool of that name already (its own is offered, once).
func TestMemorySearchIsOfferedOnlyWithoutClash(t *testing.T) {
	for name, c := range map[string]struct {
		tools     []json.RawMessage
		resources []api.SessionResource
		want      int
	}{
		"no store":     {toolsetWith(), nil, 0},
		"custom clash": {append(toolsetWith(), json.RawMessage(`{"type":"custom","name":"memory_search","description":"mine","input_schema":{"type":"object"}}`)), []api.SessionResource{{Type: api.ResourceMemoryStore, Name: "Notes", MountPath: "/mnt/memory/notes", Access: api.AccessReadOnly}}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			u := modeltest.New(t)
			h := searchHarness(t, u, c.tools, c.resources...)
			u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 5, 0, 0), modeltest.Text("ok"))
			h.mustSend(api.UserMessage("hi"))
			h.idleAgain(0)
			n := 0
			for _, tool := range toolNames(u.Request(0)) {
				if tool == "memory_search" {
					n++
				}
			}
			if n != c.want {
				t.Fatalf("memory_search offered %d times, want %d", n, c.want)
			}
		})
	}
}
