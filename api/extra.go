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
