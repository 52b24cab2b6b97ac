package memsync_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/memsync"
)

// RecoverLeftover hands each edit of a killed worker's folder to the
// upload with the journal's base, in path order, and removes the folder
// only once every upload succeeded: a failed upload leaves it exactly as
// it was, and a folder a running session serves is not touched at all.
func TestRecoverLeftoverUploadsTheEditsThenRemovesTheFolder(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	crashed := crashedMount(t, e, root)
	must(t, os.Mkdir(filepath.Join(root, "sesn_2"), 0o700))
	live := e.mount(filepath.Join(root, "sesn_2"), sessionID("sesn_2"))
	defer live.End(e.ctx, false)
	found, err := memsync.FindLeftovers(root)
	must(t, err)
	byDir := map[string]memsync.Leftover{}
	for _, l := range found {
		byDir[l.Dir] = l
	}
	ctx := context.Background()

	calls := 0
	if _, err := memsync.RecoverLeftover(ctx, root, byDir[live.dir], func(context.Context, memsync.RecoveredFile) error {
		calls++
		return nil
	}); !errors.Is(err, memsync.ErrLeftoverHeld) || calls != 0 {
		t.Fatalf("a served folder: %v after %d uploads, want ErrLeftoverHeld before any", err, calls)
	}

	before := folder(t, crashed.dir)
	refused := errors.New("refused by the server")
	n, err := memsync.RecoverLeftover(ctx, root, byDir[crashed.dir], func(_ context.Context, f memsync.RecoveredFile) error {
		if f.Path == "/new/note.md" {
			return refused
		}
		return nil
	})
	if !errors.Is(err, refused) || n != 1 {
		t.Fatalf("a refused upload: %d uploaded, %v", n, err)
	}
	equal(t, "the folder after a refused upload", folder(t, crashed.dir), before)
	if _, err := os.Stat(filepath.Join(memsync.StateDir(crashed.dir), "journal.json")); err != nil {
		t.Fatalf("the journal after a refused upload: %v", err)
	}

	var got []memsync.RecoveredFile
	n, err = memsync.RecoverLeftover(ctx, root, byDir[crashed.dir], func(_ context.Context, f memsync.RecoveredFile) error {
		got = append(got, f)
		return nil
	})
	must(t, err)
	want := []memsync.RecoveredFile{
		{Path: "/edit.md", Content: "the agent's edit", Base: testdigest.SHA256("before")},
		{Path: "/new/note.md", Content: "written just before the kill"},
	}
	if n != 2 || !slices.Equal(got, want) {
		t.Fatalf("uploaded %d: %+v\nwant %+v", n, got, want)
	}
	for _, gone := range []string{crashed.dir, memsync.StateDir(crashed.dir)} {
		if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if _, err := os.Stat(live.dir); err != nil {
		t.Errorf("the served folder: %v", err)
	}
}
