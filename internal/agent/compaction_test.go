package agent

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testenv"
)

// A long session (300 turns in the long run), a tool call every tenth turn, against an
// upstream whose reported input tokens grow with the conversation: the
// runtime compacts before the window is reached, every turn is answered,
// the log keeps every event, and a restart in the middle of a
// summarisation and another between turns change nothing.
func TestLongSessionIsCompactedBeforeTheWindow(t *testing.T) {
	// 300 turns in the long run; the test command runs 120 against a
	// smaller window, which still compacts more than six times (every
	// step reads the whole log, so 300 turns take minutes under -race).
	var (
		turns  = testenv.Scale(120, 300)
		window = int64(testenv.Scale(8_000, 20_000))
	)
	const (
		perMsg  = 150 // tokens the upstream reports per message
		system  = 500
		stallAt = 3 // the summarisation that hangs until the server restarts
	)
	u := modeltest.New(t)
	cfg := claudeConfig(u)
	cfg.ContextWindow, cfg.MaxTokens = window, 1000
	h := modelHarness(t, u, toolsetWith())

	var (
		mu          sync.Mutex
		summaries   int
		largest     int
		calls       int
		firstOfLast []any // the first block of the latest request
	)
	h.claude = cfg
	h.restart() // the runner with cfg
	u.Otherwise(func(req modeltest.Request) modeltest.Handler {
		mu.Lock()
		defer mu.Unlock()
		msgs := req.Params.Messages
		size := system + perMsg*len(msgs)
		largest = max(largest, size)
		last := *content(msgs[len(msgs)-1])
		switch b := last[len(last)-1]; {
		case b.OfText != nil && b.OfText.Text == summaryInstruction:
			if req.Raw["tool_choice"].(map[string]any)["type"] != "none" {
				t.Errorf("a summarisation may call tools: %v", req.Raw["tool_choice"])
			}
			summaries++
			if summaries == stallAt {
				return modeltest.Stall(func() {})
			}
			return modeltest.Answer(anthropic.StopReasonEndTurn, modeltest.Usage(int64(size), 300, 0, 0), modeltest.Text(fmt.Sprintf("summary #%d", summaries)))
		case b.OfToolResult != nil, b.OfText != nil && strings.HasPrefix(b.OfText.Text, "The result of your tool call"),
			b.OfText != nil && !strings.HasSuffix(b.OfText.Text, "0"):
			// A tool's result, one whose call was summarised, or a turn that
			// needs no tool: the turn's answer.
			firstOfLast = req.Raw["messages"].([]any)[0].(map[string]any)["content"].([]any)
			return modeltest.Answer(anthropic.StopReasonEndTurn, modeltest.Usage(int64(size), 50, 0, 0), modeltest.Text("answer"))
		default:
			calls++
			return modeltest.Answer(anthropic.StopReasonToolUse, modeltest.Usage(int64(size), 50, 0, 0), modeltest.ToolUse(fmt.Sprintf("toolu_%d", calls), "read", `{"file_path":"/a.md"}`))
		}
	})
	// wait waits for done; a summarisation left hanging is the moment the
	// server restarts.
	restartedMidSummary := false
	count := func(typ string) int {
		evs, err := h.db.ListEvents(h.ctx, h.sess.ID, storage.EventQuery{Types: []string{typ}})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	wait := func(typ string, n int) {
		t.Helper()
		for bound := time.After(60 * time.Second); ; {
			if count(typ) == n {
				return
			}
			select {
			case <-h.appended:
			case <-time.After(200 * time.Millisecond):
				mu.Lock()
				hanging := summaries == stallAt && !restartedMidSummary
				mu.Unlock()
				if hanging {
					restartedMidSummary = true
					h.restart()
					if err := h.runner.React(h.ctx, h.sess.ID); err != nil {
						t.Fatal(err)
					}
				}
			case <-bound:
				log := h.log()
				t.Fatalf("the session never reached %d %s; log ends %s", n, typ, typesOf(log[max(0, len(log)-12):]))
			}
		}
	}
	// Every tenth turn calls a tool (the log of a tool-heavy session costs
	// the test its time: every step reads the whole log).
	for i := range turns {
		if i == turns/2 {
			h.restart()
		}
		h.mustSend(api.UserMessage(fmt.Sprintf("turn %d", i)))
		if i%10 == 0 {
			wait(api.EventAgentToolUse, i/10+1)
			h.answer("contents", false)
		}
		wait(api.EventAgentMessage, i+1)
	}
	log := h.idleAgain(0)

	mu.Lock()
	defer mu.Unlock()
	if int64(largest) >= window {
		t.Errorf("a request of %d tokens was sent; the window is %d", largest, window)
	}
	compactions := eventsOf(log, api.EventAgentThreadContextCompacted)
	// Two messages a turn (four with a tool) of 150 tokens each: a
	// compaction every ~40 turns (~17 with the test command's window).
	if len(compactions) < 6 || len(compactions) != summaries-1 || !restartedMidSummary {
		t.Fatalf("%d compactions recorded, %d summarisations made, restarted mid-summary: %v", len(compactions), summaries, restartedMidSummary)
	}
	for i, c := range compactions {
		want := fmt.Sprintf("summary #%d", i+1)
		if i+1 >= stallAt {
			want = fmt.Sprintf("summary #%d", i+2) // the hanging one was made again
		}
		if c.Text() != want {
			t.Fatalf("compaction %d holds %q, want %q", i, c.Text(), want)
		}
	}
	if n := len(eventsOf(log, api.EventUserMessage)); n != turns {
		t.Fatalf("the log keeps %d of %d user messages", n, turns)
	}
	if n := len(eventsOf(log, api.EventAgentMessage)); n != turns {
		t.Fatalf("%d answers to %d turns", n, turns)
	}
	// The latest requests start from the latest summary, a cache breakpoint
	// after it.
	first := firstOfLast[0].(map[string]any)
	if text, _ := first["text"].(string); text != summaryPreamble+compactions[len(compactions)-1].Text() {
		t.Fatalf("the last request starts with %q", text)
	}
	if cc, _ := first["cache_control"].(map[string]any); cc["type"] != "ephemeral" {
		t.Fatalf("no cache breakpoint after the summary: %v", first)
	}
	if !strings.Contains(typesOf(log), "span.model_request_end agent.thread_context_compacted span.model_request_start") {
		t.Fatal("a compaction is not followed by the request it made room for")
	}
}
