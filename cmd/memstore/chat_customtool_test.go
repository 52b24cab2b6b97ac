package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
)

// memstore chat with an agent's custom tool: the wait shows on a line of
// its own; --custom-tool-cmd answers it from a script (its stdout reaches
// the model as the call's tool_result, a failing script's stderr as an
// error), and without the flag the chat says how to answer.
func TestChatAnswersCustomToolsWithACommand(t *testing.T) {
	u := modeltest.New(t)
	t.Setenv(agent.ModelKeyVar, "sk-upstream-test")
	rs := testServe(t, serveOptions{modelBaseURL: u.URL})
	ctx := context.Background()
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "weather", Model: api.ModelConfig{ID: "claude-sonnet-4-5"},
		Tools: []json.RawMessage{json.RawMessage(`{"type":"custom","name":"get_weather","description":"The weather in a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}

	// A timeout that is no bound is refused before any session is made.
	var errb strings.Builder
	args := append([]string{"chat", "--env", env.ID, "--agent", ag.ID, "--custom-tool-cmd", "cat", "--custom-tool-timeout", "0s"}, conn...)
	if code := run(ctx, args, streams{strings.NewReader("hi\n"), io.Discard, &errb}); code == 0 || !strings.Contains(errb.String(), "--custom-tool-timeout must be positive, got 0s") {
		t.Fatalf("a zero --custom-tool-timeout: exit %d, stderr %q", code, errb.String())
	}
	if page, err := admin.ListSessions(ctx, api.SessionListParams{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("sessions after the refusal: %v, %v", page, err)
	}

	for _, tc := range []struct {
		name    string
		flags   []string
		isError bool
		result  string // what the model gets as the tool_result's text
		lines   []string
	}{
		{name: "script", flags: []string{"--custom-tool-cmd", `printf 'Sunny in %s (%s)' "$(cat)" "$MEMSTORE_TOOL_NAME"; test -n "$MEMSTORE_TOOL_USE_ID"`},
			result: `Sunny in {\"city\":\"Paris\"} (get_weather)`,
			lines: []string{`  custom tool get_weather {"city":"Paris"} → running --custom-tool-cmd` + "\n",
				`  ✓ get_weather {"city":"Paris"} → Sunny in {"city":"Paris"} (get_weather)` + "\n", "agent> Done.\n"}},
		{name: "failing script", flags: []string{"--custom-tool-cmd", `echo 'no <forecast> today' >&2; exit 3`}, isError: true,
			result: `no \u003cforecast\u003e today`,
			lines:  []string{`  ✗ get_weather {"city":"Paris"} → no <forecast> today` + "\n", "agent> Done.\n"}},
		{name: "no flag",
			lines: []string{`  custom tool get_weather {"city":"Paris"} waits for its answer (call sevt_`, "chat with --custom-tool-cmd CMD"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := u.Count()
			u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "get_weather", `{"city":"Paris"}`))
			if tc.result != "" {
				u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("Done."))
			}
			out := memstoreCLIInput(t, 0, "weather in Paris?\n", append(append([]string{"chat", "--env", env.ID, "--agent", ag.ID}, tc.flags...), conn...)...)
			t.Logf("the chat:\n%s", out)
			for _, want := range tc.lines {
				if !strings.Contains(out, want) {
					t.Errorf("the chat lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "waiting for a worker") {
				t.Errorf("the chat says a custom tool call waits for a worker:\n%s", out)
			}
			if tc.result == "" {
				if n := u.Count() - before; n != 1 {
					t.Fatalf("%d model requests, want 1 (the call stays unanswered)", n)
				}
				return
			}
			if n := u.Count() - before; n != 2 {
				t.Fatalf("%d model requests, want 2", n)
			}
			msgs, _ := json.Marshal(u.Request(before + 1).Raw["messages"])
			want := `"content":[{"text":"` + tc.result + `","type":"text"}],"is_error":` + map[bool]string{true: "true", false: "false"}[tc.isError]
			if !strings.Contains(string(msgs), want) {
				t.Fatalf("the model got %s\nwant the tool_result %s", msgs, want)
			}
		})
	}
}

// A --custom-tool-cmd that runs past --custom-tool-timeout is stopped, and
// the call is answered with an error that says so.
func TestCustomToolCommandTimesOut(t *testing.T) {
	h := customToolHook{command: "exec sleep 30", timeout: 50 * time.Millisecond}
	got := h.answer(context.Background(), api.Event{ID: "sevt_1", Name: "get_weather", Input: json.RawMessage(`{}`)})
	if got.IsError == nil || !*got.IsError || !strings.Contains(got.Text(), "did not finish within 50ms") || got.CustomToolUseID != "sevt_1" {
		t.Fatalf("answer = %+v (%q)", got, got.Text())
	}
}
