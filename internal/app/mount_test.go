package app

import (
	"strings"
	"testing"
)

func TestMountSlugsAndCollisions(t *testing.T) {
	for name, want := range map[string]string{
		"User Preferences":   "user-preferences",
		"  --Notes!!  2026 ": "notes-2026",
		"Ünïcode café":       "n-code-caf",
		"a_b.c/d":            "a-b-c-d",
		"":                   "memstore_X",
		"!!!":                "memstore_X",
	} {
		if got := MountSlug(name, "memstore_X"); got != want {
			t.Errorf("MountSlug(%q) = %q, want %q", name, got, want)
		}
	}
	got := mountPaths("/mnt/memory", []string{"Notes", "notes", "Notes 2", "NOTES", "", ""}, []string{"m1", "m2", "m3", "m4", "m5", "m6"})
	want := []string{"/mnt/memory/notes", "/mnt/memory/notes-2", "/mnt/memory/notes-2-2", "/mnt/memory/notes-3", "/mnt/memory/m5", "/mnt/memory/m6"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("mountPaths = %v\nwant          %v", got, want)
	}
}
