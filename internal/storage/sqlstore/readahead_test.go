package sqlstore

import "testing"

// A path check read ahead of a batch is asked again exactly when an earlier
// write of the batch took the path, an ancestor or a descendant of it in
// the same store: a sibling that only shares a prefix of the name, or the
// same path in another store, leaves the answer standing.
func TestChangesTouchPathsAlongTheTreeOnly(t *testing.T) {
	var c Changes
	c.Path("st_1", "/a/b")
	for p, want := range map[string]bool{
		"/a/b":    true,  // the path itself
		"/a":      true,  // an ancestor: /a would become a directory
		"/a/b/c":  true,  // a descendant: /a/b is now a file
		"/a/bc":   false, // a sibling sharing the name's prefix
		"/a/c":    false,
		"/ab":     false,
		"/b/a/b":  false,
		"/a/b.md": false,
	} {
		if got := c.TouchesPath("st_1", p); got != want {
			t.Errorf("after /a/b was written, TouchesPath(%q) = %v, want %v", p, got, want)
		}
	}
	if c.TouchesPath("st_2", "/a/b") {
		t.Error("a path of another store counted as touched")
	}
	c.Memory("mem_1")
	if !c.TouchesMemory("mem_1") || c.TouchesMemory("mem_2") {
		t.Error("TouchesMemory must name exactly the memories written")
	}
	c.Everything()
	if !c.TouchesMemory("mem_2") || !c.TouchesPath("st_2", "/z") {
		t.Error("after a change the record cannot name, every read must be asked again")
	}
}
