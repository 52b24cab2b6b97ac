package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/memstore/memstore/api"
)

// checkGolden compares a table with testdata/name.
func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	var got bytes.Buffer
	if err := printTable(&got, v); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", name)
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (write it from this output once it is right):\n%s", err, got.String())
	}
	if got.String() != string(want) {
		t.Errorf("the table differs from %s:\ngot:\n%s\nwant:\n%s", golden, got.String(), want)
	}
}

// A table of versions says who wrote each (a session, an API key or a
// console user) and how; its times are to the second.
func TestVersionsTableShowsAuthorAndOperation(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 30, 0, 123456789, time.UTC)
	p, size, sum := "/notes/todo.md", int64(12), "ab12"
	versions := []api.MemoryVersion{
		{ID: "memver_03", Type: "memory_version", MemoryID: "mem_01", MemoryStoreID: "memstore_01", Operation: api.OperationDeleted, Path: &p,
			CreatedAt: at.Add(2 * time.Hour), CreatedBy: api.Actor{Type: api.UserActor, UserID: "user_01ALICE"}},
		{ID: "memver_02", Type: "memory_version", MemoryID: "mem_01", MemoryStoreID: "memstore_01", Operation: api.OperationModified, Path: &p,
			ContentSHA256: &sum, ContentSizeBytes: &size, CreatedAt: at.Add(time.Hour), CreatedBy: api.Actor{Type: api.SessionActor, SessionID: "sesn_01WORKER"}},
		{ID: "memver_01", Type: "memory_version", MemoryID: "mem_01", MemoryStoreID: "memstore_01", Operation: api.OperationCreated, Path: &p,
			ContentSHA256: &sum, ContentSizeBytes: &size, CreatedAt: at, CreatedBy: api.Actor{Type: api.APIActor, APIKeyID: "apikey_01ADMIN"}},
	}
	checkGolden(t, "versions.table", versions)

	// JSON and YAML keep the nanoseconds and the whole created_by.
	var js bytes.Buffer
	if err := (outputFlags{output: outputJSON}).print(&js, versions); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"created_at": "2026-05-01T09:30:00.123456789Z"`) || !strings.Contains(js.String(), `"session_id": "sesn_01WORKER"`) {
		t.Errorf("JSON lost precision or the author:\n%s", js.String())
	}
	var ys bytes.Buffer
	if err := (outputFlags{output: outputYAML}).print(&ys, versions); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := yaml.Unmarshal(ys.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if ts, _ := back[2]["created_at"].(string); ts != "2026-05-01T09:30:00.123456789Z" {
		if tt, ok := back[2]["created_at"].(time.Time); !ok || !tt.Equal(at) {
			t.Errorf("YAML created_at = %#v, want the nanoseconds kept", back[2]["created_at"])
		}
	}
}

// A table of agents shows each one's model.
func TestAgentsTableShowsTheModel(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 30, 0, 987654321, time.UTC)
	agents := []api.Agent{
		{SessionAgent: api.SessionAgent{ID: "agent_01A", Type: "agent", Name: "notes-bot", Model: api.ModelConfig{ID: api.ScriptedModel}}, CreatedAt: at, UpdatedAt: at},
		{SessionAgent: api.SessionAgent{ID: "agent_01B", Type: "agent", Name: "reviewer", Description: "reads pull requests", Model: api.ModelConfig{ID: "claude-sonnet-4-5"}}, CreatedAt: at, UpdatedAt: at.Add(time.Minute)},
	}
	checkGolden(t, "agents.table", agents)
	b, _ := json.Marshal(agents[1])
	if !strings.Contains(string(b), `"model":{"id":"claude-sonnet-4-5"}`) {
		t.Errorf("the agent's JSON changed: %s", b)
	}
}
