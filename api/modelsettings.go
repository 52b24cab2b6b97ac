package api

import (
	"encoding/json"
	"slices"
)

// Model settings an agent's model object may carry besides its id, as the
// hosted API accepts them. memstore stores them as sent (ModelConfig.Extra)
// and the Claude runtime sends them with every Messages request.
var (
	Efforts = []string{"low", "medium", "high", "xhigh", "max"}
	Speeds  = []string{"standard", "fast"}
)

// ModelSettings are the settings of a ModelConfig the runtime acts on;
// "" is a setting left to the model's default.
type ModelSettings struct {
	Effort       string
	Speed        string
	InferenceGeo string
}

// Settings reads effort (a level, or {"type": level}), speed and
// inference_geo from the model object, refusing values the Messages API
// would refuse on every request of the agent's sessions.
func (m ModelConfig) Settings() (ModelSettings, error) {
	var s ModelSettings
	if raw, ok := m.Extra["effort"]; ok && string(raw) != "null" {
		var obj struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &s.Effort) != nil {
			if json.Unmarshal(raw, &obj) != nil {
				return s, Errorf(InvalidRequest, "model.effort must be a level such as \"high\" or {\"type\":\"high\"}, got %s", raw)
			}
			s.Effort = obj.Type
		}
		if !slices.Contains(Efforts, s.Effort) {
			return s, Errorf(InvalidRequest, "model.effort %q is not a level; use one of %q", s.Effort, Efforts)
		}
	}
	if raw, ok := m.Extra["speed"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &s.Speed) != nil || !slices.Contains(Speeds, s.Speed) {
			return s, Errorf(InvalidRequest, "model.speed must be one of %q, got %s", Speeds, raw)
		}
	}
	if raw, ok := m.Extra["inference_geo"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &s.InferenceGeo) != nil {
			return s, Errorf(InvalidRequest, "model.inference_geo must be a string naming a region, got %s", raw)
		}
	}
	return s, nil
}
