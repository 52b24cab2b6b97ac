package api

import (
	"encoding/json"
	"strings"
	"testing"
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
