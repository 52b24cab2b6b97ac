package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// A send's answer is the bytes writeJSON would write for it, for every
// kind of event: with and without the client's own fields (Extra, raw and
// spaced as the client sent them), blocks with fields of their own, text
// that encoding/json escapes, and no events at all.
func TestEventsAnswerAsWriteJSONWritesThem(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 0, 0, 123456000, time.UTC)
	isErr := true
	var image api.ContentBlock
	if err := json.Unmarshal([]byte(`{"type":"image", "source": {"type": "base64", "data": "aGk="}}`), &image); err != nil {
		t.Fatal(err)
	}
	var custom api.Event
	if err := json.Unmarshal([]byte(`{"type":"user.message","content":[{"type":"text","text":"x"}], "client_note" : { "a" : [1, 2] , "b":"<&>" }}`), &custom); err != nil {
		t.Fatal(err)
	}
	if len(custom.Extra) == 0 {
		t.Fatal("the custom event kept no field of its own")
	}
	message := api.UserMessage("line one\nquote \" and <b>&</b> \u2028 é")
	message.ID, message.ProcessedAt = "sevt_1", &at
	for _, events := range [][]api.Event{
		nil,
		{},
		{message},
		{message, {ID: "sevt_2", Type: "agent.tool_use", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}},
		{{ID: "sevt_3", Type: "user.tool_result", ToolUseID: "sevt_2", IsError: &isErr, Content: []api.ContentBlock{image, {Type: "text"}}}},
		{custom, message},
	} {
		want := httptest.NewRecorder()
		writeJSON(want, 200, api.SendEventsResponse{Data: events})
		got := httptest.NewRecorder()
		writeEvents(got, events)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Errorf("events %d: answered\n%s\nwant\n%s", len(events), got.Body, want.Body)
		}
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("events %d: answered %d %q, want %d %q", len(events), got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
		}
	}
}

// BenchmarkEventsAnswer answers a send of a user's 1 KB message with its
// three scripted reactions, as the PostgreSQL queue benchmark's sends are
// answered, with writeEvents and with writeJSON beside it.
func BenchmarkEventsAnswer(b *testing.B) {
	at := time.Now()
	events := []api.Event{api.UserMessage(strings.Repeat("message ", 1024/8)), {Type: "session.status_running"}, {Type: "agent.message", Content: []api.ContentBlock{{Type: "text", Text: "done"}}}, {Type: "session.status_idle"}}
	for i := range events {
		events[i].ID, events[i].ProcessedAt = fmt.Sprint("sevt_", i), &at
	}
	b.Run("writeEvents", func(b *testing.B) {
		for b.Loop() {
			writeEvents(httptest.NewRecorder(), events)
		}
	})
	b.Run("writeJSON", func(b *testing.B) {
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), 200, api.SendEventsResponse{Data: events})
		}
	})
}
