package agent

import (
	"encoding/json"
	"fmt"
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

// BenchmarkScanLongLog measures what each runtime's reading of a session's
// log costs per step when the session is long: 200 finished turns of 5
// tool calls each (about 4,000 events) and an open one, scanned as every
// append does. A step's cost grows with the log, so what a scan allocates
// per past call is paid again on every step.
func BenchmarkScanLongLog(b *testing.B) {
	const turns, calls = 200, 5
	var scripted, model []api.Event
	id := 0
	next := func(e api.Event) api.Event { id++; e.ID = fmt.Sprint("sevt_", id); return e }
	for t := 0; t <= turns; t++ {
		scripted = append(scripted, next(api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)), next(api.Event{Type: api.EventSessionStatusRunning}))
		model = append(model, next(api.UserMessage("go on")), next(api.Event{Type: api.EventSessionStatusRunning}))
		for range calls {
			use := next(api.Event{Type: api.EventAgentToolUse, Name: "bash", Input: json.RawMessage(`{"command":"true"}`)})
			scripted = append(scripted, use, next(api.UserToolResult(use.ID, "ok", false)))
			start := next(api.Event{Type: api.EventSpanModelRequestStart})
			muse := next(api.Event{Type: api.EventAgentToolUse, Name: "bash", Input: json.RawMessage(`{"command":"true"}`), EvaluatedPermission: api.PermissionAllow})
			model = append(model, start, next(api.Event{Type: api.EventSpanModelRequestEnd, ModelRequestStartID: start.ID}), muse, next(api.UserToolResult(muse.ID, "ok", false)))
		}
		if t < turns {
			scripted = append(scripted, next(api.Event{Type: api.EventSessionStatusIdle}))
			model = append(model, next(api.Event{Type: api.EventSessionStatusIdle}))
		}
	}
	b.Run("scripted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := scan(scripted); st.cur == nil {
				b.Fatal("the last turn is not open")
			}
		}
		b.ReportMetric(float64(len(scripted)), "events")
	})
	b.Run("model", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := scanModel(model); st.cur == nil || len(st.cur.uses) != 1 {
				b.Fatal("the last turn is not open with its latest call")
			}
		}
		b.ReportMetric(float64(len(model)), "events")
	})
}
