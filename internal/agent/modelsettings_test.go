package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

// The agent's model object reaches the upstream as the Messages API defines
// it: effort in output_config, speed and inference_geo at the top, thinking
// adaptive for a model made for it and budgeted for an older one.
func TestModelSettingsReachTheUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, model  string
		budget       int64
		wantThinking string
	}{
		{"adaptive model, object form", `{"id":"claude-opus-4-6","effort":{"type":"high"},"speed":"fast","inference_geo":"us"}`, 2048, `{"type":"adaptive"}`},
		{"adaptive model, bare effort", `{"id":"claude-sonnet-5","effort":"low"}`, 0, `{"type":"adaptive"}`},
		{"budgeted model", `{"id":"claude-sonnet-4-5","effort":"max","speed":"standard"}`, 2048, `{"budget_tokens":2048,"type":"enabled"}`},
		{"budgeted model without a budget", `"claude-haiku-4-5-20251001"`, 0, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m api.ModelConfig
			if err := json.Unmarshal([]byte(tc.model), &m); err != nil {
				t.Fatal(err)
			}
			u := modeltest.New(t)
			cfg := claudeConfig(u)
			cfg.ThinkingBudget = tc.budget
			h := newHarnessWith(t, api.SessionAgent{Model: m}, nil, cfg)
			u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(10, 2, 0, 0), modeltest.Text("ok"))
			h.mustSend(api.UserMessage("hello"))
			h.idleAgain(0)
			raw := u.Request(0).Raw
			settings, _ := m.Settings()
			thinking, _ := json.Marshal(raw["thinking"])
			if raw["thinking"] == nil {
				thinking = nil
			}
			if string(thinking) != tc.wantThinking {
				t.Errorf("thinking %s, want %s", thinking, tc.wantThinking)
			}
			var effort any
			if oc, ok := raw["output_config"].(map[string]any); ok {
				effort = oc["effort"]
			}
			if settings.Effort != "" && effort != settings.Effort || settings.Effort == "" && effort != nil {
				t.Errorf("output_config.effort %v, want %q", effort, settings.Effort)
			}
			if speed, _ := raw["speed"].(string); speed != settings.Speed {
				t.Errorf("speed %q, want %q", speed, settings.Speed)
			}
			if geo, _ := raw["inference_geo"].(string); geo != settings.InferenceGeo {
				t.Errorf("inference_geo %q, want %q", geo, settings.InferenceGeo)
			}
		})
	}
}

func TestAdaptiveThinkingByModelFamily(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-opus-4-6": true, "claude-sonnet-4-6": true, "claude-opus-4-8": true, "claude-sonnet-5-5": true,
		"claude-haiku-5-5": true, "claude-mythos-preview": true, "claude-fable-5": true,
		"claude-sonnet-4-5": false, "claude-sonnet-4-5-20250929": false, "claude-haiku-4-5-20251001": false,
		"claude-opus-4-1": false, "claude-3-7-sonnet-latest": false, "my-gateway-alias": false,
	} {
		if got := adaptiveThinking(model); got != want {
			t.Errorf("adaptiveThinking(%q) = %v, want %v", model, got, want)
		}
	}
}

// A model setting the API would refuse is refused when the agent is made;
// one stored before that check ends the turn with a session.error saying
// what to fix, without a request.
func TestBadModelSettingIsASessionError(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":"claude-opus-4-6","effort":"turbo"}`: `model.effort "turbo" is not a level`,
		`{"id":"claude-opus-4-6","speed":"warp"}`:   `model.speed must be one of`,
		`{"id":"claude-opus-4-6","effort":7}`:       `model.effort must be a level`,
	} {
		var m api.ModelConfig
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Settings(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	u := modeltest.New(t)
	var m api.ModelConfig
	json.Unmarshal([]byte(`{"id":"claude-opus-4-6","effort":"turbo"}`), &m)
	h := newHarnessWith(t, api.SessionAgent{Model: m}, nil, claudeConfig(u))
	h.mustSend(api.UserMessage("hello"))
	log := h.idleAgain(0)
	errs := eventsOf(log, api.EventSessionError)
	if len(errs) != 1 || !strings.Contains(errs[0].Error.Message, `model.effort "turbo"`) || u.Count() != 0 {
		t.Fatalf("log %s, errors %+v, %d requests", typesOf(log), errs, u.Count())
	}
}
