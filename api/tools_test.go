package api

import (
	"slices"
	"testing"
)

// IsAgentTool answers yes for exactly the tools AgentTools lists, and every
// definition carries a description and an object schema.
func TestIsAgentToolMatchesAgentTools(t *testing.T) {
	var names []string
	for _, d := range AgentTools() {
		names = append(names, d.Name)
		if !IsAgentTool(d.Name) {
			t.Errorf("IsAgentTool(%q) = false for a listed tool", d.Name)
		}
		if d.Description == "" || d.InputSchema["type"] != "object" {
			t.Errorf("%s: description %q, schema type %v", d.Name, d.Description, d.InputSchema["type"])
		}
		if _, ok := d.InputSchema["required"].([]string); !ok {
			t.Errorf("%s: required is %T, want []string", d.Name, d.InputSchema["required"])
		}
	}
	if want := []string{"bash", "read", "write", "edit", "glob", "grep"}; !slices.Equal(names, want) {
		t.Fatalf("AgentTools names %v, want %v", names, want)
	}
	for _, name := range []string{"web_fetch", "Bash", "", "ls"} {
		if IsAgentTool(name) {
			t.Errorf("IsAgentTool(%q) = true", name)
		}
	}
}
