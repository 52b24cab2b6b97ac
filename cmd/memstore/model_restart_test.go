package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/modeltest"
)

// A real server process running a model-backed agent is SIGKILLed twice in
// one turn: while the worker runs the model's tool call (between the
// agent.tool_use and its result), and while the server waits on a slow
// model reply. Each time it restarts on the same data folder and address;
// the turn resumes from the event log, the tool runs once, the model
// request cut off is made again (the same request), and the session ends
// idle with a transcript that has each call and result once.
func TestServerKilledMidTurnResumesTheModelTurn(t *testing.T) {
	const adminKey = "sk-memstore-restart-admin"
	bin := memstoreBinary(t)
	u := modeltest.New(t)
	data, mountRoot, workdir, gate := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	addr := freeAddr(t)
	baseURL := "http://" + addr
	startServer := func() *proc {
		return startServe(t, bin, []string{"MEMSTORE_ADMIN_KEY=" + adminKey, "MEMSTORE_MODEL_API_KEY=sk-upstream-test"},
			"--addr", addr, "--data", data, "--model-base-url", u.URL)
	}
	server := startServer()

	ctx := context.Background()
	admin, err := client.New(baseURL, client.WithAPIKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "claude", Model: api.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	startProc(t, bin, []string{"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_ENVIRONMENT_ID=" + env.ID, "ANTHROPIC_ENVIRONMENT_KEY=" + key.Key},
		"worker", "poll", "--mount-root", mountRoot, "--workdir", workdir, "--sandbox", "none", "--lease-ttl", "5s", "--max-idle", "1s")

	// The tool call records that it ran, says it started, and holds until
	// the test lets it go: the server dies while it runs.
	command := "echo ran >> " + gate + "/ran; touch " + gate + "/started; while [ ! -e " + gate + "/go ]; do sleep 0.05; done; echo finished"
	input, _ := json.Marshal(map[string]string{"command": command})
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "bash", string(input)))
	stalled := make(chan struct{})
	u.StallMidStream(stalled, modeltest.Text("Half a rep"))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("It finished."))

	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		InitialEvents: []api.Event{api.UserMessage("run the job")}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the tool call to start", func() bool { _, err := os.Stat(filepath.Join(gate, "started")); return err == nil })
	server.kill()
	server = startServer()
	if err := os.WriteFile(filepath.Join(gate, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	waitUntil(t, "the slow model request", func() bool { return u.Count() == 2 })
	server.kill()
	<-stalled // the upstream saw the server go
	server = startServer()

	var events []api.Event
	waitUntil(t, "the turn to end", func() bool {
		s, err := admin.GetSession(ctx, sess.ID)
		return err == nil && s.Status == api.SessionIdle && u.Count() == 3
	})
	for e, err := range admin.ListAllEvents(ctx, sess.ID, api.EventListParams{Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); got != "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end user.tool_result span.model_request_start agent.message span.model_request_end session.status_idle" {
		t.Fatalf("log: %s\nserver output:\n%s", got, server.out)
	}
	if ran, _ := os.ReadFile(filepath.Join(gate, "ran")); string(ran) != "ran\n" {
		t.Fatalf("the tool ran %d times", strings.Count(string(ran), "ran"))
	}
	if result := events[5]; result.ToolUseID != events[3].ID || !strings.Contains(result.Text(), "finished") {
		t.Fatalf("tool result %+v", result)
	}
	if last := events[len(events)-1]; last.StopReason.Type != api.StopEndTurn || events[7].Text() != "It finished." {
		t.Fatalf("the turn ended with %+v after %q", last.StopReason, events[7].Text())
	}
	// The request cut off by the kill is the one made again.
	again, _ := json.Marshal(u.Request(2).Raw["messages"])
	if cut, _ := json.Marshal(u.Request(1).Raw["messages"]); string(cut) != string(again) {
		t.Fatalf("the repeated request differs:\n%s\n%s", cut, again)
	}
}
