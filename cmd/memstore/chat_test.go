package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
)

// memstore chat driven through a pipe: one message per line, each answered
// before the next goes out, and the usage printed at the end of input.
func TestChatThroughAPipe(t *testing.T) {
	u := modeltest.New(t)
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	t.Setenv("MEMSTORE_API_KEY", "")
	t.Setenv(agent.ModelKeyVar, "sk-upstream-test")
	rs, err := startServer(context.Background(), serveOptions{addr: "127.0.0.1:0", dataDir: t.TempDir(), modelBaseURL: u.URL},
		slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.shutdown() })
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
