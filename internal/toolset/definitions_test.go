package toolset

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// The schemas api offers to a model name only fields the tools decode, and
// the toolset runs every tool api lists.
func TestAgentToolsMatchTheInputsTheToolsDecode(t *testing.T) {
	inputs := map[string]any{
		"bash": bashInput{}, "read": readInput{}, "write": writeInput{}, "edit": editInput{},
		"glob": searchInput{}, "grep": searchInput{},
	}
	ts, err := New(Config{Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	for _, d := range api.AgentTools() {
		in, ok := inputs[d.Name]
		if !ok {
			t.Fatalf("api lists %q, which the toolset does not decode", d.Name)
		}
		fields := map[string]bool{}
		rt := reflect.TypeOf(in)
		for i := range rt.NumField() {
			fields[strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]] = true
		}
		props := d.InputSchema["properties"].(map[string]any)
		for p := range props {
			if !fields[p] {
				t.Errorf("%s: schema property %q is not a field of the tool's input", d.Name, p)
			}
		}
		for _, r := range d.InputSchema["required"].([]string) {
			if props[r] == nil {
				t.Errorf("%s: required %q is not a property", d.Name, r)
			}
		}
		// An empty input reaches the tool itself, never the unknown-tool
		// refusal.
		if res := ts.Run(context.Background(), d.Name, nil); strings.Contains(res.Content, "unknown tool") {
			t.Errorf("%s: the toolset does not run it: %q", d.Name, res.Content)
		}
	}
	if len(inputs) != len(api.AgentTools()) {
		t.Fatalf("the toolset decodes %d tools, api lists %d", len(inputs), len(api.AgentTools()))
	}
}
