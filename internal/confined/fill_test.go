//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A fill creates files and their folders at their names, concurrently,
// with what WriteFile would have written, and leaves no temporary file.
func TestFillerCreatesFilesAndFolders(t *testing.T) {
	r, outside := newRoot(t)
	f, err := r.Filler()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 60 {
		want[fmt.Sprintf("d%d/e%d/f%d.md", i%3, i%5, i)] = fmt.Sprint("content ", i)
		want[fmt.Sprintf("top%d.md", i)] = fmt.Sprint("top ", i)
	}
	var wg sync.WaitGroup
	for rel, content := range want {
		wg.Go(func() {
			if err := f.Create(rel, []byte(content)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f.Close()
	files, skipped, err := r.Walk()
	if err != nil || len(skipped) > 0 {
		t.Fatalf("walk: %v, skipped %v", err, skipped)
	}
	if len(files) != len(want) {
		t.Fatalf("%d files, want %d", len(files), len(want))
	}
	for rel, content := range want {
		got, err := r.ReadFile(rel, 1<<10)
		if err != nil || string(got) != content {
			t.Fatalf("%s: %q, %v", rel, got, err)
		}
		fi, err := os.Lstat(filepath.Join(r.Dir(), rel))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v", rel, fi.Mode(), err)
		}
	}
	assertOutsideIntact(t, outside)
	if err := f.Create("late.md", nil); err == nil {
		t.Fatal("a closed fill created a file")
	}
}

// A fill replaces nothing and follows no symlink, neither at the file nor
// at a folder on its way, and refuses the names Walk skips.
func TestFillerReplacesNothingAndFollowsNoLink(t *testing.T) {
	r, outside := newRoot(t)
	mustWrite(t, r, "there.md", "agent's")
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(r.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(r.Dir(), "sub")); err != nil {
		t.Fatal(err)
	}
	f, err := r.Filler()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		rel  string
		want error
	}{
		{"there.md", ErrChanged},
		{"link.md", ErrChanged},
		{"sub/f", ErrSymlink},
		{"sub/new.md", ErrSymlink},
		{"there.md/x.md", ErrNotDirectory},
		{TempPrefix + "x", ErrInvalidPath},
		{"../outside/f", ErrInvalidPath},
	} {
		if err := f.Create(c.rel, []byte("server's")); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.rel, err, c.want)
		}
	}
	if got, err := r.ReadFile("there.md", 100); err != nil || string(got) != "agent's" {
		t.Fatalf("there.md: %q, %v", got, err)
	}
	assertOutsideIntact(t, outside)
}
