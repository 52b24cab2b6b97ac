package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestEventRoundTripsUnknownFields(t *testing.T) {
	in := `{"id":"sevt_1","type":"agent.thinking","processed_at":"2026-05-01T12:00:00Z","session_thread_id":"th_1","content":[{"type":"image","source":{"type":"url","url":"u"}}],"weird":{"a":[1,2]}}`
	var e Event
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if e.Type != "agent.thinking" || e.ID != "sevt_1" || e.ProcessedAt == nil {
		t.Fatalf("typed fields lost: %+v", e)
	}
	if string(e.Extra["session_thread_id"]) != `"th_1"` || string(e.Extra["weird"]) != `{"a":[1,2]}` {
		t.Fatalf("extra fields lost: %v", e.Extra)
	}
	if string(e.Content[0].Extra["source"]) != `{"type":"url","url":"u"}` {
		t.Fatalf("content block extra lost: %v", e.Content[0].Extra)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("round trip changed the event:\n in  %s\n out %s", ja, jb)
	}
}

func TestEventTypedFieldsWinOverExtra(t *testing.T) {
	e := Event{Type: EventAgentMessage, Content: TextContent(""), Extra: Extra{"type": json.RawMessage(`"spoofed"`)}}
	out, _ := json.Marshal(e)
	if !strings.Contains(string(out), `"type":"agent.message"`) || strings.Contains(string(out), "spoofed") {
		t.Fatalf("Marshal = %s", out)
	}
	if !strings.Contains(string(out), `"text":""`) {
		t.Fatalf("an empty text block lost its text field: %s", out)
	}
}

func TestModelConfigAcceptsStringAndObject(t *testing.T) {
	for _, in := range []string{`"scripted"`, `{"id":"scripted"}`, `{"id":"scripted","speed":"fast"}`} {
		var m ModelConfig
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if m.ID != "scripted" {
			t.Fatalf("%s: id = %q", in, m.ID)
		}
		out, _ := json.Marshal(m)
		if !strings.HasPrefix(string(out), `{"id":"scripted"`) {
			t.Fatalf("%s: marshalled as %s, want the object form", in, out)
		}
		if strings.Contains(in, "speed") && !strings.Contains(string(out), `"speed":"fast"`) {
			t.Fatalf("%s: extra setting dropped: %s", in, out)
		}
	}
	var m ModelConfig
	if err := json.Unmarshal([]byte(`42`), &m); err == nil {
		t.Fatal("a number was accepted as a model")
	}
}

func TestAgentRefForms(t *testing.T) {
	for in, want := range map[string]AgentRef{
		`"agent_1"`:                                   AgentRef{ID: "agent_1"},
		`{"type":"agent","id":"agent_1"}`:             AgentRef{ID: "agent_1"},
		`{"type":"agent","id":"agent_1","version":3}`: AgentRef{ID: "agent_1", Version: 3},
	} {
		var a AgentRef
		if err := json.Unmarshal([]byte(in), &a); err != nil || a != want {
			t.Fatalf("%s: got %+v, %v; want %+v", in, a, err, want)
		}
	}
}

func TestWorkSecretRoundTrip(t *testing.T) {
	s := WorkSecret{SessionsToken: "tok/+=", APIBaseURL: "http://127.0.0.1:8080"}
	enc := s.Encode()
	if strings.ContainsAny(enc, "+/=") {
		t.Fatalf("secret %q is not URL-safe unpadded base64", enc)
	}
	got, err := DecodeWorkSecret(enc)
	if err != nil || got != s {
		t.Fatalf("DecodeWorkSecret = %+v, %v", got, err)
	}
	if _, err := DecodeWorkSecret("!!"); err == nil {
		t.Fatal("garbage decoded")
	}
}

func TestNullableStringPresence(t *testing.T) {
	var r UpdateSessionRequest
	json.Unmarshal([]byte(`{}`), &r)
	if r.Title.Set {
		t.Fatal("absent title reported as set")
	}
	json.Unmarshal([]byte(`{"title":null}`), &r)
	if !r.Title.Set || !r.Title.Null {
		t.Fatalf("null title: %+v", r.Title)
	}
	r = UpdateSessionRequest{}
	json.Unmarshal([]byte(`{"title":"x"}`), &r)
	if !r.Title.Set || r.Title.Null || r.Title.Value != "x" {
		t.Fatalf("title x: %+v", r.Title)
	}
	out, _ := json.Marshal(UpdateSessionRequest{})
	if string(out) != `{}` {
		t.Fatalf("unset title marshalled: %s", out)
	}
}

// An event's encoding writes its blocks without their MarshalJSON where they
// have no Extra. Its bytes are those of the plain encoding through each
// block's MarshalJSON, field for field and in order, for every kind of
// block and event (stored bodies and responses are these bytes).
func TestEventEncodingIsItsBlocksOwn(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	yes := true
	text := strings.Repeat(`a "quoted" <b>&amp; é 😀 \ line`+"\n\t", 40)
	events := []Event{
		{ID: "sevt_1", Type: EventUserMessage, ProcessedAt: &at, Content: TextContent(text)},
		{Type: EventAgentMessage, Content: TextContent("")},
		{Type: EventUserMessage, Content: []ContentBlock{}},
		{Type: EventSessionStatusIdle, ProcessedAt: &at},
		{Type: EventUserToolResult, ToolUseID: "sevt_2", IsError: &yes, Content: []ContentBlock{
			{Type: "text", Text: "one"},
			{Type: "image", Extra: Extra{"source": json.RawMessage(`{"type":"url","url":"u"}`)}},
			{Type: "document"},
			{Type: "other", Text: "kept"},
			{Type: "text", Text: "with extra", Extra: Extra{"citations": json.RawMessage(`[]`)}},
		}},
		{Type: EventAgentToolUse, Name: "bash", Input: json.RawMessage(`{"command": "ls  -la"}`), Content: TextContent("x"),
			Extra: Extra{"session_thread_id": json.RawMessage(`"th_1"`)}},
	}
	for i, e := range events {
		type plain Event
		want, err := marshalWithExtra(plain(e), e.Extra)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("event %d encodes as\n %s\nwant\n %s", i, got, want)
		}
		inResponse, err := json.Marshal(SendEventsResponse{Data: []Event{e}})
		if err != nil || !strings.Contains(string(inResponse), string(want)) {
			t.Fatalf("event %d in a response: %s, %v; want it to hold %s", i, inResponse, err, want)
		}
	}
}
