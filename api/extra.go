package api

import (
	"bytes"
	"encoding/json"
	"sort"
)

// Extra holds the JSON fields of an object that its Go type does not model.
// Events and content blocks carry one so that a field memstore does not know
// (a newer event type, a block with a source) survives a decode and an encode
// unchanged instead of being dropped on the floor.
type Extra map[string]json.RawMessage

// marshalWithExtra encodes known (a struct with JSON tags) and then adds the
// extra fields whose names the struct did not already write. Keys are sorted
// so that the output is stable.
func marshalWithExtra(known any, extra Extra) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := fields[k]; !ok {
			fields[k] = v
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(fields[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// unmarshalWithExtra decodes b into known and returns the fields whose names
// are not in knownNames, or nil when there are none.
func unmarshalWithExtra(b []byte, known any, knownNames ...string) (Extra, error) {
	if err := json.Unmarshal(b, known); err != nil {
		return nil, err
	}
	if unknown, ok := hasUnknownKey(b, knownNames); ok && !unknown {
		return nil, nil // the common case, told without decoding b again
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for _, k := range knownNames {
		delete(fields, k)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return Extra(fields), nil
}

// hasUnknownKey reports whether object b, valid JSON (json.Unmarshal took
// it), has a top-level key not in known. ok is false when it cannot tell
// cheaply (a key with an escape): the caller decodes b into a map then.
// It reads b once, without allocating: decoding every event a second time
// into a map, only to find no unknown field, was a sixth of a send's JSON.
func hasUnknownKey(b []byte, known []string) (unknown, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false, true // null: no fields at all
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		if b[i] != '"' {
			return false, false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' {
			if b[end] == '\\' {
				return false, false
			}
			end++
		}
		if end == len(b) {
			return false, false
		}
		key := b[i+1 : end]
		if !containsKey(known, key) {
			return true, true
		}
		i = skipSpace(b, end+1)
		if i == len(b) || b[i] != ':' {
			return false, false
		}
		i = skipSpace(b, skipValue(b, skipSpace(b, i+1)))
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return false, i < len(b)
}

func containsKey(known []string, key []byte) bool {
	for _, k := range known {
		if k == string(key) {
			return true
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index after the JSON value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++ // a number, true, false or null
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// NullableString is a request field that distinguishes "omitted" (leave the
// stored value alone) from an explicit null (clear it) and from a value.
type NullableString struct {
	Set   bool   // the field was present in the JSON
	Null  bool   // it was present and null
	Value string // its value when present and not null
}

// NewNullableString is a NullableString set to s.
func NewNullableString(s string) NullableString { return NullableString{Set: true, Value: s} }

// UnmarshalJSON records presence; encoding/json calls it for an explicit null
// too, and never for an absent field.
func (n *NullableString) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Null, n.Value = true, ""
		return nil
	}
	n.Null = false
	return json.Unmarshal(b, &n.Value)
}

// MarshalJSON writes null or the value. Use it with omitzero so that an unset
// field is left out.
func (n NullableString) MarshalJSON() ([]byte, error) {
	if n.Null || !n.Set {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// IsZero reports an unset field, for the omitzero tag option.
func (n NullableString) IsZero() bool { return !n.Set }
