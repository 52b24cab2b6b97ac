package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// flatBodies are memory write bodies: the usual shapes, which the fast
// path must take, and shapes it must leave to encoding/json.
var flatBodies = []struct {
	raw  string
	fast bool
}{
	{`{"path":"/a.md","content":"hello"}`, true},
	{` { "path" : "/a.md" , "content" : "line\nnext\t\"q\" \\ \/ \b\f\r" } `, true},
	{`{"content":"caf\u00e9 \u20ac \u0000 é 😀","path":null}`, true},
	{`{"content":"v2","precondition":{"type":"content_sha256","content_sha256":"abc"}}`, true},
	{`{"content":"v2","precondition":{"content_sha256":null}}`, true},
	{`{"path":"/b.md","precondition":null}`, true},
	{`{"content":""}`, true},
	{`{}`, true},
	{`{"content":"\ud83d\ude00"}`, false},     // a surrogate pair: encoding/json pairs it
	{`{"Content":"x"}`, false},                // encoding/json matches keys without case
	{`{"content":"x","content":"y"}`, false},  // a repeated key
	{`{"content":"x","extra":1}`, false},      // an unknown key
	{`{"content":5}`, false},                  // a type error, encoding/json's to tell
	{`{"content":"x"} {}`, false},             // data after the object
	{`{"content":"x",}`, false},               // invalid JSON
	{`{"content":"x`, false},                  // truncated
	{`{"content":"a` + "\x01" + `b"}`, false}, // a control character in a string
	{`{"content":"\x"}`, false},               // an unknown escape
	{`{"content":"\u12"}`, false},             // a short \u escape
	{`{"content":nul}`, false},                // not null
	{`{"content":nullx}`, false},              // not null either
	{`{"precondition":{"type":null}}`, false}, // null into a string
	{`{"precondition":{"type":"content_sha256","x":1}}`, false},
	{`["content"]`, false},
	{`"content"`, false},
}

func TestFastBodiesDecodeAsEncodingJSONDoes(t *testing.T) {
	for _, c := range flatBodies {
		raw := []byte(c.raw)
		// A create has no precondition: the key is unknown to it.
		checkFlatBody(t, raw, &createMemoryBody{}, &createMemoryBody{}, c.fast && !hasPrecondition(raw), "create")
		checkFlatBody(t, raw, &updateMemoryBody{}, &updateMemoryBody{}, c.fast, "update")
	}
}

// eventBodies are sends' bodies: a user's messages, which the fast path
// must take, and every other shape, which it leaves to encoding/json.
var eventBodies = []struct {
	raw  string
	fast bool
}{
	{`{"events":[{"type":"user.message","content":[{"type":"text","text":"hello"}]}]}`, true},
	{` { "events" : [ { "content" : [ { "text" : "a\nb \u00e9", "type" : "text" } , {"type":"text","text":""} ] , "type" : "user.message" } , {"type":"user.interrupt"} ] } `, true},
	{`{"events":[{"type":"user.message","content":[]}]}`, true},
	{`{"events":[{}]}`, true},
	{`{"events":[]}`, true},
	{`{}`, true},
	{`{"events":null}`, false},
	{`{"events":[{"type":"user.message","content":null}]}`, false},
	{`{"events":[{"type":"user.tool_result","tool_use_id":"sevt_1"}]}`, false}, // a key it does not read
	{`{"events":[{"type":"user.message","content":[{"type":"image","source":{}}]}]}`, false},
	{`{"events":[{"type":"user.message","Content":[]}]}`, false}, // encoding/json matches keys without case
	{`{"events":[{"type":"user.message","type":"x"}]}`, false},   // a repeated key
	{`{"events":[{"type":5}]}`, false},
	{`{"events":[{"type":"user.message"},]}`, false},
	{`{"events":[{"type":"user.message"}]`, false},
	{`{"events":[{"type":"user.message"}]} []`, false},
	{`{"events":[{"type":"user.message","content":[{"type":"text","text":"\ud83d\ude00"}]}]}`, false},
	{`{"events":{"type":"user.message"}}`, false},
	{`{"events":[],"extra":1}`, false},
	{`[]`, false},
}

func TestFastSendsDecodeAsEncodingJSONDoes(t *testing.T) {
	for _, c := range eventBodies {
		checkFlatBody(t, []byte(c.raw), &sendEventsBody{}, &sendEventsBody{}, c.fast, "send")
	}
}

// checkFlatBody decodes raw with the fast path into fast and with
// encoding/json into slow: when the fast path takes it, both must agree
// and encoding/json must accept it; when it declines, fast is untouched.
func checkFlatBody(t *testing.T, raw []byte, fast, slow fastDecoder, wantFast bool, kind string) {
	t.Helper()
	before := reflect.ValueOf(fast).Elem().Interface()
	took := fast.decodeFast(raw)
	err := json.Unmarshal(raw, slow)
	switch {
	case took != wantFast:
		t.Errorf("%s %q: fast path took it: %v, want %v", kind, raw, took, wantFast)
	case !took:
		if after := reflect.ValueOf(fast).Elem().Interface(); !reflect.DeepEqual(before, after) {
			t.Errorf("%s %q: declined but changed the body to %+v", kind, raw, after)
		}
	case err != nil:
		t.Errorf("%s %q: the fast path took a body encoding/json refuses: %v", kind, raw, err)
	case !reflect.DeepEqual(fast, slow):
		t.Errorf("%s %q: fast path %s, encoding/json %s", kind, raw, dump(fast), dump(slow))
	}
}

func hasPrecondition(raw []byte) bool {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	_, ok := m["precondition"]
	return ok
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzFastBodies holds the fast path to encoding/json on any body that
// passes checkUnicode, as decodeBody calls it.
func FuzzFastBodies(f *testing.F) {
	for _, c := range flatBodies {
		f.Add([]byte(c.raw))
	}
	for _, c := range eventBodies {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if checkUnicode(raw) != nil {
			return
		}
		for _, pair := range [][2]fastDecoder{{&createMemoryBody{}, &createMemoryBody{}}, {&updateMemoryBody{}, &updateMemoryBody{}}, {&sendEventsBody{}, &sendEventsBody{}}} {
			if !pair[0].decodeFast(raw) {
				continue
			}
			if err := json.Unmarshal(raw, pair[1]); err != nil {
				t.Fatalf("%q: the fast path took a body encoding/json refuses: %v", raw, err)
			}
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Fatalf("%q: fast path %s, encoding/json %s", raw, dump(pair[0]), dump(pair[1]))
			}
		}
	})
}

// BenchmarkDecodeMemoryBody decodes a guarded update of 4 KB of text, as
// the PostgreSQL write benchmark sends it, with decodeBody (the fast path)
// and with json.Unmarshal beside it.
func BenchmarkDecodeMemoryBody(b *testing.B) {
	text := make([]byte, 0, 4096)
	for len(text) < 4000 {
		text = append(text, "the quick brown fox jumps over the lazy dog\n"...)
	}
	raw, _ := json.Marshal(map[string]any{
		"content":      string(text),
		"precondition": map[string]string{"type": "content_sha256", "content_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
	})
	b.Run("decodeBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var body updateMemoryBody
			if err := decodeBody(raw, &body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var body updateMemoryBody
			if err := checkUnicode(raw); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeSendBody decodes a user's message of 1 KB, as the
// PostgreSQL queue benchmark sends it, with decodeBody (the fast path) and
// with json.Unmarshal beside it.
func BenchmarkDecodeSendBody(b *testing.B) {
	raw, _ := json.Marshal(api.SendEventsRequest{Events: []api.Event{api.UserMessage(strings.Repeat("message ", 1024/8))}})
	b.SetBytes(int64(len(raw)))
	b.Run("decodeBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var body sendEventsBody
			if err := decodeBody(raw, &body); err != nil || len(body.Events) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var body sendEventsBody
			if err := checkUnicode(raw); err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(raw, &body); err != nil || len(body.Events) != 1 {
				b.Fatal(err)
			}
		}
	})
}
