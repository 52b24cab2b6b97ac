//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/testdigest"
)

// newRoot makes a store folder plus a sibling "outside" folder holding a
// secret, which no operation on the store may ever read, change or add to.
func newRoot(t *testing.T) (r *Root, outside string) {
	t.Helper()
	base := t.TempDir()
	outside = filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Create(filepath.Join(base, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return r, outside
}

// assertOutsideIntact fails if anything under outside differs from what
// newRoot put there.
func assertOutsideIntact(t *testing.T, outside string) {
	t.Helper()
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "f" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("outside folder was written to: %v", names)
	}
	got, err := os.ReadFile(filepath.Join(outside, "f"))
	if err != nil || string(got) != "SECRET" {
		t.Fatalf("outside file changed: %q, %v", got, err)
	}
}

func mustWrite(t *testing.T, r *Root, rel, content string) {
	t.Helper()
	if err := r.WriteFile(rel, []byte(content), Precondition{}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidPathsAreRefused(t *testing.T) {
	r, _ := newRoot(t)
	for _, rel := range []string{"", "/abs", "/", "..", "../x", "a/../b", "a/..", ".", "./a", "a/./b", "a//b", "a/", "a\x00b"} {
		if _, err := r.ReadFile(rel, 100); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ReadFile(%q) = %v, want ErrInvalidPath", rel, err)
		}
		if err := r.WriteFile(rel, []byte("x"), Precondition{}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("WriteFile(%q) = %v, want ErrInvalidPath", rel, err)
		}
		if err := r.RemoveFile(rel, Precondition{}, false); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("RemoveFile(%q) = %v, want ErrInvalidPath", rel, err)
		}
	}
	if err := r.WriteFile("a/"+TempPrefix+"x", []byte("x"), Precondition{}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("writing a temporary name = %v, want ErrInvalidPath", err)
	}
	files, _, err := r.Walk()
	if err != nil || len(files) != 0 {
		t.Fatalf("refused writes left files: %v %v", files, err)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	base := t.TempDir()
	if _, err := Create(base); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create on an existing folder = %v, want ErrExist", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(link); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create on a symlink = %v, want ErrExist", err)
	}
	if _, err := Open(link); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Open on a symlink = %v, want ErrSymlink", err)
	}
	r, err := Create(filepath.Join(base, "new"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(r.Dir())
	if err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("created folder: %v %v", st.Mode(), err)
	}
}

// forBothSyncModes runs test on a durable folder and on a WithoutSync view
// of one: dropping the fsyncs must change nothing else.
func forBothSyncModes(t *testing.T, test func(*testing.T, *Root)) {
	t.Run("durable", func(t *testing.T) {
		r, _ := newRoot(t)
		test(t, r)
	})
	t.Run("without sync", func(t *testing.T) {
		r, _ := newRoot(t)
		v := r.WithoutSync()
		if r.noSync || !v.noSync || v.Dir() != r.Dir() {
			t.Fatalf("WithoutSync changed the original or the folder: %+v %+v", r, v)
		}
		test(t, v)
	})
}

func TestWriteReadRemove(t *testing.T) { forBothSyncModes(t, testWriteReadRemove) }

func testWriteReadRemove(t *testing.T, r *Root) {
	mustWrite(t, r, "notes/deep/a.md", "hello")
	got, err := r.ReadFile("notes/deep/a.md", 100)
	if err != nil || string(got) != "hello" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	st, err := os.Stat(filepath.Join(r.Dir(), "notes/deep/a.md"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v", st.Mode(), err)
	}
	for _, d := range []string{"notes", "notes/deep"} {
		st, err := os.Stat(filepath.Join(r.Dir(), d))
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("folder %s mode %v, %v", d, st.Mode(), err)
		}
	}
	// Overwrite, then check that no temporary file is left anywhere.
	mustWrite(t, r, "notes/deep/a.md", "hello again")
	mustWrite(t, r, "notes/b.md", "")
	files, skipped, err := r.Walk()
	if err != nil || len(skipped) != 0 {
		t.Fatalf("Walk: %v %v", skipped, err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if want := []string{"notes/b.md", "notes/deep/a.md"}; !slices.Equal(paths, want) {
		t.Fatalf("files after writes = %v, want %v (no temporary files)", paths, want)
	}
	raw, _ := os.ReadDir(filepath.Join(r.Dir(), "notes/deep"))
	if len(raw) != 1 {
		t.Fatalf("notes/deep holds %d entries, want only a.md", len(raw))
	}

	if err := r.RemoveFile("notes/deep/a.md", Precondition{}, true); err != nil {
		t.Fatal(err)
	}
	// notes/deep was emptied and pruned; notes still holds b.md.
	if _, err := os.Lstat(filepath.Join(r.Dir(), "notes/deep")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty parent not pruned: %v", err)
	}
	if err := r.RemoveFile("notes/b.md", Precondition{}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(r.Dir(), "notes")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty parent not pruned: %v", err)
	}
	if _, err := os.Lstat(r.Dir()); err != nil {
		t.Fatalf("pruning removed the store folder itself: %v", err)
	}
	if err := r.RemoveFile("notes/b.md", Precondition{}, false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removing a missing file = %v, want ErrNotExist", err)
	}
}

func TestPreconditions(t *testing.T) { forBothSyncModes(t, testPreconditions) }

func testPreconditions(t *testing.T, r *Root) {
	mustWrite(t, r, "a.md", "v1")

	if err := r.WriteFile("a.md", []byte("v2"), Precondition{Absent: true}); !errors.Is(err, ErrChanged) {
		t.Fatalf("write over an existing file requiring absence = %v, want ErrChanged", err)
	}
	if err := r.WriteFile("a.md", []byte("v2"), Precondition{SHA256: testdigest.SHA256("other")}); !errors.Is(err, ErrChanged) {
		t.Fatalf("write with a stale sha = %v, want ErrChanged", err)
	}
	if err := r.WriteFile("b.md", []byte("v2"), Precondition{SHA256: testdigest.SHA256("v1")}); !errors.Is(err, ErrChanged) {
		t.Fatalf("write requiring content where nothing is = %v, want ErrChanged", err)
	}
	if err := r.RemoveFile("a.md", Precondition{SHA256: testdigest.SHA256("other")}, false); !errors.Is(err, ErrChanged) {
		t.Fatalf("remove with a stale sha = %v, want ErrChanged", err)
	}
	if err := r.WriteFile("a.md", []byte("v2"), Precondition{Absent: true, SHA256: testdigest.SHA256("v1")}); err == nil {
		t.Fatal("a contradictory precondition was accepted")
	}
	if err := r.RemoveFile("a.md", Precondition{Absent: true}, false); err == nil {
		t.Fatal("a removal requiring absence was accepted")
	}
	if got, _ := r.ReadFile("a.md", 10); string(got) != "v1" {
		t.Fatalf("a refused operation changed the file: %q", got)
	}
	files, _, _ := r.Walk()
	if len(files) != 1 {
		t.Fatalf("refused writes left files behind: %v", files)
	}

	if err := r.WriteFile("a.md", []byte("v2"), Precondition{SHA256: testdigest.SHA256("v1")}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("c.md", []byte("new"), Precondition{Absent: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveFile("a.md", Precondition{SHA256: testdigest.SHA256("v2")}, false); err != nil {
		t.Fatal(err)
	}
}

func TestReadRefusesNonRegularAndLarge(t *testing.T) {
	r, _ := newRoot(t)
	mustWrite(t, r, "big.md", strings.Repeat("x", 101))
	if _, err := r.ReadFile("big.md", 100); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile over the cap = %v, want ErrTooLarge", err)
	}
	if got, err := r.ReadFile("big.md", 101); err != nil || len(got) != 101 {
		t.Fatalf("ReadFile at the cap = %d bytes, %v", len(got), err)
	}
	if err := unix.Mkfifo(filepath.Join(r.Dir(), "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A FIFO with no writer would block a plain open forever.
	done := make(chan error, 1)
	go func() { _, err := r.ReadFile("fifo", 100); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("ReadFile(fifo) = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
	if err := os.Mkdir(filepath.Join(r.Dir(), "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("dir", 100); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadFile(dir) = %v, want ErrNotRegular", err)
	}
	mustWrite(t, r, "dir/inside", "kept")
	for _, pre := range []Precondition{{}, {Absent: true}} {
		if err := r.WriteFile("dir", []byte("x"), pre); !errors.Is(err, ErrNotRegular) {
			t.Fatalf("WriteFile(dir, %+v) = %v, want ErrNotRegular", pre, err)
		}
	}
	if got, err := r.ReadFile("dir/inside", 100); err != nil || string(got) != "kept" {
		t.Fatalf("the refused write touched the folder's file: %q, %v", got, err)
	}
	if err := r.RemoveFile("dir", Precondition{}, false); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("RemoveFile(dir) = %v, want ErrNotRegular", err)
	}
	// An empty folder holds nothing: a file may take its place, unless the
	// write requires the content it expected there.
	if err := os.Mkdir(filepath.Join(r.Dir(), "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("empty", []byte("x"), Precondition{SHA256: testdigest.SHA256("x")}); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("guarded WriteFile(empty folder) = %v, want ErrNotRegular", err)
	}
	if err := r.WriteFile("empty", []byte("now a file"), Precondition{Absent: true}); err != nil {
		t.Fatalf("WriteFile(empty folder) = %v", err)
	}
	if got, err := r.ReadFile("empty", 100); err != nil || string(got) != "now a file" {
		t.Fatalf("ReadFile after replacing an empty folder = %q, %v", got, err)
	}
	if err := r.WriteFile("big.md/x", []byte("x"), Precondition{}); !errors.Is(err, ErrNotDirectory) {
		t.Fatalf("writing under a file = %v, want ErrNotDirectory", err)
	}
}

func TestSymlinkAsLastComponent(t *testing.T) {
	r, outside := newRoot(t)
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("link.md", 100); !errors.Is(err, ErrSymlink) {
		t.Fatalf("ReadFile(link) = %v, want ErrSymlink", err)
	}
	if _, _, _, err := r.hashFile("link.md"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("hash(link) = %v, want ErrSymlink", err)
	}
	// A guarded write treats a link as "not the file I saw".
	if err := r.WriteFile("link.md", []byte("pwned"), Precondition{SHA256: testdigest.SHA256("SECRET")}); !errors.Is(err, ErrChanged) {
		t.Fatalf("guarded write over a link = %v, want ErrChanged", err)
	}
	if err := r.RemoveFile("link.md", Precondition{SHA256: testdigest.SHA256("SECRET")}, false); !errors.Is(err, ErrChanged) {
		t.Fatalf("guarded remove of a link = %v, want ErrChanged", err)
	}
	assertOutsideIntact(t, outside)
	// An unguarded write replaces the link itself; the target is untouched.
	mustWrite(t, r, "link.md", "mine")
	assertOutsideIntact(t, outside)
	if st, err := os.Lstat(filepath.Join(r.Dir(), "link.md")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("link not replaced by a regular file: %v %v", st, err)
	}
	// An unguarded remove removes a link, never its target.
	if err := os.Remove(filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveFile("link.md", Precondition{}, false); err != nil {
		t.Fatal(err)
	}
	assertOutsideIntact(t, outside)
}

func TestSymlinkAsIntermediateDirectory(t *testing.T) {
	r, outside := newRoot(t)
	if err := os.Symlink(outside, filepath.Join(r.Dir(), "notes")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("notes/f", 100); !errors.Is(err, ErrSymlink) {
		t.Fatalf("ReadFile through a linked folder = %v, want ErrSymlink", err)
	}
	if err := r.WriteFile("notes/new.md", []byte("x"), Precondition{}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("WriteFile through a linked folder = %v, want ErrSymlink", err)
	}
	if err := r.WriteFile("notes/sub/new.md", []byte("x"), Precondition{}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("WriteFile (creating folders) through a linked folder = %v, want ErrSymlink", err)
	}
	if err := r.RemoveFile("notes/f", Precondition{}, true); !errors.Is(err, ErrSymlink) {
		t.Fatalf("RemoveFile through a linked folder = %v, want ErrSymlink", err)
	}
	// Lstat must not report "absent" behind a link: the target's file exists.
	if _, err := r.Lstat("notes/missing"); !errors.Is(err, ErrSymlink) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lstat through a linked folder = %v, want ErrSymlink", err)
	}
	// The message names the component that is a link.
	err := r.WriteFile("notes/new.md", []byte("x"), Precondition{})
	if !strings.Contains(err.Error(), `"notes" is a symbolic link`) {
		t.Fatalf("error does not name the link: %v", err)
	}
	// A link deeper down is caught too.
	if err := os.MkdirAll(filepath.Join(r.Dir(), "a/b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(r.Dir(), "a/b/c")); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("a/b/c/f", []byte("x"), Precondition{}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("WriteFile through a deep link = %v, want ErrSymlink", err)
	}
	files, skipped, err := r.Walk()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Fatalf("Walk descended through a link: %v", files)
	}
	if len(skipped) != 2 || !errors.Is(skipped[0].Err, ErrSymlink) || !errors.Is(skipped[1].Err, ErrSymlink) {
		t.Fatalf("Walk skipped = %v, want the two links", skipped)
	}
	assertOutsideIntact(t, outside)
}

func TestLstat(t *testing.T) {
	r, outside := newRoot(t)
	mustWrite(t, r, "a/f.md", "hello")
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "a/link")); err != nil {
		t.Fatal(err)
	}
	fi, err := r.Lstat("a/f.md")
	if err != nil || !fi.Mode.IsRegular() || fi.Size != 5 {
		t.Fatalf("Lstat(a/f.md) = %+v, %v; want a regular file of 5 bytes", fi, err)
	}
	if fi, err := r.Lstat("a"); err != nil || !fi.Mode.IsDir() {
		t.Fatalf("Lstat(a) = %+v, %v; want a folder", fi, err)
	}
	// The link is described, not followed (its target is 6 bytes).
	if fi, err := r.Lstat("a/link"); err != nil || fi.Mode&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat(a/link) = %+v, %v; want the symlink itself", fi, err)
	}
	for _, rel := range []string{"a/missing", "missing/f"} {
		if _, err := r.Lstat(rel); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Lstat(%s) = %v, want fs.ErrNotExist", rel, err)
		}
	}
	if _, err := r.Lstat("a/f.md/x"); !errors.Is(err, ErrNotDirectory) {
		t.Fatalf("Lstat below a file = %v, want ErrNotDirectory", err)
	}
	if _, err := r.Lstat("../outside/f"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("Lstat(../outside/f) = %v, want ErrInvalidPath", err)
	}
}

func TestSymlinkAsTheFolder(t *testing.T) {
	r, outside := newRoot(t)
	mustWrite(t, r, "f", "mine")
	// The agent replaces the whole store folder with a link.
	if err := os.RemoveAll(r.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, r.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("f", 100); !errors.Is(err, ErrSymlink) {
		t.Fatalf("ReadFile after the folder became a link = %v, want ErrSymlink", err)
	}
	if err := r.WriteFile("f", []byte("x"), Precondition{}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("WriteFile after the folder became a link = %v, want ErrSymlink", err)
	}
	if _, _, err := r.Walk(); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Walk after the folder became a link = %v, want ErrSymlink", err)
	}
	assertOutsideIntact(t, outside)
	// A folder that is simply gone reads as not existing.
	if err := os.Remove(r.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Walk(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Walk of a removed folder = %v, want ErrNotExist", err)
	}
	if err := r.WriteFile("f", []byte("x"), Precondition{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile into a removed folder = %v, want ErrNotExist (the folder is never re-created by a write)", err)
	}
}

// TestSwapBetweenCalls swaps a folder for a symlink to the outside between
// two calls, back and forth: every call made while the link is in place
// refuses, and none reaches outside.
func TestSwapBetweenCalls(t *testing.T) {
	r, outside := newRoot(t)
	dir, aside := filepath.Join(r.Dir(), "d"), filepath.Join(filepath.Dir(r.Dir()), "aside")
	mustWrite(t, r, "d/f", "mine")
	files, _, err := r.Walk()
	if err != nil || len(files) != 1 {
		t.Fatalf("Walk = %v, %v", files, err)
	}
	cache := NewHashCache(nil)
	for range 3 {
		if err := os.Rename(dir, aside); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadFile("d/f", 100); !errors.Is(err, ErrSymlink) {
			t.Fatalf("ReadFile = %v, want ErrSymlink", err)
		}
		if err := r.WriteFile("d/f", []byte("x"), Precondition{}); !errors.Is(err, ErrSymlink) {
			t.Fatalf("WriteFile = %v, want ErrSymlink", err)
		}
		if err := r.RemoveFile("d/f", Precondition{}, true); !errors.Is(err, ErrSymlink) {
			t.Fatalf("RemoveFile = %v, want ErrSymlink", err)
		}
		// The stat from before the swap must not let the cache read the link.
		if _, err := cache.Sum(r, "d/f", files[0].Info); !errors.Is(err, ErrSymlink) {
			t.Fatalf("Sum = %v, want ErrSymlink", err)
		}
		if got, skipped, err := r.Walk(); err != nil || len(got) != 0 || len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrSymlink) {
			t.Fatalf("Walk with the link in place = %v, %v, %v", got, skipped, err)
		}
		assertOutsideIntact(t, outside)
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, dir); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadFile("d/f", 100); err != nil || string(got) != "mine" {
			t.Fatalf("ReadFile after swapping back = %q, %v", got, err)
		}
	}
}

// TestSwapRaceNeverEscapes swaps a folder for a symlink to the outside, over
// and over, while every operation runs against paths inside it. Whatever the
// interleaving, nothing outside may be read, written or removed.
func TestSwapRaceNeverEscapes(t *testing.T) {
	r, outside := newRoot(t)
	dir, aside := filepath.Join(r.Dir(), "d"), filepath.Join(r.Dir(), "aside")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// A write landing while d is briefly absent re-creates it, so
			// each step clears whatever is in the way (os.RemoveAll removes
			// a link itself, never its target).
			_ = os.RemoveAll(aside)
			if os.Rename(dir, aside) != nil {
				_ = os.Mkdir(dir, 0o700)
				continue
			}
			_ = os.RemoveAll(dir)
			_ = os.Symlink(outside, dir)
			time.Sleep(100 * time.Microsecond)
			_ = os.RemoveAll(dir)
			_ = os.Rename(aside, dir)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	cache := NewHashCache(nil)
	// Run until the swapper has demonstrably won some races (an operation
	// met the link) and lost others (an operation went through), bounded.
	sawLink, sawDir := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for (sawLink < 10 || sawDir < 10) && time.Now().Before(deadline) {
		switch err := r.WriteFile("d/f", []byte("mine"), Precondition{}); {
		case errors.Is(err, ErrSymlink):
			sawLink++
		case err == nil:
			sawDir++
		}
		_ = r.WriteFile("d/new/g", []byte("mine"), Precondition{})
		if got, err := r.ReadFile("d/f", 100); err == nil && string(got) != "mine" {
			t.Fatalf("read escaped the folder: %q", got)
		}
		files, _, err := r.Walk()
		if err == nil {
			for _, f := range files {
				if d, err := cache.Sum(r, f.Path, f.Info); err == nil && d.SHA256 == testdigest.SHA256("SECRET") {
					t.Fatalf("hash escaped the folder at %s", f.Path)
				}
			}
		}
		_ = r.RemoveFile("d/f", Precondition{}, false)
		_ = r.RemoveFile("d/new/g", Precondition{}, true)
	}
	stop.Store(true)
	wg.Wait()
	if sawLink == 0 || sawDir == 0 {
		t.Fatalf("the race was not exercised: %d writes met the link, %d went through", sawLink, sawDir)
	}
	assertOutsideIntact(t, outside)
}

func TestWalkReportsSkipped(t *testing.T) {
	r, outside := newRoot(t)
	mustWrite(t, r, "a.md", "a")
	mustWrite(t, r, "sub/b.md", "bb")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "filelink")))
	must(os.Symlink(outside, filepath.Join(r.Dir(), "sub/dirlink")))
	must(unix.Mkfifo(filepath.Join(r.Dir(), "sub/fifo"), 0o600))
	must(os.WriteFile(filepath.Join(r.Dir(), "bad\xffname"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(r.Dir(), "sub", TempPrefix+"0123"), []byte("x"), 0o600))

	files, skipped, err := r.Walk()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "a.md" || files[1].Path != "sub/b.md" {
		t.Fatalf("files = %v", files)
	}
	if files[1].Info.Size != 2 || files[1].Info.Inode == 0 || !files[1].Info.Mode.IsRegular() || files[1].Info.ChangeTime.IsZero() {
		t.Fatalf("stat not filled in: %+v", files[1].Info)
	}
	want := map[string]error{
		"bad\xffname":                ErrBadName,
		"filelink":                   ErrSymlink,
		"sub/" + TempPrefix + "0123": ErrTempFile,
		"sub/dirlink":                ErrSymlink,
		"sub/fifo":                   ErrNotRegular,
	}
	if len(skipped) != len(want) {
		t.Fatalf("skipped = %v, want %d entries", skipped, len(want))
	}
	for _, s := range skipped {
		if !errors.Is(s.Err, want[s.Path]) {
			t.Errorf("skipped %q: %v, want %v", s.Path, s.Err, want[s.Path])
		}
	}
}

func TestDigest(t *testing.T) {
	r, _ := newRoot(t)
	boundary := strings.Repeat("a", 32<<10-1)
	cases := []struct {
		name, content string
		utf8          bool
	}{
		{"empty", "", true},
		{"ascii", "hello", true},
		{"multibyte", "héllo wörld ✓ 𝄞", true},
		{"rune split across reads", boundary + "é" + boundary + "𝄞", true},
		{"invalid byte", "ab\xffcd", false},
		{"truncated rune at end", "ab\xe2\x9c", false},
		{"invalid across reads", boundary + "\xc3" + "a", false},
		{"large", strings.Repeat("memory ", 100000), true},
	}
	for _, c := range cases {
		mustWrite(t, r, "f", c.content)
		d, _, stable, err := r.hashFile("f")
		if err != nil || !stable {
			t.Fatalf("%s: %v stable=%v", c.name, err, stable)
		}
		if d.SHA256 != testdigest.SHA256(c.content) || d.Size != int64(len(c.content)) || d.UTF8 != c.utf8 {
			t.Errorf("%s: digest %+v, want sha %s utf8 %v", c.name, d, testdigest.SHA256(c.content), c.utf8)
		}
	}
}

func TestHashCacheRereadsOnlyChangedFiles(t *testing.T) {
	r, _ := newRoot(t)
	for _, f := range []string{"a", "b", "c/d"} {
		mustWrite(t, r, f, "content of "+f)
	}
	// A clock well past the files' change times, so none is "too young".
	later := time.Now().Add(time.Hour)
	cache := NewHashCache(func() time.Time { return later })
	scan := func() map[string]string {
		t.Helper()
		files, _, err := r.Walk()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range files {
			d, err := cache.Sum(r, f.Path, f.Info)
			if err != nil {
				t.Fatal(err)
			}
			out[f.Path] = d.SHA256
		}
		return out
	}
	first := scan()
	if cache.Reads() != 3 {
		t.Fatalf("first scan read %d files, want 3", cache.Reads())
	}
	if again := scan(); cache.Reads() != 3 || !maps.Equal(first, again) {
		t.Fatalf("unchanged folder: %d reads (want 3 in total), digests equal %v", cache.Reads(), maps.Equal(first, again))
	}
	// Same size, different content, written in place.
	if err := os.WriteFile(filepath.Join(r.Dir(), "a"), []byte("CONTENT OF a"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Replaced by rename with the old mtime restored: ctime and inode still move.
	mustWrite(t, r, "b", "CONTENT OF b")
	old := time.Unix(1_000_000, 0)
	if err := os.Chtimes(filepath.Join(r.Dir(), "b"), old, old); err != nil {
		t.Fatal(err)
	}
	third := scan()
	if cache.Reads() != 5 {
		t.Fatalf("after changing two files: %d reads in total, want 5", cache.Reads())
	}
	if third["a"] != testdigest.SHA256("CONTENT OF a") || third["b"] != testdigest.SHA256("CONTENT OF b") || third["c/d"] != first["c/d"] {
		t.Fatalf("stale digests: %v", third)
	}
	cache.Retain(func(rel string) bool { return rel == "a" })
	scan()
	if cache.Reads() != 7 {
		t.Fatalf("after Retain: %d reads in total, want 7 (b and c/d forgotten)", cache.Reads())
	}
}

// TestHashCacheKeyIsSizeMtimeCtimeInode pins the cache key one field at a
// time: a stat that differs from the cached one in any of size, mtime,
// ctime, inode or device makes the file be read again, and the same stat
// never does. Each field is the only witness of some change: ctime of an
// in-place rewrite whose mtime was put back (cp -p, rsync -t, touch -r),
// the inode of a replace-by-rename landing in the same timestamp tick,
// the size of a truncation on a filesystem with coarse timestamps.
func TestHashCacheKeyIsSizeMtimeCtimeInode(t *testing.T) {
	r, _ := newRoot(t)
	mustWrite(t, r, "a", "content of a")
	later := time.Now().Add(time.Hour)
	cache := NewHashCache(func() time.Time { return later })
	files, _, err := r.Walk()
	if err != nil || len(files) != 1 {
		t.Fatalf("Walk = %v, %v", files, err)
	}
	info := files[0].Info
	if _, err := cache.Sum(r, "a", info); err != nil {
		t.Fatal(err)
	}
	same := info
	if _, err := cache.Sum(r, "a", same); err != nil || cache.Reads() != 1 {
		t.Fatalf("the same stat: %d reads in total, want 1 (%v)", cache.Reads(), err)
	}
	for _, c := range []struct {
		field  string
		change func(*FileInfo)
	}{
		{"size", func(fi *FileInfo) { fi.Size++ }},
		{"mtime", func(fi *FileInfo) { fi.ModTime = fi.ModTime.Add(time.Nanosecond) }},
		{"ctime", func(fi *FileInfo) { fi.ChangeTime = fi.ChangeTime.Add(time.Nanosecond) }},
		{"inode", func(fi *FileInfo) { fi.Inode++ }},
		{"device", func(fi *FileInfo) { fi.Device++ }},
	} {
		t.Run(c.field, func(t *testing.T) {
			before := cache.Reads()
			changed := info
			c.change(&changed)
			if _, err := cache.Sum(r, "a", changed); err != nil {
				t.Fatal(err)
			}
			if cache.Reads() != before+1 {
				t.Fatalf("a stat differing only in %s was served from the cache", c.field)
			}
			// The file was re-read and cached under its real stat again.
			if _, err := cache.Sum(r, "a", info); err != nil || cache.Reads() != before+1 {
				t.Fatalf("the real stat after the re-read: %d reads, want %d (%v)", cache.Reads(), before+1, err)
			}
		})
	}

	// The real case only ctime catches: same size, written in place, and
	// the old mtime put back.
	mtime := info.ModTime
	if err := os.WriteFile(filepath.Join(r.Dir(), "a"), []byte("CONTENT OF A"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(r.Dir(), "a"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	files, _, err = r.Walk()
	if err != nil {
		t.Fatal(err)
	}
	now := files[0].Info
	if now.Size != info.Size || !now.ModTime.Equal(info.ModTime) || now.Inode != info.Inode {
		t.Fatalf("the rewrite changed more than ctime: %+v, was %+v", now, info)
	}
	later = time.Now().Add(time.Hour)
	d, err := cache.Sum(r, "a", now)
	if err != nil || d.SHA256 != testdigest.SHA256("CONTENT OF A") {
		t.Fatalf("after an in-place rewrite with its mtime restored: %+v, %v; want the new content's digest", d, err)
	}
}

// TestHashCacheDistrustsYoungFiles: a file changed within the racy window is
// hashed again on every scan, since a second write in the same timestamp tick
// would leave its stat unchanged.
func TestHashCacheDistrustsYoungFiles(t *testing.T) {
	r, _ := newRoot(t)
	mustWrite(t, r, "a", "x")
	now := time.Now()
	cache := NewHashCache(func() time.Time { return now })
	files, _, _ := r.Walk()
	for range 3 {
		if _, err := cache.Sum(r, "a", files[0].Info); err != nil {
			t.Fatal(err)
		}
	}
	if cache.Reads() != 3 {
		t.Fatalf("young file read %d times in 3 scans, want 3", cache.Reads())
	}
	now = now.Add(time.Hour)
	for range 3 {
		if _, err := cache.Sum(r, "a", files[0].Info); err != nil {
			t.Fatal(err)
		}
	}
	if cache.Reads() != 4 {
		t.Fatalf("settled file read %d times in total, want 4", cache.Reads())
	}
	if err := os.Remove(filepath.Join(r.Dir(), "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHashCache(nil).Sum(r, "a", files[0].Info); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Sum of a removed file = %v, want ErrNotExist", err)
	}
}

func TestCaseInsensitiveProbe(t *testing.T) {
	r, _ := newRoot(t)
	insensitive, err := r.CaseInsensitive()
	if err != nil {
		t.Fatal(err)
	}
	// Ask the filesystem directly for the expected answer.
	if err := os.WriteFile(filepath.Join(r.Dir(), "probe"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(r.Dir(), "PROBE"))
	if want := err == nil; insensitive != want {
		t.Fatalf("CaseInsensitive = %v, want %v", insensitive, want)
	}
	if err := os.Remove(filepath.Join(r.Dir(), "probe")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(r.Dir())
	if len(entries) != 0 {
		t.Fatalf("the probe left files behind: %v", entries)
	}
}

// A hard link to a file outside the folder is not a file of the folder:
// it is never read, hashed, listed or used to check a precondition, so
// its content can neither leak nor be published. Replacing or removing
// it only touches the folder's name for it.
func TestHardLinkIsNotARegularFile(t *testing.T) {
	r, outside := newRoot(t)
	if err := os.Link(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("link.md", 100); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadFile(hard link) = %v, want ErrNotRegular", err)
	}
	if _, _, _, err := r.hashFile("link.md"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("hashFile(hard link) = %v, want ErrNotRegular", err)
	}
	files, skipped, err := r.Walk()
	if err != nil || len(files) != 0 || len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrNotRegular) {
		t.Fatalf("Walk = %v, %v, %v; want the link skipped as not a regular file", files, skipped, err)
	}
	if err := r.WriteFile("link.md", []byte("x"), Precondition{SHA256: testdigest.SHA256("SECRET")}); !errors.Is(err, ErrChanged) {
		t.Fatalf("guarded WriteFile over the hard link = %v, want ErrChanged", err)
	}
	assertOutsideIntact(t, outside)
	if err := r.WriteFile("link.md", []byte("mine"), Precondition{}); err != nil {
		t.Fatalf("WriteFile over the hard link = %v", err)
	}
	assertOutsideIntact(t, outside)
	if err := os.Link(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link2.md")); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveFile("link2.md", Precondition{}, false); err != nil {
		t.Fatalf("RemoveFile(hard link) = %v", err)
	}
	assertOutsideIntact(t, outside)
}

// Visit shows every entry — files, folders, links — in lexical depth-first
// order, never follows a link (neither below start nor on the way to it),
// and honours SkipDir and SkipAll.
func TestVisit(t *testing.T) {
	r, outside := newRoot(t)
	mustWrite(t, r, "a/x.md", "x")
	mustWrite(t, r, "a/y/z.md", "z")
	mustWrite(t, r, "b.md", "b")
	if err := os.Symlink(outside, filepath.Join(r.Dir(), "a", "out")); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		rel  string
		mode fs.FileMode
	}
	collect := func(start string, fn func(rel string) error) ([]seen, error) {
		var got []seen
		err := r.Visit(start, func(rel string, info FileInfo, err error) error {
			if err != nil {
				t.Fatalf("Visit reported %s: %v", rel, err)
			}
			got = append(got, seen{rel, info.Mode.Type()})
			if fn != nil {
				return fn(rel)
			}
			return nil
		})
		return got, err
	}
	got, err := collect("", nil)
	want := []seen{{"a", fs.ModeDir}, {"a/out", fs.ModeSymlink}, {"a/x.md", 0}, {"a/y", fs.ModeDir}, {"a/y/z.md", 0}, {"b.md", 0}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Visit(\"\") = %v, %v; want %v", got, err, want)
	}
	if got, err = collect("a/y", nil); err != nil || !slices.Equal(got, []seen{{"a/y/z.md", 0}}) {
		t.Fatalf("Visit(a/y) = %v, %v", got, err)
	}
	got, err = collect("", func(rel string) error {
		if rel == "a" {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil || !slices.Equal(got, []seen{{"a", fs.ModeDir}, {"b.md", 0}}) {
		t.Fatalf("Visit with SkipDir = %v, %v", got, err)
	}
	got, err = collect("", func(string) error { return fs.SkipAll })
	if err != nil || len(got) != 1 {
		t.Fatalf("Visit with SkipAll = %v, %v; want one entry and no error", got, err)
	}
	stop := errors.New("stop")
	if _, err := collect("", func(string) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Visit whose fn fails = %v, want that error", err)
	}
	if err := r.Visit("a/out", func(string, FileInfo, error) error { return nil }); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Visit through a link = %v, want ErrSymlink", err)
	}
	if err := r.Visit("../outside", func(string, FileInfo, error) error { return nil }); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("Visit(../outside) = %v, want ErrInvalidPath", err)
	}
	assertOutsideIntact(t, outside)
}

// A subfolder Visit cannot list is reported to fn, once visited and once
// with the error, and the walk goes on.
func TestVisitReportsUnreadableFolders(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any folder")
	}
	r, _ := newRoot(t)
	mustWrite(t, r, "locked/f.md", "f")
	mustWrite(t, r, "z.md", "z")
	if err := os.Chmod(filepath.Join(r.Dir(), "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(r.Dir(), "locked"), 0o700) })
	var got []string
	err := r.Visit("", func(rel string, _ FileInfo, err error) error {
		got = append(got, fmt.Sprint(rel, " ", err != nil))
		return nil
	})
	if want := []string{"locked false", "locked true", "z.md false"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Visit = %v, %v; want %v", got, err, want)
	}
}

// WithHardLinks reads a file with several links, and a write still
// replaces the name instead of writing through the link; KeepingModes keeps
// a replaced file's mode and still makes a new one 0600.
func TestHardLinksAndModesViews(t *testing.T) {
	r, outside := newRoot(t)
	if err := os.Link(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	lenient := r.WithHardLinks().KeepingModes()
	if got, err := lenient.ReadFile("link.md", 100); err != nil || string(got) != "SECRET" {
		t.Fatalf("WithHardLinks ReadFile = %q, %v", got, err)
	}
	files, skipped, err := lenient.Walk()
	if err != nil || len(files) != 1 || len(skipped) != 0 {
		t.Fatalf("WithHardLinks Walk = %v, %v, %v; want the linked file listed", files, skipped, err)
	}
	if _, err := r.ReadFile("link.md", 100); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("the strict view reads the hard link: %v", err)
	}
	if err := lenient.WriteFile("link.md", []byte("mine"), Precondition{}); err != nil {
		t.Fatal(err)
	}
	assertOutsideIntact(t, outside)

	script := filepath.Join(r.Dir(), "run.sh")
	if err := os.WriteFile(script, []byte("a"), 0o750); err != nil {
		t.Fatal(err)
	}
	mode := func(rel string) fs.FileMode {
		fi, err := os.Lstat(filepath.Join(r.Dir(), rel))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if err := lenient.WriteFile("run.sh", []byte("b"), Precondition{}); err != nil || mode("run.sh") != 0o750 {
		t.Fatalf("KeepingModes rewrite: mode %v, err %v; want 0750", mode("run.sh"), err)
	}
	if err := lenient.WriteFile("new.sh", []byte("c"), Precondition{}); err != nil || mode("new.sh") != 0o600 {
		t.Fatalf("KeepingModes new file: mode %v, err %v; want 0600", mode("new.sh"), err)
	}
	if err := r.WriteFile("run.sh", []byte("d"), Precondition{}); err != nil || mode("run.sh") != 0o600 {
		t.Fatalf("strict rewrite: mode %v, err %v; want 0600", mode("run.sh"), err)
	}
}
