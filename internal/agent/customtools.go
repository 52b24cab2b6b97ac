package agent

import (
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// customTool is an agent's tools entry of type "custom": a function of the
// application's. The model calls it like any tool; the call is recorded as
// agent.custom_tool_use for the application (never for the worker), and
// the session waits, idle with requires_action, for its
// user.custom_tool_result.
type customTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// customTools reads the agent's custom tools, in order. One named like an
// enabled built-in tool is left out: the model cannot be offered two tools
// of one name, and the built-in one was there first.
func customTools(tools []json.RawMessage, builtin map[string]string) []customTool {
	var out []customTool
	for _, raw := range tools {
		var t struct {
			Type string `json:"type"`
			customTool
		}
		if json.Unmarshal(raw, &t) != nil || t.Type != "custom" || t.Name == "" {
			continue
		}
		if _, taken := builtin[t.Name]; taken {
			continue
		}
		out = append(out, t.customTool)
	}
	return out
}

// declaration is the tool as the Messages API takes it: the schema as the
// application wrote it (its properties and required list typed, any other
// keyword kept as it came).
func (t customTool) declaration() anthropic.ToolUnionParam {
	var schema anthropic.ToolInputSchemaParam
	var keywords map[string]any
	if json.Unmarshal(t.InputSchema, &keywords) == nil {
		schema.Properties = keywords["properties"]
		if req, ok := keywords["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
		}
		delete(keywords, "type")
		delete(keywords, "properties")
		delete(keywords, "required")
		if len(keywords) > 0 {
			schema.ExtraFields = keywords
		}
	}
	tool := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	return anthropic.ToolUnionParam{OfTool: tool}
}
