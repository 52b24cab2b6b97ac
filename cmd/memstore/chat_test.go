package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// memstore chat driven through a pipe: one message per line, each answered
// before the next goes out, and the usage printed at the end of input.
func TestChatThroughAPipe(t *testing.T) {
	u := modeltest.New(t)
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	t.Setenv("MEMSTORE_API_KEY", "")
	t.Setenv(agent.ModelKeyVar, "sk-upstream-test")
	rs := testServe(t, serveOptions{modelBaseURL: u.URL})
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	var env, ag struct{ ID string }
	decodeOut(t, memstoreCLI(t, 0, append([]string{"env", "create", "laptop"}, conn...)...), &env)
	decodeOut(t, memstoreCLI(t, 0, append([]string{"agent", "create", "helper", "--model", "claude-sonnet-4-5"}, conn...)...), &ag)

	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(12, 3, 0, 0), modeltest.Text("Hello! How can I help?"))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 4, 0, 0), modeltest.Text("Noted."))
	out := memstoreCLIInput(t, 0, "hi\n\nremember the milk\n", append([]string{"chat", "--env", env.ID, "--agent", ag.ID}, conn...)...)

	for _, want := range []string{"you> agent> Hello! How can I help?\n", "you> agent> Noted.\n", "usage: 32 input tokens, 7 output tokens, 0 read from cache, 0 written to cache"} {
		if !strings.Contains(out, want) {
			t.Errorf("the chat lacks %q:\n%s", want, out)
		}
	}
	if u.Count() != 2 {
		t.Fatalf("%d model requests, want 2", u.Count())
	}
	second := u.Request(1).Raw["messages"].([]any)
	if len(second) != 3 || second[2].(map[string]any)["role"] != "user" {
		t.Fatalf("the second request's conversation: %v", second)
	}
}

// memstore chat for a person, through its terminal seam: an always_ask
// call is shown and asked about (y allows, a message denies with it), each
// call is one line with its result, Ctrl-C during a turn interrupts it and
// returns to the prompt, and Ctrl-C at the prompt ends the chat.
func TestChatAsksConfirmsAndInterrupts(t *testing.T) {
	u := modeltest.New(t)
	t.Setenv(agent.ModelKeyVar, "sk-upstream-test")
	rs := testServe(t, serveOptions{modelBaseURL: u.URL})
	ctx := context.Background()
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "helper", Model: api.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}

	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.Text("I'll write both."),
		modeltest.ToolUse("toolu_a", "write", `{"file_path":"notes/a.md","content":"a"}`),
		modeltest.ToolUse("toolu_b", "bash", `{"command":"rm -rf /mnt/memory/notes"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("Wrote a.md; left the folder alone."))
	cancelled := make(chan struct{})
	u.StallMidStream(cancelled, modeltest.Text("Let me think"))

	in, typed := io.Pipe()
	defer typed.Close()
	out := &testlog.Buffer{}
	ctrlC := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runChatSession(ctx, admin, sess.ID, chatTerminal{in: in, out: out, interrupts: ctrlC})
	}()
	io.WriteString(typed, "write the notes\ny\nno, keep the folder\n")

	// The test is the worker: it runs the allowed call.
	var uses []api.Event
	waitUntil(t, "the allowed call", func() bool {
		uses = nil
		allowed := false
		for e, err := range admin.ListAllEvents(ctx, sess.ID, api.EventListParams{}) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case e.Type == api.EventAgentToolUse:
				uses = append(uses, e)
			case e.Type == api.EventUserToolConfirmation && e.Result == api.PermissionAllow:
				allowed = true
			}
		}
		return allowed
	})
	if _, err := admin.SendEvents(ctx, sess.ID, api.UserToolResult(uses[0].ID, "wrote 1 bytes to /mnt/memory/notes/a.md", false)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the turn to end", func() bool { return strings.Count(out.String(), "you> ") == 2 })

	io.WriteString(typed, "think hard\n")
	<-u.Arrived
	<-u.Arrived
	<-u.Arrived
	ctrlC <- struct{}{}
	<-cancelled
	waitUntil(t, "the prompt after the interrupt", func() bool { return strings.Count(out.String(), "you> ") == 3 })
	ctrlC <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	got := out.String()
	for _, want := range []string{
		"you> agent> I'll write both.\n",
		`  allow write {"file_path":"notes/a.md","content":"a"}? [y/N/message]   allow bash {"command":"rm -rf /mnt/memory/notes"}? [y/N/message]   ✗ bash {"command":"rm -rf /mnt/memory/notes"} → denied` + "\n",
		`  ✓ write {"file_path":"notes/a.md","content":"a"} → wrote 1 bytes to /mnt/memory/notes/a.md` + "\n",
		"agent> Wrote a.md; left the folder alone.\n",
		"  interrupting the turn (Ctrl-C at the prompt ends the chat)\n",
		"usage: 30 input tokens, 10 output tokens",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the chat lacks %q:\n%s", want, got)
		}
	}
	// The model was told of the denial, with the user's words.
	if result, _ := json.Marshal(u.Request(1).Raw["messages"].([]any)[2]); !strings.Contains(string(result), "Their message: no, keep the folder") {
		t.Errorf("the model got %s", result)
	}
	var types []string
	for e, err := range admin.ListAllEvents(ctx, sess.ID, api.EventListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if tail := strings.Join(types[len(types)-6:], " "); tail != "user.message session.status_running span.model_request_start user.interrupt span.model_request_end session.status_idle" {
		t.Errorf("the interrupted turn: %s", tail)
	}
}

// When the agent's tool calls wait for a worker, the chat checks, after a
// short wait (the test's to end), whether a worker polls the session's
// environment, and if none does says so in one line with the command that
// starts one. With a worker polling it says nothing more.
func TestChatSaysWhenNoWorkerPolls(t *testing.T) {
	rs := testServe(t, serveOptions{})
	ctx := context.Background()
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, polling := range []bool{false, true} {
		t.Run(fmt.Sprintf("polling=%v", polling), func(t *testing.T) {
			ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
			if polling {
				// A worker's poll of the empty queue, before the session
				// exists: it polls, and claims nothing.
				worker, err := client.New(rs.baseURL, client.WithBearerToken(ws.Key), client.WithWorkerID("laptop"))
				if err != nil {
					t.Fatal(err)
				}
				if w, err := worker.PollWork(ctx, ws.Env.ID, api.WorkPollParams{BlockMS: 1}); err != nil || w != nil {
					t.Fatalf("poll = %v, %v; want no work", w, err)
				}
			}
			sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID})
			if err != nil {
				t.Fatal(err)
			}
			out := chatUntilWorkerCheck(t, ctx, admin, sess.ID)
			line := "no worker is polling environment " + ws.Env.ID + ", so the tool calls wait: start one with `memstore worker poll --environment-id " + ws.Env.ID
			if got := strings.Contains(out.String(), line); got == polling {
				t.Errorf("the chat says %q: %v, want %v:\n%s", line, got, !polling, out)
			}
		})
	}
}

// chatUntilWorkerCheck chats in sessionID: it sends one bash call, lets the
// chat's wait for a worker run out (its check of the environment's workers
// runs then), interrupts the turn and ends the chat at the next prompt. It
// returns what the chat printed.
func chatUntilWorkerCheck(t *testing.T, ctx context.Context, admin *client.Client, sessionID string) *testlog.Buffer {
	t.Helper()
	in, typed := io.Pipe()
	defer typed.Close()
	out := &testlog.Buffer{}
	ctrlC, waited := make(chan struct{}), make(chan time.Time)
	armed := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- runChatSession(ctx, admin, sessionID, chatTerminal{in: in, out: out, interrupts: ctrlC,
			workerWait: func() <-chan time.Time { armed <- struct{}{}; return waited }})
	}()
	io.WriteString(typed, `{"tool_calls":[{"name":"bash","input":{"command":"echo hi"}}],"end":"idle"}`+"\n")
	<-armed
	waited <- time.Now() // the wait is over; the check runs before Ctrl-C is read
	ctrlC <- struct{}{}  // interrupts the turn, which waits for its call
	waitUntil(t, "the prompt after the interrupt", func() bool { return strings.Count(out.String(), "you> ") == 2 })
	ctrlC <- struct{}{} // at the prompt: ends the chat
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return out
}
