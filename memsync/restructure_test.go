package memsync_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/memsync"
)

// An agent may turn a memory's file into a folder of the same name, or a
// folder into a file: /a becomes /a/b, or /d/x becomes /d. The server cannot
// hold both shapes at once, so the old memory must be deleted before the new
// one can be created, and the file at the new path is the agent's only copy
// until it is.
func TestAFileReplacedByAFolderReachesTheServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before map[string]string
		// reshape changes the folder as the agent would with its shell.
		reshape func(t *testing.T, dir string)
		after   map[string]string
	}{
		{"file to folder", map[string]string{"/a": "a"}, func(t *testing.T, dir string) {
			removeFile(t, dir, "a")
			writeFile(t, dir, "a/b.md", "now a folder")
		}, map[string]string{"/a/b.md": "now a folder"}},
		{"folder to file", map[string]string{"/d/x.md": "x"}, func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, "d")))
			writeFile(t, dir, "d", "now a file")
		}, map[string]string{"/d": "now a file"}},
	} {
		t.Run(tc.name+", synced after the window", func(t *testing.T) {
			e := newEnv(t)
			for p, c := range tc.before {
				e.put(p, c)
			}
			m := e.mount(t.TempDir())
			tc.reshape(t, m.dir)
			m.Sync(e.ctx) // the old memory's deletion starts its window
			e.clock.Advance(memsync.DefaultCorroborationWindow + time.Second)
			m.Sync(e.ctx) // deletes the old memory, then creates the new one
			equal(t, "server", e.server(), tc.after)
			m.Sync(e.ctx)
			equal(t, "folder", folder(t, m.dir), tc.after)
		})
		t.Run(tc.name+", at the end of the session", func(t *testing.T) {
			e := newEnv(t)
			for p, c := range tc.before {
				e.put(p, c)
			}
			m := e.mount(t.TempDir())
			tc.reshape(t, m.dir)
			rep := m.End(e.ctx, true)
			equal(t, "server", e.server(), tc.after)
			if rep.FinalSync.Failed != 0 || rep.Flush.Failed != 0 {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

// A folder the agent emptied (rm a/b leaves a/ behind) holds nothing, so it
// must not keep a memory of the same name, created elsewhere, out of the
// folder.
func TestAnEmptiedFolderGivesWayToAMemoryOfItsName(t *testing.T) {
	e := newEnv(t)
	e.put("/a/b.md", "b")
	m := e.mount(t.TempDir())
	removeFile(t, m.dir, "a/b.md")
	e.remove("/a/b.md")
	e.put("/a", "a file now")
	m.Sync(e.ctx)
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a": "a file now"})
}

// When the agent makes a folder /x while another writer makes a memory /x,
// neither side can give way without losing an edit. The agent's files stay
// in the folder, and the operator is told what is in the way and what to
// do.
func TestAFileAndAMemoryThatCannotCoexistAreBothKeptAndReported(t *testing.T) {
	e := newEnv(t)
	m := e.mount(t.TempDir())
	writeFile(t, m.dir, "x/y.md", "the agent's")
	e.put("/x", "another writer's")
	m.Sync(e.ctx)
	m.Sync(e.ctx)
	equal(t, "folder", folder(t, m.dir), map[string]string{"/x/y.md": "the agent's"})
	equal(t, "server", e.server(), map[string]string{"/x": "another writer's"})
	w := e.logs.Records(t, slog.LevelWarn, "the memory /x is in its way")
	if len(w) != 1 || w[0]["path"] != "/x/y.md" || !strings.Contains(w[0]["msg"].(string), "rename the file") {
		t.Fatalf("conflict warning (once, for the file): %v\n%s", w, e.logs)
	}
}
