package api

import (
	"encoding/json"
	"testing"
)

// hasUnknownKey says what decoding the object into a map would: whether a
// top-level key is not a known one, whatever the values hold (strings with
// braces, quotes and escapes, nested objects and arrays, literals, spaces).
// When it cannot tell it says so, and never answers wrong.
func TestHasUnknownKeyAgreesWithAMapDecode(t *testing.T) {
	known := []string{"type", "content", "id", "is_error"}
	for _, in := range []string{
		`{}`, ` { } `, `null`,
		`{"type":"user.message"}`,
		`{"type":"user.message","content":[{"type":"text","text":"a } ] \" {"}]}`,
		`{ "type" : "x" , "id" : "e1" , "is_error" : true }`,
		`{"type":"x","other":1}`,
		`{"content":{"nested":{"deep":[1,2,{"x":"}"}]}},"extra":null}`,
		`{"id":-1.5e3,"type":"\u0074","is_error":false}`,
		`{"type":"x","id":"\\","content":"\\\""}`,
		`{"ty\u0070e":"x"}`, // an escaped key: the map decode decides
		"{\n\t\"type\": \"x\",\r\n\t\"later\": [ ]\n}",
		`{"type":"x","content":[],"id":"a","is_error":null,"z":{}}`,
	} {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &fields); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		want := false
		for k := range fields {
			if !containsKey(known, []byte(k)) {
				want = true
			}
		}
		got, ok := hasUnknownKey([]byte(in), known)
		if ok && got != want {
			t.Errorf("%s: unknown key %v, want %v", in, got, want)
		}
		if !ok && in != `{"ty\u0070e":"x"}` {
			t.Errorf("%s: could not tell", in)
		}
	}
}

// An event keeps the fields memstore does not model, and only those.
func TestAnEventKeepsOnlyItsUnknownFields(t *testing.T) {
	var plain, extra Event
	if err := json.Unmarshal([]byte(`{"type":"user.message","content":[{"type":"text","text":"hi"}]}`), &plain); err != nil || plain.Extra != nil {
		t.Fatalf("a known event: extra %v, %v; want none", plain.Extra, err)
	}
	if err := json.Unmarshal([]byte(`{"type":"user.message","content":[],"future_field":{"a":1}}`), &extra); err != nil || string(extra.Extra["future_field"]) != `{"a":1}` || len(extra.Extra) != 1 {
		t.Fatalf("an event with a new field: extra %v, %v; want future_field alone", extra.Extra, err)
	}
}
