package agent

import (
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
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
