package toolset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every file tool refuses every way out, and a refused call changes nothing
// anywhere.
func TestFileToolsStayInsideTheAllowedRoots(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.work, "ok.txt"), "fine\n")
	mustWrite(t, filepath.Join(f.work, "inner", "target.txt"), "inner\n")
	mustSymlink(t, f.secret, filepath.Join(f.work, "file-link"))                         // a file link out
	mustSymlink(t, f.outside, filepath.Join(f.work, "dir-link"))                         // a folder link out
	mustSymlink(t, filepath.Join(f.outside, "new.txt"), filepath.Join(f.work, "dangle")) // to a file not there yet
	mustSymlink(t, "inner/target.txt", filepath.Join(f.work, "inner-link"))              // stays inside
	mustSymlink(t, f.secret, filepath.Join(f.notes, "mem-link"))                         // out of a store
	mustSymlink(t, f.policy, filepath.Join(f.notes, "ro-link"))                          // into the read-only store

	outsideRel, err := filepath.Rel(f.work, f.secret)
	if err != nil {
		t.Fatal(err)
	}
	paths := []struct {
		path string
		want string
	}{
		{f.secret, "is outside the working directory"},
		{outsideRel, "is outside the working directory"},
		{"../outside/secret.txt", "is outside"},
		{"/etc/passwd", "is outside"},
		{notesPath + "/../../../etc/passwd", "is outside"},
		{"/mnt/memory", "is outside"},
		{"file-link", "file-link is a symbolic link"},
		{"dir-link/secret.txt", "dir-link is a symbolic link"},
		{"dangle", "dangle is a symbolic link"},
		{"inner-link", "inner-link is a symbolic link"},
		{notesPath + "/mem-link", notesPath + "/mem-link is a symbolic link"},
		{notesPath + "/ro-link/rules.md", "ro-link is a symbolic link"},
	}
	before := snapshot(t, f.base)
	for _, p := range paths {
		for _, call := range []struct {
			tool  string
			input map[string]any
		}{
			{"read", in("file_path", p.path)},
			{"write", in("file_path", p.path, "content", "pwned")},
			{"edit", in("file_path", p.path, "old_string", "top", "new_string", "pwned")},
			{"glob", in("pattern", "*", "path", p.path)},
			{"grep", in("pattern", "secret", "path", p.path)},
		} {
			res := f.run(t, call.tool, call.input)
			if !res.IsError || !strings.Contains(res.Content, p.want) {
				t.Errorf("%s %q = %+v, want an error containing %q", call.tool, p.path, res, p.want)
			}
			if strings.Contains(res.Content, "top secret") {
				t.Errorf("%s %q leaked the secret: %q", call.tool, p.path, res.Content)
			}
		}
	}
	sameSnapshot(t, before, snapshot(t, f.base))
	// Paths inside the roots still work after all that.
	if got := wantOK(t, f.run(t, "read", in("file_path", "ok.txt"))); got != "fine\n" {
		t.Fatalf("read ok.txt = %q", got)
	}
}

// Errors name the path the agent gave, never the host folder a remapped
// store really lives in.
func TestErrorsDoNotRevealRealStoreFolders(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "read", in("file_path", notesPath+"/missing.md"))
	wantErr(t, res, notesPath+"/missing.md: no such file or directory")
	if strings.Contains(res.Content, f.notes) {
		t.Fatalf("error %q names the real folder", res.Content)
	}
}

func TestReadOnlyStoreRefusesWriteAndEdit(t *testing.T) {
	f := newFixture(t)
	before := snapshot(t, f.base)
	for _, p := range []string{
		policyPath + "/rules.md",          // advertised, existing file
		policyPath + "/new.md",            // advertised, new file
		policyPath + "/sub/dir/new.md",    // advertised, new folders
		f.policyFile,                      // real, existing file
		filepath.Join(f.policy, "x.md"),   // real, new file
		policyPath,                        // the store folder itself
		policyPath + "/./sub/../rules.md", // unclean spelling
	} {
		wantErr(t, f.run(t, "write", in("file_path", p, "content", "changed")),
			"is in the read-only memory store mounted at "+policyPath+"; it cannot be modified")
		wantErr(t, f.run(t, "edit", in("file_path", p, "old_string", "kind", "new_string", "mean")),
			"is in the read-only memory store mounted at "+policyPath+"; it cannot be modified")
	}
	sameSnapshot(t, before, snapshot(t, f.base))

	// Reading it, and searching it, are fine.
	if got := wantOK(t, f.run(t, "read", in("file_path", policyPath+"/rules.md"))); got != "be kind\n" {
		t.Fatalf("read = %q", got)
	}
	if got := wantOK(t, f.run(t, "grep", in("pattern", "kind", "path", policyPath))); got != policyPath+"/rules.md:1:be kind" {
		t.Fatalf("grep = %q", got)
	}
	// bash is not blocked there (the sync never uploads what it does).
	wantOK(t, f.run(t, "bash", in("command", "echo scribble >> "+f.policyFile)))
	if got := readString(t, f.policyFile); got != "be kind\nscribble\n" {
		t.Fatalf("bash could not write to the read-only store: %q", got)
	}
}

func TestStoreMarkerCannotBeWritten(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.notes, markerName)
	mustWrite(t, marker, "memstore_123\n")
	for _, p := range []string{notesPath + "/" + markerName, marker} {
		wantErr(t, f.run(t, "write", in("file_path", p, "content", "x")), "is the marker that binds "+notesPath+" to its memory store")
		wantErr(t, f.run(t, "edit", in("file_path", p, "old_string", "123", "new_string", "456")), "cannot be modified")
	}
	if got := readString(t, marker); got != "memstore_123\n" {
		t.Fatalf("marker changed to %q", got)
	}
	// A file of that name deeper down is just a file.
	wantOK(t, f.run(t, "write", in("file_path", notesPath+"/sub/"+markerName, "content", "x")))
}

func TestAdvertisedAndRealStorePathsAreTheSameFiles(t *testing.T) {
	f := newFixture(t)
	wantOK(t, f.run(t, "write", in("file_path", notesPath+"/people/ada.md", "content", "Ada likes tea\n")))
	real := filepath.Join(f.notes, "people", "ada.md")
	if got := wantOK(t, f.run(t, "read", in("file_path", real))); got != "Ada likes tea\n" {
		t.Fatalf("read via the real path = %q", got)
	}
	wantOK(t, f.run(t, "edit", in("file_path", real, "old_string", "tea", "new_string", "coffee")))
	if got := wantOK(t, f.run(t, "read", in("file_path", notesPath+"/people/ada.md"))); got != "Ada likes coffee\n" {
		t.Fatalf("read via the advertised path = %q", got)
	}
	// Memory files and folders are owner-only, and no temporary file is left
	// for the sync to find.
	assertMode(t, real, 0o600)
	assertMode(t, filepath.Join(f.notes, "people"), 0o700)
	assertNoTempFiles(t, f.notes)

	// Search results stay in the terms the agent used.
	if got := wantOK(t, f.run(t, "glob", in("pattern", "**/*.md", "path", notesPath))); got != notesPath+"/people/ada.md" {
		t.Fatalf("glob via the advertised path = %q", got)
	}
	if got := wantOK(t, f.run(t, "glob", in("pattern", "**/*.md", "path", f.notes))); got != real {
		t.Fatalf("glob via the real path = %q", got)
	}
	if got := wantOK(t, f.run(t, "grep", in("pattern", "coffee", "path", notesPath+"/people"))); got != notesPath+"/people/ada.md:1:Ada likes coffee" {
		t.Fatalf("grep via the advertised path = %q", got)
	}
}

// A store folder inside the working directory stays read-only when it is
// named through the working directory.
func TestNestedReadOnlyStoreIsReadOnlyByEveryName(t *testing.T) {
	base := t.TempDir()
	work := filepath.Join(base, "work")
	store := filepath.Join(work, "memory", "policy")
	mustWrite(t, filepath.Join(store, "rules.md"), "be kind\n")
	ts, err := New(Config{Workdir: work, Mounts: []Mount{{Path: policyPath, Dir: store, ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	f := &fixture{ts: ts}
	for _, p := range []string{"memory/policy/rules.md", filepath.Join(store, "rules.md"), policyPath + "/rules.md", "memory/policy/new.md"} {
		wantErr(t, f.run(t, "write", in("file_path", p, "content", "x")), "read-only memory store mounted at "+policyPath)
	}
	if got := readString(t, filepath.Join(store, "rules.md")); got != "be kind\n" {
		t.Fatalf("rules.md changed to %q", got)
	}
	wantOK(t, f.run(t, "write", in("file_path", "memory/other.md", "content", "x")))
}

// An agent with a shell can swap a store's folder for a link; the file tools
// then refuse the store instead of following the link.
func TestStoreFolderReplacedByALinkIsRefused(t *testing.T) {
	f := newFixture(t)
	if err := os.RemoveAll(f.notes); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, f.outside, f.notes)
	wantErr(t, f.run(t, "read", in("file_path", notesPath+"/secret.txt")), "the memory store mounted at "+notesPath+" has been replaced by a symbolic link")
	wantErr(t, f.run(t, "write", in("file_path", notesPath+"/x.md", "content", "x")), "replaced by a symbolic link")
	mustNotExist(t, filepath.Join(f.outside, "x.md"))

	if err := os.Remove(f.notes); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.run(t, "read", in("file_path", notesPath+"/a.md")), "the memory store mounted at "+notesPath+" cannot be opened: no such file or directory")
}

// A working directory configured through a link (as /tmp is on some hosts)
// is reachable by both spellings, and bash shows the configured one.
func TestWorkdirConfiguredThroughALink(t *testing.T) {
	t.Setenv("PWD", "/") // the worker's own, which the shell must not inherit
	base := t.TempDir()
	real := filepath.Join(base, "real")
	mustMkdir(t, real)
	link := filepath.Join(base, "link")
	mustSymlink(t, real, link)
	ts, err := New(Config{Workdir: link})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	f := &fixture{ts: ts}

	wantOK(t, f.run(t, "write", in("file_path", "a.txt", "content", "x")))
	if got := wantOK(t, f.run(t, "read", in("file_path", filepath.Join(real, "a.txt")))); got != "x" {
		t.Fatalf("read via the resolved path = %q", got)
	}
	if got := wantOK(t, f.run(t, "glob", in("pattern", "*.txt"))); got != filepath.Join(link, "a.txt") {
		t.Fatalf("glob = %q", got)
	}
	if got := wantOK(t, f.run(t, "bash", in("command", `pwd; echo "$PWD"`))); got != link+"\n"+link+"\n" {
		t.Fatalf("bash pwd = %q, want the configured %s", got, link)
	}
}

// A hard link in a store's folder to a file outside it is not read,
// edited or searched (its content is the outside file's); a write replaces
// the folder's name for it and leaves the outside file alone.
func TestHardLinkInAStoreIsNotAMemoryFile(t *testing.T) {
	f := newFixture(t)
	if err := os.Link(f.secret, filepath.Join(f.notes, "linked.md")); err != nil {
		t.Fatal(err)
	}
	link := notesPath + "/linked.md"
	before := snapshot(t, f.outside)
	wantErr(t, f.run(t, "read", in("file_path", link)), link, "hard links")
	wantErr(t, f.run(t, "edit", in("file_path", link, "old_string", "top", "new_string", "pwned")), link, "hard links")
	if res := f.run(t, "grep", in("pattern", "secret", "path", notesPath)); res.IsError || strings.Contains(res.Content, "top secret") {
		t.Fatalf("grep over the store = %+v, want no match through the hard link", res)
	}
	wantOK(t, f.run(t, "write", in("file_path", link, "content", "mine")))
	sameSnapshot(t, before, snapshot(t, f.outside))
	if got := readString(t, filepath.Join(f.notes, "linked.md")); got != "mine" {
		t.Fatalf("the written file holds %q", got)
	}
}

// A successful write or edit in a writable store reports the file it
// changed by its advertised mount path, however the agent named it; nothing
// else (the working directory, a refusal, a read) reports a write.
func TestResultNamesTheMemoryFilesWritten(t *testing.T) {
	f := newFixture(t)
	wantWrote := func(res Result, want ...string) {
		t.Helper()
		if !slices.Equal(res.Wrote, want) {
			t.Fatalf("Wrote = %q, want %q (result %+v)", res.Wrote, want, res)
		}
	}
	wantWrote(f.run(t, "write", in("file_path", notesPath+"/a.md", "content", "one\n")), notesPath+"/a.md")
	wantWrote(f.run(t, "write", in("file_path", filepath.Join(f.notes, "dir", "b.md"), "content", "two\n")), notesPath+"/dir/b.md")
	wantWrote(f.run(t, "edit", in("file_path", filepath.Join(f.notes, "a.md"), "old_string", "one", "new_string", "uno")), notesPath+"/a.md")
	wantWrote(f.run(t, "write", in("file_path", "local.txt", "content", "x")))
	wantWrote(f.run(t, "edit", in("file_path", notesPath+"/a.md", "old_string", "absent", "new_string", "x")))
	wantWrote(f.run(t, "write", in("file_path", policyPath+"/new.md", "content", "x")))
	wantWrote(f.run(t, "read", in("file_path", notesPath+"/a.md")))
}

// The working directory goes through the same confined I/O as the stores,
// with the two differences a project needs: a file with several hard links
// is read, edited and searched (package managers link their caches into
// projects), and a rewritten file keeps its mode.
func TestWorkdirAllowsHardLinksAndKeepsModes(t *testing.T) {
	f := newFixture(t)
	shared := filepath.Join(f.base, "cache.txt")
	mustWrite(t, shared, "cached line\n")
	if err := os.Link(shared, filepath.Join(f.work, "linked.txt")); err != nil {
		t.Fatal(err)
	}
	if got := wantOK(t, f.run(t, "read", in("file_path", "linked.txt"))); got != "cached line\n" {
		t.Fatalf("read of a hard-linked workdir file = %q", got)
	}
	if got := wantOK(t, f.run(t, "grep", in("pattern", "cached"))); got != filepath.Join(f.work, "linked.txt")+":1:cached line" {
		t.Fatalf("grep over the workdir = %q", got)
	}
	// An edit replaces the name: the other link keeps the old content.
	wantOK(t, f.run(t, "edit", in("file_path", "linked.txt", "old_string", "cached", "new_string", "edited")))
	if got := readString(t, shared); got != "cached line\n" {
		t.Fatalf("the edit wrote through the hard link: %q", got)
	}
	script := filepath.Join(f.work, "run.sh")
	mustWrite(t, script, "echo one\n")
	if err := os.Chmod(script, 0o750); err != nil {
		t.Fatal(err)
	}
	wantOK(t, f.run(t, "edit", in("file_path", "run.sh", "old_string", "one", "new_string", "two")))
	assertMode(t, script, 0o750)
	assertNoTempFiles(t, f.work)
}

// A working directory replaced by a link after New is refused like a
// store's folder, and nothing is written where the link leads.
func TestWorkdirReplacedByALinkIsRefused(t *testing.T) {
	f := newFixture(t)
	if err := os.RemoveAll(f.work); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, f.outside, f.work)
	before := snapshot(t, f.outside)
	wantErr(t, f.run(t, "read", in("file_path", "secret.txt")), "the working directory has been replaced by a symbolic link")
	wantErr(t, f.run(t, "write", in("file_path", "x.txt", "content", "x")), "replaced by a symbolic link")
	wantErr(t, f.run(t, "glob", in("pattern", "*")), "replaced by a symbolic link")
	wantErr(t, f.run(t, "grep", in("pattern", "secret")), "replaced by a symbolic link")
	sameSnapshot(t, before, snapshot(t, f.outside))
}

// A write whose missing folders lie under a link deeper down is refused,
// in the working directory as in a store, and creates nothing through it.
func TestWriteDoesNotCreateFoldersThroughADeepLink(t *testing.T) {
	f := newFixture(t)
	mustMkdir(t, filepath.Join(f.work, "a", "b"))
	mustSymlink(t, f.outside, filepath.Join(f.work, "a", "b", "c"))
	mustMkdir(t, filepath.Join(f.notes, "a"))
	mustSymlink(t, f.outside, filepath.Join(f.notes, "a", "c"))
	before := snapshot(t, f.outside)
	wantErr(t, f.run(t, "write", in("file_path", "a/b/c/d/e.txt", "content", "x")), "a/b/c is a symbolic link")
	wantErr(t, f.run(t, "write", in("file_path", notesPath+"/a/c/d/e.md", "content", "x")), notesPath+"/a/c is a symbolic link")
	sameSnapshot(t, before, snapshot(t, f.outside))
}
