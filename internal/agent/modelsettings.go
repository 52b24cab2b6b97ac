package agent

import (
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
)

// applyModelSettings puts the agent's model settings into a request where
// the Messages API takes them: effort in output_config, speed and
// inference_geo at the top; and thinking, adaptive for the models made for
// it, else budgeted when the server gives a budget.
func applyModelSettings(p *anthropic.MessageNewParams, s api.ModelSettings, thinkingBudget int64) {
	if s.Effort != "" {
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(s.Effort)
	}
	if s.Speed != "" {
		p.Speed = anthropic.MessageNewParamsSpeed(s.Speed)
	}
	if s.InferenceGeo != "" {
		p.InferenceGeo = anthropic.String(s.InferenceGeo)
	}
	switch {
	case adaptiveThinking(string(p.Model)):
		p.Thinking = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
	case thinkingBudget > 0:
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(thinkingBudget)
	}
}

// adaptiveThinking says whether a model decides its thinking itself
// (thinking {"type":"adaptive"}, its depth steered by effort), where a
// fixed budget_tokens is deprecated: Claude 4.6 and later of the opus,
// sonnet and haiku families, and the families that started after them
// (mythos, fable, …). Older models and ids that are not Claude's (a
// gateway's aliases) get budgeted thinking.
func adaptiveThinking(model string) bool {
	rest, ok := strings.CutPrefix(model, "claude-")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	switch parts[0] {
	case "opus", "sonnet", "haiku":
	case "instant", "":
		return false
	default:
		// claude-3-5-sonnet and the like name the version first.
		if _, err := strconv.Atoi(parts[0]); err == nil {
			return false
		}
		return true
	}
	if len(parts) < 2 {
		return false
	}
	major, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 2 && len(parts[2]) <= 2 { // not a date suffix
		minor, _ = strconv.Atoi(parts[2])
	}
	return major > 4 || major == 4 && minor >= 6
}
