package toolset

import (
	"path/filepath"
	"strings"
	"testing"
)

// Whatever path an agent sends, the file tools stay inside the working
// directory and the stores: nothing outside changes, the secret outside never
// shows up in a result, and the read-only store is never modified.
func FuzzFileToolsNeverLeaveTheRoots(f *testing.F) {
	for _, seed := range []string{
		"a.txt", "../outside/secret.txt", "/etc/passwd", notesPath + "/../../x", notesPath + "/x/../../policy/rules.md",
		policyPath + "/rules.md", "link/secret.txt", "dir-link/../secret.txt", "./././a", "a//b", "", "\x00", "/",
		"sub/../../outside/new.txt", strings.Repeat("../", 40) + "tmp",
	} {
		for which := range uint8(5) {
			f.Add(which, seed)
		}
	}
	fx := newFixture(f)
	mustSymlink(f, fx.outside, filepath.Join(fx.work, "dir-link"))
	mustSymlink(f, fx.secret, filepath.Join(fx.work, "link"))
	f.Fuzz(func(t *testing.T, which uint8, p string) {
		outside, policy := snapshot(t, fx.outside), snapshot(t, fx.policy)
		var res Result
		switch which % 5 {
		case 0:
			res = fx.run(t, "read", in("file_path", p))
		case 1:
			res = fx.run(t, "write", in("file_path", p, "content", "fuzz"))
		case 2:
			res = fx.run(t, "edit", in("file_path", p, "old_string", "e", "new_string", "E", "replace_all", true))
		case 3:
			res = fx.run(t, "glob", in("pattern", "**", "path", p))
		case 4:
			res = fx.run(t, "grep", in("pattern", "secret|kind", "path", p))
		}
		if strings.Contains(res.Content, "top secret") {
			t.Fatalf("path %q leaked the secret: %q", p, res.Content)
		}
		sameSnapshot(t, outside, snapshot(t, fx.outside))
		sameSnapshot(t, policy, snapshot(t, fx.policy))
	})
}
