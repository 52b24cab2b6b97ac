package worker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// A model-backed agent end to end, with the real server, the real worker
// and real folders: session 1's model writes a memory, session 2's model
// reads it and its next request carries the content; the server holds the
// version, attributed to session 1.
func TestModelSessionsShareMemoryThroughTheWorker(t *testing.T) {
	u := modeltest.New(t)
	srv := startServerWith(t, testserver.Options{Model: agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"}})
	f := newFixtureWith(t, srv, api.CreateAgentRequest{Name: "note taker", Model: api.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401"}`)}})
	notes := f.memStore("Notes", nil)
	logs := &testlog.Buffer{}
	cfg := f.memoryConfig(logs)
	stop := runWorker(t, f.worker(cfg))

	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(50, 10, 0, 0),
		modeltest.ToolUse("toolu_w", "write", `{"file_path":"/mnt/memory/notes/x.md","content":"buy milk\n"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(60, 5, 0, 0), modeltest.Text("Saved."))
	first := f.session("remember: buy milk", attach(notes, api.AccessReadWrite))
	waitFor(t, "session 1's turn to end", func() bool {
		e := lastOfType(f.events(first.ID), api.EventSessionStatusIdle)
		return e != nil && e.StopReason.Type == api.StopEndTurn
	})
	if r := toolResults(f.events(first.ID)); len(r) != 1 || r[0].isError || !strings.Contains(r[0].text, "wrote 9 bytes") {
		t.Fatalf("session 1's tool results: %+v", r)
	}
	if _, err := f.admin.ArchiveSession(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "session 1's item to stop after its final sync", func() bool { return f.sessionWork(first.ID).State == api.WorkStopped })
	if v := f.versions(notes.ID); !slices.Equal(v, []string{"created /x.md by session_actor:" + first.ID}) {
		t.Fatalf("versions: %v", v)
	}
	if s := f.getSession(first.ID); s.Usage.InputTokens != 110 || s.Usage.OutputTokens != 15 {
		t.Fatalf("session 1 usage %+v", s.Usage)
	}

	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(50, 10, 0, 0),
		modeltest.ToolUse("toolu_r", "read", `{"file_path":"/mnt/memory/notes/x.md"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(60, 5, 0, 0), modeltest.Text("You wanted milk."))
	second := f.session("what was I to buy?", attach(notes, api.AccessReadOnly))
	waitFor(t, "session 2's turn to end", func() bool {
		e := lastOfType(f.events(second.ID), api.EventSessionStatusIdle)
		return e != nil && e.StopReason.Type == api.StopEndTurn
	})
	// The request after the read carries the memory's content as the
	// read's result, right after the tool use.
	msgs := u.Request(3).Raw["messages"].([]any)
	result, _ := json.Marshal(msgs[2])
	if len(msgs) != 3 || !strings.Contains(string(result), `"tool_result"`) || !strings.Contains(string(result), `buy milk\n`) {
		t.Fatalf("session 2's second request: %s", result)
	}
	if sys, _ := json.Marshal(u.Request(2).Raw["system"]); !strings.Contains(string(sys), "Notes, mounted at /mnt/memory/notes (read only)") {
		t.Fatalf("session 2's system prompt: %s", sys)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
