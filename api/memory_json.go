package api

import (
	"encoding/json"
	"fmt"
)

// MarshalJSON writes whichever of the two variants is set.
func (it MemoryListItem) MarshalJSON() ([]byte, error) {
	switch {
	case it.Memory != nil:
		return json.Marshal(it.Memory)
	case it.Prefix != nil:
		return json.Marshal(it.Prefix)
	default:
		return nil, fmt.Errorf("api: empty MemoryListItem")
	}
}

// UnmarshalJSON picks the variant by the "type" field.
func (it *MemoryListItem) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	switch head.Type {
	case "memory":
		it.Memory, it.Prefix = new(Memory), nil
		return json.Unmarshal(b, it.Memory)
	case "memory_prefix":
		it.Memory, it.Prefix = nil, new(MemoryPrefix)
		return json.Unmarshal(b, it.Prefix)
	default:
		return fmt.Errorf("api: unknown memory list item type %q", head.Type)
	}
}
