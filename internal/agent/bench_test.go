package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/storage"
)

// BenchmarkScriptedTurn runs one turn of the scripted runtime with 500 tool
// calls on SQLite, answering each call as a worker would and letting the
// Runner react; one op is the whole turn, and ns/call is what one answer
// costs on average while the log grows by two events per call.
func BenchmarkScriptedTurn(b *testing.B) {
	const calls = 500
	script := `{"tool_calls":[` + strings.TrimSuffix(strings.Repeat(`{"name":"bash","input":{"command":"true"}},`, calls), ",") + `]}`
	for b.Loop() {
		b.StopTimer()
		h := newHarness(b, api.ScriptedModel)
		b.StartTimer()
		h.mustSend(api.UserMessage(script))
		for range calls {
			last, err := h.db.ListEvents(h.ctx, h.sess.ID, storage.EventQuery{Desc: true, Limit: 1})
			if err != nil || last[0].Event.Type != api.EventAgentToolUse {
				b.Fatalf("last event %+v, %v; want an agent.tool_use", last, err)
			}
			h.mustSend(api.UserToolResult(last[0].Event.ID, "ok", false))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}

// BenchmarkModelTurn runs one model turn per op — a user.message, one
// request to an in-process upstream that answers at once, the reply's
// events, idle — against the same request made directly with the SDK, so
// the server's share of a turn is a number: overhead-ns/turn is the turn
// minus the bare streamed call (HTTP round trip, encoding, decoding).
func BenchmarkModelTurn(b *testing.B) {
	u := modeltest.New(b)
	h := newHarnessWith(b, api.SessionAgent{Model: api.ModelConfig{ID: "claude-bench"}, Tools: []json.RawMessage{json.RawMessage(`{"type":"agent_toolset_20260401"}`)}}, nil, claudeConfig(u))
	direct := NewClaude(claudeConfig(u))
	reply := func() { u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 2, 0, 0), modeltest.Text("ok")) }

	// The bare call, with the request a turn would send.
	const calls = 50
	v, err := h.db.ViewSession(h.ctx, h.sess.ID)
	if err != nil {
		b.Fatal(err)
	}
	v.Log = []api.Event{api.UserMessage("hello")}
	params, err := direct.buildRequest(v)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for range calls {
		reply()
		if _, err := direct.stream(h.ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	bare := time.Since(start) / calls

	b.ResetTimer()
	for b.Loop() {
		reply()
		h.mustSend(api.UserMessage("hello"))
		for h.status() != api.SessionIdle {
			<-h.appended
		}
	}
	turn := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(bare.Nanoseconds()), "upstream-ns/turn")
	b.ReportMetric(float64((turn - bare).Nanoseconds()), "overhead-ns/turn")
}
