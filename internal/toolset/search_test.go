package toolset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// touch sets a file's modification time to base+offset, so glob's newest-
// first order is known without waiting.
func touch(t *testing.T, name string, offset time.Duration) {
	t.Helper()
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(offset)
	if err := os.Chtimes(name, when, when); err != nil {
		t.Fatal(err)
	}
}

func TestGlob(t *testing.T) {
	f := newFixture(t)
	w := func(rel string, age time.Duration) string {
		name := filepath.Join(f.work, rel)
		mustWrite(t, name, "x")
		touch(t, name, age)
		return name
	}
	oldest := w("a.md", 1*time.Hour)
	newest := w("docs/deep/b.md", 3*time.Hour)
	tieA := w("docs/c.md", 2*time.Hour)
	tieB := w("docs/d.md", 2*time.Hour)
	w("docs/notes.txt", 4*time.Hour)
	mustSymlink(t, f.secret, filepath.Join(f.work, "docs", "link.md"))

	got := wantOK(t, f.run(t, "glob", in("pattern", "**/*.md")))
	want := strings.Join([]string{newest, tieA, tieB, oldest}, "\n")
	if got != want {
		t.Fatalf("glob **/*.md =\n%s\nwant (newest first, then by path; no links)\n%s", got, want)
	}
	// Without "**" a pattern matches one level only, like the SDK's.
	if got := wantOK(t, f.run(t, "glob", in("pattern", "*.md"))); got != oldest {
		t.Fatalf("glob *.md = %q", got)
	}
	if got := wantOK(t, f.run(t, "glob", in("pattern", "deep/?.md", "path", "docs"))); got != newest {
		t.Fatalf("glob with path = %q", got)
	}
	if got := wantOK(t, f.run(t, "glob", in("pattern", "**/*.go"))); got != "no matches" {
		t.Fatalf("glob with no match = %q", got)
	}
	// Folders match too.
	if got := wantOK(t, f.run(t, "glob", in("pattern", "docs/*", "path", f.work))); !strings.Contains(got, filepath.Join(f.work, "docs", "deep")+"\n") {
		t.Fatalf("glob docs/* = %q, want the deep folder listed", got)
	}

	wantErr(t, f.run(t, "glob", in("pattern", "/etc/*")), "absolute pattern not permitted")
	wantErr(t, f.run(t, "glob", in("pattern", "../outside/*")), `must not contain a ".." segment`)
	wantErr(t, f.run(t, "glob", in("pattern", "docs/[a-")), "invalid pattern")
	wantErr(t, f.run(t, "glob", in("pattern", "*", "path", "a.md")), "a.md is not a directory")
	wantErr(t, f.run(t, "glob", in("pattern", "*", "path", "nope")), "nope: no such file or directory")
}

func TestGlobCapsItsResults(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxGlobResults = 3 })
	for i := range 5 {
		name := filepath.Join(f.work, fmt.Sprintf("f%d.txt", i))
		mustWrite(t, name, "x")
		touch(t, name, time.Duration(i)*time.Minute)
	}
	got := wantOK(t, f.run(t, "glob", in("pattern", "*.txt")))
	want := strings.Join([]string{
		filepath.Join(f.work, "f4.txt"), filepath.Join(f.work, "f3.txt"), filepath.Join(f.work, "f2.txt"),
		"[2 more matches not shown; narrow the pattern or path]",
	}, "\n")
	if got != want {
		t.Fatalf("capped glob =\n%s\nwant\n%s", got, want)
	}
}

func TestGrep(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.work, "b.txt"), "nothing\nTODO: second\n")
	mustWrite(t, filepath.Join(f.work, "a", "z.go"), "// TODO first\npackage a\n// todo lower\n")
	mustWrite(t, filepath.Join(f.work, ".git", "config"), "TODO in git\n")
	mustWrite(t, filepath.Join(f.work, "node_modules", "x.js"), "TODO in deps\n")
	mustWrite(t, filepath.Join(f.work, "bin.dat"), "TODO\x00binary")
	mustSymlink(t, f.secret, filepath.Join(f.work, "link.txt"))
	mustSymlink(t, f.outside, filepath.Join(f.work, "linkdir"))
	mustWrite(t, filepath.Join(f.outside, "more.txt"), "TODO outside\n")

	got := wantOK(t, f.run(t, "grep", in("pattern", "TODO")))
	want := strings.Join([]string{
		filepath.Join(f.work, "a", "z.go") + ":1:// TODO first",
		filepath.Join(f.work, "b.txt") + ":2:TODO: second",
	}, "\n")
	if got != want {
		t.Fatalf("grep TODO =\n%s\nwant (path then line order; no links, .git, node_modules or binaries)\n%s", got, want)
	}
	if got := wantOK(t, f.run(t, "grep", in("pattern", "(?i)todo", "path", "a"))); !strings.HasSuffix(got, ":3:// todo lower") {
		t.Fatalf("case-insensitive grep = %q", got)
	}
	// A single file can be searched.
	if got := wantOK(t, f.run(t, "grep", in("pattern", `^TODO: \w+$`, "path", "b.txt"))); got != filepath.Join(f.work, "b.txt")+":2:TODO: second" {
		t.Fatalf("grep of one file = %q", got)
	}
	if got := wantOK(t, f.run(t, "grep", in("pattern", "absent"))); got != "no matches" {
		t.Fatalf("grep with no match = %q", got)
	}
	wantErr(t, f.run(t, "grep", in("pattern", `(a`)), "invalid regular expression", "RE2")
	wantErr(t, f.run(t, "grep", in("pattern", `(\w)\1`)), "invalid regular expression")
}

func TestGrepCapsItsOutput(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxOutputBytes = 200 })
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf("match %02d", i))
	}
	name := filepath.Join(f.work, "many.txt")
	mustWrite(t, name, strings.Join(lines, "\n"))
	got := wantOK(t, f.run(t, "grep", in("pattern", "match")))
	budget, shown := 200, 0
	for i := range lines {
		entry := fmt.Sprintf("%s:%d:%s\n", name, i+1, lines[i])
		if len(entry) > budget {
			break
		}
		budget -= len(entry)
		shown++
	}
	if !strings.HasPrefix(got, name+":1:match 00\n") || strings.Count(got, name+":") != shown {
		t.Fatalf("capped grep shows %d lines, want the first %d:\n%s", strings.Count(got, name+":"), shown, got)
	}
	if !strings.HasSuffix(got, fmt.Sprintf("[output truncated: %d more matching lines not shown; narrow the pattern or path]", 50-shown)) {
		t.Fatalf("capped grep does not say how much it cut:\n%s", got)
	}
}
