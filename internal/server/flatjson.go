package server

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/memstore/memstore/api"
)

// A memory write's body is a 4 KB string or so in a small object, and
// json.Unmarshal reads it twice (it validates the whole body, then
// decodes it): that was half of the HTTP handler's own CPU on a create
// (docs/postgresql-performance.md). fastDecoder is a body that decodes
// its usual shape in one pass; decodeBody falls back to json.Unmarshal
// whenever it declines, so every answer outside that shape, errors
// included, is encoding/json's.
type fastDecoder interface {
	// decodeFast decodes raw, already checked by checkUnicode, and
	// reports whether it did. It declines (false, the body untouched)
	// unless raw is a JSON object of exactly the keys it knows, once
	// each, with the values it expects.
	decodeFast(raw []byte) bool
}

// flatScan reads the JSON shapes fastDecoder accepts: objects whose
// values are strings, null, such objects or arrays of them. Each method
// reports false on anything else.
type flatScan struct {
	b []byte
	i int
}

func (s *flatScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c, after white space.
func (s *flatScan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *flatScan) end() bool {
	s.space()
	return s.i == len(s.b)
}

// null consumes the literal null.
func (s *flatScan) null() bool {
	s.space()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// str reads a string. It declines control characters (invalid JSON) and
// \u escapes of surrogates (left to encoding/json, which pairs them).
func (s *flatScan) str() (string, bool) {
	if !s.next('"') {
		return "", false
	}
	// Find the closing quote first: the decoded text is no longer than
	// the raw, so it is built in one allocation.
	end, plain := s.i, true
	for ; end < len(s.b); end++ {
		c := s.b[end]
		if !strSpecial[c] {
			continue
		}
		if c == '"' {
			break
		}
		if c < 0x20 {
			return "", false
		}
		plain = false // a backslash: the next byte is escaped
		end++
	}
	if end >= len(s.b) {
		return "", false
	}
	if plain {
		v := string(s.b[s.i:end])
		s.i = end + 1
		return v, true
	}
	var out strings.Builder
	out.Grow(end - s.i)
	for s.i < end {
		run := bytes.IndexByte(s.b[s.i:end], '\\')
		if run < 0 {
			out.Write(s.b[s.i:end])
			break
		}
		out.Write(s.b[s.i : s.i+run])
		e := s.b[s.i+run+1]
		s.i += run + 2
		switch e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(s.b[:end], s.i)
			if !ok || utf8.RuneLen(r) < 0 { // a surrogate
				return "", false
			}
			out.WriteRune(r)
			s.i += 4
		default:
			return "", false
		}
	}
	s.i = end + 1
	return out.String(), true
}

// strSpecial marks the bytes str stops at inside a string: its end, an
// escape, and the control characters JSON does not allow there.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// optString reads a string or null, as encoding/json fills a *string.
func (s *flatScan) optString() (*string, bool) {
	if s.null() {
		return nil, true
	}
	v, ok := s.str()
	return &v, ok
}

// object reads an object, handing each key to field, which reads the
// value. A key seen twice declines: encoding/json merges a repeated
// object key into what it read before, which is not worth copying here.
func (s *flatScan) object(field func(key string) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen []string
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return false
		}
		for _, k := range seen {
			if k == key {
				return false
			}
		}
		seen = append(seen, key)
		if !field(key) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

// array reads an array, elem reading each of its values.
func (s *flatScan) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next(']')
	}
}

// decodeFlat runs field on each key of the one object raw holds, with the
// scan at the key's value; false when raw is anything else or field
// refuses a key or its value.
func decodeFlat(raw []byte, field func(s *flatScan, key string) bool) bool {
	s := flatScan{b: raw}
	return s.object(func(key string) bool { return field(&s, key) }) && s.end()
}

// pathOrContent decodes the path or content key, which both bodies have;
// known is false for any other key.
func pathOrContent(s *flatScan, key string, path, content **string) (known, ok bool) {
	switch key {
	case "path":
		*path, ok = s.optString()
	case "content":
		*content, ok = s.optString()
	default:
		return false, false
	}
	return true, ok
}

func (b *createMemoryBody) decodeFast(raw []byte) bool {
	var out createMemoryBody
	whole := decodeFlat(raw, func(s *flatScan, key string) bool {
		_, ok := pathOrContent(s, key, &out.Path, &out.Content)
		return ok
	})
	if whole {
		*b = out
	}
	return whole
}

func (b *updateMemoryBody) decodeFast(raw []byte) bool {
	var out updateMemoryBody
	whole := decodeFlat(raw, func(s *flatScan, key string) bool {
		if known, ok := pathOrContent(s, key, &out.Path, &out.Content); known {
			return ok
		}
		if key != "precondition" {
			return false
		}
		if s.null() {
			return true
		}
		pre := new(memoryPrecondition)
		out.Precondition = pre
		return s.object(func(key string) bool {
			var ok bool
			switch key {
			case "type":
				pre.Type, ok = s.str()
			case "content_sha256":
				pre.ContentSHA256, ok = s.optString()
			}
			return ok
		})
	})
	if whole {
		*b = out
	}
	return whole
}

// sendEventsBody is a send's body. A user's message (an event of a type
// and text blocks) sent to a session took json.Unmarshal about 34 µs for
// 1 KB of text, a tenth of this process's CPU per send in the PostgreSQL
// queue benchmark: it validates the whole body, then each event and each
// block again as their UnmarshalJSON hands them to it. The fast path takes
// events whose keys are type and content, and blocks whose keys are type
// and text; anything else goes to encoding/json, whose api.Event keeps
// unknown fields.
type sendEventsBody api.SendEventsRequest

func (b *sendEventsBody) decodeFast(raw []byte) bool {
	var out sendEventsBody
	whole := decodeFlat(raw, func(s *flatScan, key string) bool {
		if key != "events" {
			return false
		}
		out.Events = []api.Event{}
		return s.array(func() bool {
			var e api.Event
			ok := s.object(func(key string) bool {
				var ok bool
				switch key {
				case "type":
					e.Type, ok = s.str()
				case "content":
					e.Content, ok = contentBlocks(s)
				}
				return ok
			})
			out.Events = append(out.Events, e)
			return ok
		})
	})
	if whole {
		*b = out
	}
	return whole
}

// contentBlocks reads an event's content: blocks whose keys are type and
// text.
func contentBlocks(s *flatScan) ([]api.ContentBlock, bool) {
	blocks := []api.ContentBlock{}
	ok := s.array(func() bool {
		var c api.ContentBlock
		ok := s.object(func(key string) bool {
			var ok bool
			switch key {
			case "type":
				c.Type, ok = s.str()
			case "text":
				c.Text, ok = s.str()
			}
			return ok
		})
		blocks = append(blocks, c)
		return ok
	})
	return blocks, ok
}
