package toolset

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The schemas offered to a model name only fields the tools decode, and
// every tool the toolset runs has a definition.
func TestDefinitionsMatchTheInputsTheToolsDecode(t *testing.T) {
	inputs := map[string]any{
		"bash": bashInput{}, "read": readInput{}, "write": writeInput{}, "edit": editInput{},
		"glob": searchInput{}, "grep": searchInput{},
	}
	var names []string
	for _, d := range Definitions() {
		names = append(names, d.Name)
		in, ok := inputs[d.Name]
		if !ok {
			t.Fatalf("definition %q names no tool", d.Name)
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
		if !IsTool(d.Name) || d.Description == "" {
			t.Errorf("%s: IsTool %v, description %q", d.Name, IsTool(d.Name), d.Description)
		}
	}
	if want := []string{"bash", "read", "write", "edit", "glob", "grep"}; !slices.Equal(names, want) {
		t.Fatalf("definitions %v, want %v", names, want)
	}
	if IsTool("web_fetch") {
		t.Fatal("web_fetch is not a tool of the toolset")
	}
}
