package toolset

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/memsync"
)

// fixture is a session laid out in real folders:
//
//	base/work            the working directory
//	base/mounts/notes    a read-write store, advertised as /mnt/memory/notes
//	base/mounts/policy   a read-only store, advertised as /mnt/memory/policy
//	base/outside         somewhere the file tools must never reach
//
// The advertised paths do not exist on disk: every test that uses them also
// shows the remapping (--mount-root) works.
type fixture struct {
	ts                          *Toolset
	base, work, notes, policy   string
	outside, secret, policyFile string
}

const (
	notesPath  = "/mnt/memory/notes"
	policyPath = "/mnt/memory/policy"
)

func newFixture(t testing.TB, tweak ...func(*Config)) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{
		base:    base,
		work:    filepath.Join(base, "work"),
		notes:   filepath.Join(base, "mounts", "notes"),
		policy:  filepath.Join(base, "mounts", "policy"),
		outside: filepath.Join(base, "outside"),
	}
	for _, d := range []string{f.work, f.notes, f.policy, f.outside} {
		mustMkdir(t, d)
	}
	f.secret = filepath.Join(f.outside, "secret.txt")
	mustWrite(t, f.secret, "top secret\n")
	f.policyFile = filepath.Join(f.policy, "rules.md")
	mustWrite(t, f.policyFile, "be kind\n")
	cfg := Config{
		Logger:  slog.New(slog.DiscardHandler),
		Workdir: f.work,
		Mounts: []Mount{
			{Path: notesPath, Dir: f.notes},
			{Path: policyPath, Dir: f.policy, ReadOnly: true},
		},
	}
	for _, fn := range tweak {
		fn(&cfg)
	}
	ts, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	f.ts = ts
	return f
}

// run calls a tool with input marshalled from a Go value (or passed through
// when it is already raw JSON).
func (f *fixture) run(t *testing.T, name string, input any) Result {
	t.Helper()
	return f.runCtx(t, context.Background(), name, input)
}

func (f *fixture) runCtx(t *testing.T, ctx context.Context, name string, input any) Result {
	t.Helper()
	raw, isRaw := input.(json.RawMessage)
	if !isRaw {
		var err error
		if raw, err = json.Marshal(input); err != nil {
			t.Fatal(err)
		}
	}
	return f.ts.Run(ctx, name, raw)
}

// in builds a tool input from alternating keys and values.
func in(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func wantOK(t *testing.T, res Result) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected error result: %s", res.Content)
	}
	return res.Content
}

func wantErr(t *testing.T, res Result, substrs ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want an error result, got success: %q", res.Content)
	}
	for _, s := range substrs {
		if !strings.Contains(res.Content, s) {
			t.Fatalf("error result %q does not contain %q", res.Content, s)
		}
	}
}

func mustMkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, name, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func readString(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustNotExist(t testing.TB, name string) {
	t.Helper()
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Fatalf("%s exists (err=%v), want it absent", name, err)
	}
}

// snapshot maps every entry under dir to its content ("<dir>" for folders),
// to show that a refused call changed nothing.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			m[rel] = "<dir>"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "<link " + target + ">"
		default:
			m[rel] = readString(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameSnapshot(t testing.TB, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("tree changed: before %v, after %v", before, after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("tree changed at %s: before %q, after %q", k, v, after[k])
		}
	}
}

func TestRunRefusesUnknownToolsAndMalformedInput(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		tool  string
		input json.RawMessage
		want  []string
	}{
		{"ls", json.RawMessage(`{}`), []string{`unknown tool "ls"`, "read, write, edit, bash, glob and grep"}},
		{"", nil, []string{"unknown tool"}},
		{"read", json.RawMessage(`{not json`), []string{"read: invalid input", `"file_path": string`}},
		{"read", json.RawMessage(`{"file_path": 7}`), []string{"read: invalid input"}},
		{"read", json.RawMessage(`{"file_path": "a", "view_range": "1-2"}`), []string{"read: invalid input"}},
		{"read", json.RawMessage(`{"file_path": "a", "view_range": [1]}`), []string{"view_range must be [start_line, end_line]"}},
		{"read", nil, []string{"read: file_path is required"}},
		{"read", json.RawMessage(`null`), []string{"read: file_path is required"}},
		{"write", json.RawMessage(`{"file_path": "a"}`), []string{"write: content is required"}},
		{"write", json.RawMessage(`{"content": "x"}`), []string{"write: file_path is required"}},
		{"write", json.RawMessage(`[]`), []string{"write: invalid input"}},
		{"edit", json.RawMessage(`{"file_path": "a", "old_string": "", "new_string": "x"}`), []string{"edit: old_string is required"}},
		{"edit", json.RawMessage(`{"file_path": "a", "old_string": "x", "replace_all": "yes"}`), []string{"edit: invalid input"}},
		{"glob", json.RawMessage(`{}`), []string{"glob: pattern is required"}},
		{"grep", json.RawMessage(`{"pattern": 1}`), []string{"grep: invalid input"}},
		{"bash", json.RawMessage(`{}`), []string{"bash: command is required"}},
		{"bash", json.RawMessage(`{"command": true}`), []string{"bash: invalid input"}},
		{"bash", json.RawMessage(`{"command": "echo \u0000"}`), []string{"NUL byte"}},
		{"read", json.RawMessage(`{"file_path": "a\u0000b"}`), []string{"NUL byte"}},
	}
	for _, c := range cases {
		wantErr(t, f.ts.Run(context.Background(), c.tool, c.input), c.want...)
	}
}

func TestNewChecksTheConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "")
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no workdir", Config{}, "Workdir is required"},
		{"missing workdir", Config{Workdir: filepath.Join(dir, "nope")}, "working directory"},
		{"workdir is a file", Config{Workdir: file}, "not a directory"},
		{"relative mount", Config{Workdir: dir, Mounts: []Mount{{Path: "mnt/x", Dir: dir}}}, "absolute and clean"},
		{"unclean mount", Config{Workdir: dir, Mounts: []Mount{{Path: "/mnt/x/", Dir: dir}}}, "absolute and clean"},
		{"no folder", Config{Workdir: dir, Mounts: []Mount{{Path: "/mnt/x"}}}, "no folder"},
		{"twice", Config{Workdir: dir, Mounts: []Mount{{Path: "/mnt/x", Dir: dir}, {Path: "/mnt/x", Dir: dir}}}, "listed twice"},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

// write and edit protect the file the memory sync trusts a folder by.
func TestTheProtectedMarkerIsTheSyncs(t *testing.T) {
	if markerName != memsync.MarkerName {
		t.Fatalf("the tools protect %q, but the sync's marker is %q", markerName, memsync.MarkerName)
	}
}

// A bug inside a tool costs that call, not the worker: a Toolset not made by
// New has no roots, which panics deep inside path resolution.
func TestRunTurnsAPanicIntoAnErrorResult(t *testing.T) {
	ts := &Toolset{log: slog.New(slog.DiscardHandler)}
	res := ts.Run(context.Background(), "read", json.RawMessage(`{"file_path": "x"}`))
	wantErr(t, res, "read: internal error in the tool")
}
