package memsync_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/memsync"
)

func sessionID(id string) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) { c.SessionID = id }
}

// crashedMount is a session that synced once, then had the agent edit its
// folder (an edit, a new file, a deletion) before its worker was killed.
func crashedMount(t *testing.T, e *env, root string, opts ...mountOption) *mount {
	e.put("/keep.md", "kept as is")
	e.put("/edit.md", "before")
	e.put("/gone.md", "deleted by the agent")
	m := e.mount(root, append([]mountOption{sessionID("sesn_1")}, opts...)...)
	writeFile(t, m.dir, "edit.md", "the agent's edit")
	writeFile(t, m.dir, "new/note.md", "written just before the kill")
	removeFile(t, m.dir, "gone.md")
	// Interrupted atomic writes leave temporary files behind.
	writeFile(t, m.dir, "new/"+confined.TempPrefix+"0001", "half a write")
	writeFile(t, memsync.StateDir(m.dir), confined.TempPrefix+"0002", "half a journal")
	m.Crash()
	return m
}

func TestAReclaimedSessionAdoptsTheFolderItsCrashLeft(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	crashedMount(t, e, root)
	e.put("/remote.md", "changed on the server meanwhile")

	m := e.session(root, sessionID("sesn_1"))
	must(t, m.Mount(e.ctx))
	// The edits reached the server; the deletion waits for its window, as
	// in any sync; the server's change reached the folder.
	equal(t, "server", e.server(), map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/gone.md": "deleted by the agent", "/remote.md": "changed on the server meanwhile",
	})
	equal(t, "folder", folder(t, m.dir), map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/remote.md": "changed on the server meanwhile",
	})
	if got := e.logs.Records(t, slog.LevelInfo, "adopting the folder an interrupted run of this session left"); len(got) != 1 || got[0]["folder"] != m.dir {
		t.Fatalf("adoption log: %v\n%s", got, e.logs)
	}
	rep := m.End(e.ctx, true)
	equal(t, "server after the end", e.server(), map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/remote.md": "changed on the server meanwhile",
	})
	if len(rep.Removed) != 1 {
		t.Fatalf("End: %+v", rep)
	}
	assertNothingLeft(t, root)
}

func TestAFolderLeftByAnEndedSessionIsFlushedThenReplaced(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	crashedMount(t, e, root)

	m := e.session(root, sessionID("sesn_2"))
	must(t, m.Mount(e.ctx))
	// The earlier session's edits are uploaded; its deletion is not (a
	// flush only uploads), and the new folder is a fresh copy.
	want := map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/gone.md": "deleted by the agent",
	}
	equal(t, "server", e.server(), want)
	equal(t, "folder", folder(t, m.dir), want)
	m.End(e.ctx, true)
	assertNothingLeft(t, root)
}

func TestAReadOnlyLeftoverKeepsCopiesOfWhatItCannotUpload(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	crashedMount(t, e, root, readOnly)

	m := e.session(root, sessionID("sesn_2"), readOnly)
	must(t, m.Mount(e.ctx))
	equal(t, "server", e.server(), map[string]string{"/keep.md": "kept as is", "/edit.md": "before", "/gone.md": "deleted by the agent"})
	equal(t, "folder", folder(t, m.dir), e.server())
	kept := keptCopies(t, m.dir)
	equal(t, "kept copies", kept, map[string]string{"/edit.md": "the agent's edit", "/new/note.md": "written just before the kill"})
	if got := e.logs.Records(t, slog.LevelWarn, "a copy is kept before the folder is removed"); len(got) != 2 || !strings.HasPrefix(got[0]["kept_copy"].(string), memsync.StateDir(m.dir)) {
		t.Fatalf("kept-copy logs: %v", got)
	}
	m.End(e.ctx, true)
	if got := keptCopies(t, m.dir); len(got) != 2 {
		t.Fatalf("the kept copies did not outlive the session: %v", got)
	}
}

// keptCopies returns the kept copies beside dir, by memory path without the
// suffix the copy adds.
func keptCopies(t *testing.T, dir string) map[string]string {
	t.Helper()
	kept := filepath.Join(memsync.StateDir(dir), "kept")
	out := map[string]string{}
	if _, err := os.Stat(kept); os.IsNotExist(err) {
		return out
	}
	for p, content := range folder(t, kept) {
		out[p[:strings.LastIndex(p, ".")]] = content
	}
	return out
}

// assertNothingLeft fails if anything but kept copies is left under root.
func assertNothingLeft(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	must(t, err)
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("left under the mount root: %v", names)
	}
}

func TestLeftoversThatCannotBeAdoptedAreRefusedUntouched(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		spoil  func(t *testing.T, dir string)
		want   string
		second bool // a live session still holds the folder
	}{
		{name: "no journal", want: "holds no sync journal", spoil: func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(memsync.StateDir(dir), "journal.json")))
		}},
		{name: "no state folder", want: "no sync journal is beside it", spoil: func(t *testing.T, dir string) {
			must(t, os.RemoveAll(memsync.StateDir(dir)))
		}},
		{name: "journal of another store", want: "belongs to memory store memstore_other", spoil: func(t *testing.T, dir string) {
			editJournal(t, dir, func(j map[string]any) { j["memory_store_id"] = "memstore_other" })
		}},
		{name: "journal of another folder", want: "belongs to the folder /elsewhere", spoil: func(t *testing.T, dir string) {
			editJournal(t, dir, func(j map[string]any) { j["folder"] = "/elsewhere" })
		}},
		{name: "marker altered", want: "marker file .anthropic-memory-store is mismatch", spoil: func(t *testing.T, dir string) {
			writeFile(t, dir, memsync.MarkerName, "version 1\nmemstore_other")
		}},
		{name: "a live worker serves it", want: "another running worker serves that folder", second: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			first := e.mount(root, sessionID("sesn_1"))
			writeFile(t, first.dir, "edit.md", "the agent's edit")
			if !c.second {
				first.Crash()
			}
			if c.spoil != nil {
				c.spoil(t, first.dir)
			}
			before := folder(t, first.dir)
			versions := e.versions()
			m := e.session(root, sessionID("sesn_1"))
			err := m.Mount(e.ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), first.dir) {
				t.Fatalf("Mount = %v, want a refusal saying %q", err, c.want)
			}
			equal(t, "the leftover folder", folder(t, first.dir), before)
			if got := e.versions(); got != versions {
				t.Fatalf("a refused adoption changed the server: %d versions, want %d", got, versions)
			}
			if rep := m.End(e.ctx, false); len(rep.Removed)+len(rep.Kept) != 0 {
				t.Fatalf("End after a refused adoption: %+v", rep)
			}
			equal(t, "the leftover folder after End", folder(t, first.dir), before)
			if c.second {
				first.End(e.ctx, true)
				equal(t, "server", e.server(), map[string]string{"/edit.md": "the agent's edit"})
			}
		})
	}
}

func editJournal(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(memsync.StateDir(dir), "journal.json")
	data, err := os.ReadFile(p)
	must(t, err)
	var j map[string]any
	must(t, json.Unmarshal(data, &j))
	edit(j)
	data, err = json.Marshal(j)
	must(t, err)
	must(t, os.WriteFile(p, data, 0o600))
}

// A hard link in the folder to a file outside it is never uploaded: the
// scan sees it as not a regular file, the server is unchanged, and the
// outside file is untouched.
func TestAHardLinkIsNotUploaded(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte("top secret"), 0o600))
	must(t, os.Link(secret, filepath.Join(m.dir, "linked.md")))
	versions := e.versions()
	m.Sync(e.ctx)
	equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
	if got := e.versions(); got != versions {
		t.Fatalf("%d versions after the sync, want %d", got, versions)
	}
	if got := e.logs.Records(t, slog.LevelInfo, "this entry is not a regular file or folder"); len(got) != 1 || got[0]["path"] != "/linked.md" ||
		!strings.Contains(got[0]["error"].(string), "hard links") {
		t.Fatalf("log: %v", got)
	}
	m.End(e.ctx, true)
	if b, err := os.ReadFile(secret); err != nil || string(b) != "top secret" {
		t.Fatalf("the outside file now holds %q, %v", b, err)
	}
}

// A live write-through upload is journaled like a sync: an edit the agent
// makes after it, cut off by a crash before any sync, is adopted as an
// edit of the uploaded content and uploaded, not taken for a conflict
// with the session's own upload (which the server would win).
func TestAnEditAfterAWriteThroughSurvivesACrash(t *testing.T) {
	e := newFeedEnv(t)
	root := t.TempDir()
	m := e.mount(root, sessionID("sesn_1"))
	// The follower hears nothing, so no background sync journals the
	// upload on the write-through's behalf.
	release := make(chan struct{})
	defer close(release)
	e.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("wait_ms") != "" {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	m.StartLive(e.ctx)
	writeFile(t, m.dir, "todo.md", "v1")
	m.Wrote(filepath.Join(m.dir, "todo.md"))
	eventually(t, "the written file reaches the server", func() bool { return e.server()["/todo.md"] == "v1" })
	writeFile(t, m.dir, "todo.md", "v2, then the crash")
	m.Crash()

	a := e.session(root, sessionID("sesn_1"))
	must(t, a.Mount(e.ctx))
	equal(t, "server", e.server(), map[string]string{"/todo.md": "v2, then the crash"})
	a.End(e.ctx, true)
	assertNothingLeft(t, root)
}

// An adopted folder follows the change feed like a fresh one, so live
// mode's write-through uploads work after a crash as before it.
func TestAnAdoptedFolderUploadsWritesAtOnce(t *testing.T) {
	e := newFeedEnv(t)
	root := t.TempDir()
	crashedMount(t, e, root)

	m := e.session(root, sessionID("sesn_1"))
	must(t, m.Mount(e.ctx))
	m.StartLive(e.ctx)
	writeFile(t, m.dir, "after.md", "written after the adoption")
	m.Wrote(filepath.Join(m.dir, "after.md"))
	eventually(t, "the written file reaches the server", func() bool { return e.server()["/after.md"] == "written after the adoption" })
	m.End(e.ctx, true)
	assertNothingLeft(t, root)
}

// The journal carries the change-feed sequence and the listing it is exact
// at, so an adopted folder resumes following the feed where the crashed
// worker was: its first sync reads one feed request, never a listing or a
// snapshot, and still uploads the agent's edits and brings the server's
// changes (a new memory, an update, a deletion).
func TestAnAdoptedFolderResumesTheFeedWithOneRequest(t *testing.T) {
	e := newFeedEnv(t)
	root := t.TempDir()
	e.put("/server-edit.md", "before")
	e.put("/server-gone.md", "deleted on the server meanwhile")
	crashedMount(t, e, root)
	e.put("/remote.md", "created on the server meanwhile")
	e.put("/server-edit.md", "changed on the server meanwhile")
	e.remove("/server-gone.md")

	m := e.session(root, sessionID("sesn_1"))
	must(t, m.Mount(e.ctx))
	var feed []string
	for _, r := range m.rec.take() {
		method, path, _ := strings.Cut(r, " ")
		switch {
		case strings.HasSuffix(path, "/changes"):
			feed = append(feed, r)
		case strings.HasSuffix(path, "/snapshot"), method == "GET" && strings.HasSuffix(path, "/memories"):
			t.Errorf("the adopted mount sent %s; want only the change feed", r)
		}
	}
	if len(feed) != 1 {
		t.Fatalf("the adopted mount read the feed %d times (%v), want once", len(feed), feed)
	}
	equal(t, "server", e.server(), map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/gone.md": "deleted by the agent", "/remote.md": "created on the server meanwhile",
		"/server-edit.md": "changed on the server meanwhile",
	})
	equal(t, "folder", folder(t, m.dir), map[string]string{
		"/keep.md": "kept as is", "/edit.md": "the agent's edit", "/new/note.md": "written just before the kill",
		"/remote.md": "created on the server meanwhile", "/server-edit.md": "changed on the server meanwhile",
	})
	m.End(e.ctx, true)
	assertNothingLeft(t, root)
}

// A leftover folder that cannot be adopted after all (here its filesystem
// cannot be probed) is left as found with its journal, for the next claim:
// it may hold the only copy of the agent's last edits. Both kinds of
// leftover: the same session's, and an ended session's.
func TestALeftoverWhoseAdoptionFailsIsKept(t *testing.T) {
	e := newEnv(t)
	probeFails := func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
		c.ProbeCase = func(*confined.Root) (bool, error) { return false, errors.New("probe refused by the test") }
	}
	for _, sess := range []string{"sesn_1", "sesn_2"} {
		t.Run(sess, func(t *testing.T) {
			root := t.TempDir()
			crashedMount(t, e, root)
			dir := filepath.Join(root, "notes")
			before := folder(t, dir)
			delete(before, "/new/"+confined.TempPrefix+"0001") // cleaned up first, by design
			versions := e.versions()

			m := e.session(root, sessionID(sess), probeFails)
			if err := m.Mount(e.ctx); err == nil || !strings.Contains(err.Error(), "cannot be probed") {
				t.Fatalf("Mount = %v, want the probe's failure", err)
			}
			m.End(e.ctx, true)
			equal(t, "the leftover folder", folder(t, dir), before)
			if got := e.versions(); got != versions {
				t.Fatalf("the failed adoption changed the server: %d versions, want %d", got, versions)
			}
			// The next claim adopts it and the edits reach the server.
			again := e.session(root, sessionID("sesn_1"))
			must(t, again.Mount(e.ctx))
			if got := e.server()["/new/note.md"]; got != "written just before the kill" {
				t.Fatalf("the edit made before the crash is %q on the server", got)
			}
			again.End(e.ctx, true)
			assertNothingLeft(t, root)
		})
	}
}

// faultAt calls at when the session reaches the fault point point.
func faultAt(point string, at func()) mountOption {
	return func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
		c.FaultPoint = func(p string) {
			if p == point {
				at()
			}
		}
	}
}

// killedAt copies what a worker killed at this moment leaves on disk — the
// store's folder and its state folder under root — into a new mount root,
// and points the journal there: the folder a restarted worker finds. It
// runs on the worker's goroutines (from a fault point), where other
// writes may still be landing: a file gone before it is copied was not
// there at the kill.
func killedAt(t *testing.T, root string) (newRoot string) {
	t.Helper()
	newRoot = t.TempDir()
	for _, name := range []string{"notes", filepath.Base(memsync.StateDir(filepath.Join(root, "notes")))} {
		src, dst := filepath.Join(root, name), filepath.Join(newRoot, name)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o700)
			}
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
		})
		if err != nil {
			t.Errorf("copying what the kill left: %v", err)
		}
	}
	p := filepath.Join(memsync.StateDir(filepath.Join(newRoot, "notes")), "journal.json")
	var j map[string]any
	data, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(data, &j)
	}
	if err == nil {
		j["folder"] = filepath.Join(newRoot, "notes")
		data, err = json.Marshal(j)
	}
	if err == nil {
		err = os.WriteFile(p, data, 0o600)
	}
	if err != nil {
		t.Errorf("pointing the journal at the copy: %v", err)
	}
	return newRoot
}

// A worker killed right after it removed a file whose memory the server
// deleted, before its journal says so, leaves a journal that still holds
// the file. If the memory comes back meanwhile with the same content (a
// person restores it), the next worker must not take the missing file for
// the agent's deletion and delete the restored memory: the removal was
// journaled as started, so the file's absence is the worker's own doing.
func TestAMemoryRestoredAfterAKillMidRemovalIsNotDeleted(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	e.put("/gone.md", "deleted on the server, then restored")
	e.put("/keep.md", "kept")
	var crashed string
	m := e.mount(root, sessionID("sesn_1"), faultAt("sync.removed", func() { crashed = killedAt(t, root) }))
	e.remove("/gone.md")
	m.Sync(e.ctx)
	m.Crash()
	if crashed == "" {
		t.Fatal("the sync never removed the file")
	}
	equal(t, "the folder at the kill", folder(t, filepath.Join(crashed, "notes")), map[string]string{"/keep.md": "kept"})
	e.put("/gone.md", "deleted on the server, then restored")

	again := e.session(crashed, sessionID("sesn_1"))
	must(t, again.Mount(e.ctx))
	again.End(e.ctx, true)
	equal(t, "server", e.server(), map[string]string{"/gone.md": "deleted on the server, then restored", "/keep.md": "kept"})
	assertNothingLeft(t, crashed)
}

// journaledPaths returns the paths the journal beside dir holds as in step
// with the server.
func journaledPaths(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(memsync.StateDir(dir), "journal.json"))
	must(t, err)
	var j struct{ State memsync.State }
	must(t, json.Unmarshal(data, &j))
	var out []string
	for p, ps := range j.State {
		if ps.Base != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// The folder's own writes are not fsynced one by one, but the journal is:
// so that a machine crash can never leave a trusted journal naming a file
// the disk lost (adoption would take it for the agent's deletion), the
// files a sync placed are flushed to disk before the journal that names
// them is written. The mount's journal alone goes without that flush, so
// the agent starts sooner; it names the boot it was written in instead,
// and the first sync, even one with nothing to do, flushes and drops the
// mark.
func TestTheJournalNamesOnlyFilesFlushedBefore(t *testing.T) {
	e := newEnv(t)
	e.put("/mounted.md", "downloaded at the mount")
	root := t.TempDir()
	dir := filepath.Join(root, "notes")
	var flushed []string
	m := e.mount(root, sessionID("sesn_1"), func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
		c.FaultPoint = func(p string) {
			if strings.HasSuffix(p, ".flushed") {
				flushed = append(flushed, fmt.Sprintf("%s %v", p, journaledPaths(t, dir)))
			}
		}
	})
	if got := journaledPaths(t, dir); !slices.Equal(got, []string{"/mounted.md"}) {
		t.Fatalf("journal after the mount holds %v", got)
	}
	if got, want := journalBoot(t, dir), memsync.BootID(); want == "" || got != want {
		t.Fatalf("the mount's journal is marked with boot %q, want this boot's %q", got, want)
	}
	// A marked journal has a version of its own, which workers that
	// predate the mark refuse rather than trust.
	if v := journalField(t, dir, "version"); v != 2.0 {
		t.Fatalf("the marked journal has version %v, want 2", v)
	}
	m.Sync(e.ctx) // nothing to do, but the mount's files are flushed
	if got := journalBoot(t, dir); got != "" {
		t.Fatalf("the journal still carries the boot %q after a sync flushed", got)
	}
	if v := journalField(t, dir, "version"); v != 1.0 {
		t.Fatalf("the flushed journal has version %v, want 1", v)
	}
	e.put("/synced.md", "downloaded by a sync")
	m.Sync(e.ctx)
	if got := journaledPaths(t, dir); !slices.Equal(got, []string{"/mounted.md", "/synced.md"}) {
		t.Fatalf("journal after the sync holds %v", got)
	}
	m.Sync(e.ctx) // nothing placed: no flush
	want := []string{"sync.flushed [/mounted.md]", "sync.flushed [/mounted.md]"}
	if !slices.Equal(flushed, want) {
		t.Fatalf("flushes (with what the journal held then) = %q, want %q", flushed, want)
	}
	m.End(e.ctx, true)
}

// journalBoot is the boot the journal of the folder dir was written
// without a flush in ("" when it was flushed).
func journalBoot(t *testing.T, dir string) string {
	t.Helper()
	boot, _ := journalField(t, dir, "unflushed_boot").(string)
	return boot
}

// journalField is one top-level field of the folder dir's journal.
func journalField(t *testing.T, dir, name string) any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(memsync.StateDir(dir), "journal.json"))
	must(t, err)
	var j map[string]any
	must(t, json.Unmarshal(data, &j))
	return j[name]
}

// A mount's unflushed journal found after the machine restarted is not
// trusted: its files may be lost or cut short, so the folder is mounted
// afresh from the server (and listed as holding no edits), where the same
// journal found by a worker of the same boot — a kill, not a restart — is
// adopted (TestAStoresPhaseFollowsItsFolder).
func TestAnUnflushedMountFromAnotherBootIsMountedAfresh(t *testing.T) {
	e := newEnv(t)
	e.put("/mounted.md", "downloaded at the mount")
	root := t.TempDir()
	m := e.mount(root, sessionID("sesn_1"))
	writeFile(t, m.dir, "mounted.md", "cut short by the restart")
	m.Crash()
	journal := filepath.Join(memsync.StateDir(m.dir), "journal.json")
	data, err := os.ReadFile(journal)
	must(t, err)
	var j map[string]any
	must(t, json.Unmarshal(data, &j))
	j["unflushed_boot"] = "an-earlier-boot"
	data, err = json.Marshal(j)
	must(t, err)
	must(t, os.WriteFile(journal, data, 0o600))

	found, err := memsync.FindLeftovers(root)
	must(t, err)
	if len(found) != 1 || len(found[0].Edits) != 0 || found[0].Problem != "" {
		t.Fatalf("leftovers = %+v, want one folder with no edits", found)
	}
	again := e.session(root, sessionID("sesn_1"))
	must(t, again.Mount(e.ctx))
	if got := e.logs.Records(t, slog.LevelInfo, "the machine may have lost when it restarted"); len(got) != 1 {
		t.Fatalf("logged %d lines saying the folder was mounted afresh after a restart, want 1", len(got))
	}
	equal(t, "folder", folder(t, again.dir), map[string]string{"/mounted.md": "downloaded at the mount"})
	equal(t, "server", e.server(), map[string]string{"/mounted.md": "downloaded at the mount"})
	again.End(e.ctx, true)
}

// A store's phase follows what its folder holds: mounted after a fresh
// mount, adopted when a re-claimed session takes over its crash's folder,
// unmounted again once End removed it.
func TestAStoresPhaseFollowsItsFolder(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	m := e.session(root, sessionID("sesn_1"))
	wantPhases(t, "phases before Mount", m.Phases(), "unmounted")
	must(t, m.Mount(e.ctx))
	wantPhases(t, "phases after Mount", m.Phases(), "mounted")
	writeFile(t, m.dir, "note.md", "written before the kill")
	m.Crash()

	again := e.session(root, sessionID("sesn_1"))
	must(t, again.Mount(e.ctx))
	wantPhases(t, "phases after adopting", again.Phases(), "adopted")
	again.End(e.ctx, true)
	wantPhases(t, "phases after End", again.Phases(), "unmounted")
	if _, err := os.Lstat(again.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the folder is still there after End: %v", err)
	}
	equal(t, "server", e.server(), map[string]string{"/note.md": "written before the kill"})
}

func wantPhases(t *testing.T, when string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", when, got, want)
	}
}

// A killed worker's folder is listed with the files only it holds; a
// folder a running session serves is listed as held; FindLeftovers
// changes nothing.
func TestFindLeftoversListsTheEditsAKillLeft(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	crashed := crashedMount(t, e, root)
	must(t, os.Mkdir(filepath.Join(root, "sesn_2"), 0o700))
	live := e.mount(filepath.Join(root, "sesn_2"), sessionID("sesn_2"))
	defer live.End(e.ctx, false)
	before := folder(t, crashed.dir)

	got, err := memsync.FindLeftovers(root)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("found %d leftovers, want the crashed folder and the served one: %+v", len(got), got)
	}
	byDir := map[string]memsync.Leftover{}
	for _, l := range got {
		byDir[l.Dir] = l
	}
	c := byDir[crashed.dir]
	if c.Held || c.SessionID != "sesn_1" || c.MemoryStoreID != e.storeID || c.Problem != "" ||
		!slices.Equal(c.Edits, []string{"/edit.md", "/new/note.md"}) {
		t.Fatalf("the crashed folder: %+v", c)
	}
	if l := byDir[live.dir]; !l.Held || l.SessionID != "sesn_2" || len(l.Edits) != 0 {
		t.Fatalf("the served folder: %+v", l)
	}
	equal(t, "the crashed folder after the look", folder(t, crashed.dir), before)
}

// A worker killed as a mount began (its folder and marker made, no journal
// written yet) leaves a folder with nothing in it but the marker: the next
// Mount takes it for what it is and mounts the store afresh, where before
// it refused it and the session could never start on that host again.
func TestAMountKilledBeforeItsFirstJournalIsMountedAfresh(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	root := t.TempDir()
	first := e.mount(root, sessionID("sesn_1"))
	first.Crash()
	// What the first steps of a mount leave: the marker, a temporary file
	// of a write cut short, the state folder with its lock, no journal.
	for p := range folder(t, first.dir) {
		if p != "/"+memsync.MarkerName {
			must(t, os.Remove(filepath.Join(first.dir, p)))
		}
	}
	writeFile(t, first.dir, ".memstore-tmp-0123456789abcdef", "half")
	must(t, os.Remove(filepath.Join(memsync.StateDir(first.dir), "journal.json")))

	m := e.session(root, sessionID("sesn_1"))
	if err := m.Mount(e.ctx); err != nil {
		t.Fatalf("Mount = %v, want the begun mount's folder replaced", err)
	}
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "a"})
	m.End(e.ctx, true)
	assertNothingLeft(t, root)
}

// A mount writes its downloads straight to their names (no temporary file
// and rename) once its journal says it is in progress, so a worker killed
// mid-download leaves files cut short at memories' names, beside complete
// ones the journal does not name. The next worker must remove them all
// with the folder and mount afresh: taken for the agent's, a partial file
// would be uploaded over the memory, and a downloaded file whose memory
// was deleted meanwhile would bring it back.
func TestAMountKilledMidDownloadIsMountedAfresh(t *testing.T) {
	for name, newEnv := range map[string]func(testing.TB) *env{"snapshot": newFeedEnv, "listing": newEnv} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			contents := map[string]string{"/a.md": "alpha content", "/b/c.md": "nested content", "/gone.md": "deleted meanwhile"}
			for p, c := range contents {
				e.put(p, c)
			}
			root := t.TempDir()
			// The downloads run in parallel, each passing the point: the
			// first one to reach it takes the picture.
			var (
				kill    sync.Once
				crashed string
			)
			first := e.session(root, sessionID("sesn_1"), func(c *memsync.SessionConfig, _ *memsync.StoreMount) {
				c.FaultPoint = func(p string) {
					if p == "mount.downloaded" {
						kill.Do(func() { crashed = killedAt(t, root) })
					}
				}
			})
			must(t, first.Mount(e.ctx))
			first.Crash()
			if crashed == "" {
				t.Fatal("the mount never reached mount.downloaded")
			}
			dir := filepath.Join(crashed, "notes")
			// The other downloads were in flight: each is cut short at
			// its name.
			have := folder(t, dir)
			for p, c := range contents {
				if have[p] != c {
					writeFile(t, dir, p[1:], c[:5])
				}
			}
			e.remove("/gone.md")
			want := map[string]string{"/a.md": "alpha content", "/b/c.md": "nested content"}

			m := e.session(crashed, sessionID("sesn_1"))
			if err := m.Mount(e.ctx); err != nil {
				t.Fatalf("Mount = %v, want the cut-short mount's folder replaced\n%s", err, e.logs)
			}
			equal(t, "folder", folder(t, m.dir), want)
			equal(t, "server", e.server(), want)
			m.End(e.ctx, true)
			equal(t, "server after the end", e.server(), want)
			assertNothingLeft(t, crashed)
		})
	}
}

// A mount's unflushed journal adopted in the same boot (a kill) is trusted,
// and the adopting sync flushes and drops the mark even with nothing to
// sync, so a restart after that cannot take the folder back.
func TestAnAdoptedUnflushedJournalIsFlushedByTheAdoption(t *testing.T) {
	e := newEnv(t)
	e.put("/mounted.md", "downloaded at the mount")
	root := t.TempDir()
	m := e.mount(root, sessionID("sesn_1"))
	m.Crash()
	if journalBoot(t, m.dir) == "" {
		t.Fatal("the mount's journal carries no boot")
	}
	again := e.session(root, sessionID("sesn_1"))
	must(t, again.Mount(e.ctx))
	wantPhases(t, "phases after adopting", again.Phases(), "adopted")
	if got := journalBoot(t, again.dir); got != "" {
		t.Fatalf("the adopted folder's journal still carries the boot %q", got)
	}
	again.End(e.ctx, true)
}

// The mount's boot mark does not wait for the server: a sync that cannot
// reach it still drops the mark, and live mode drops it as it starts,
// before any sync. Kept while the server was away, the mark would make a
// restart take an hour of the agent's edits for a mount's cut-short
// downloads and remove them.
func TestTheMarkIsDroppedWithoutTheServer(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(fmt.Sprintf("live=%v", live), func(t *testing.T) {
			e := newFeedEnv(t)
			e.put("/mounted.md", "downloaded at the mount")
			var away atomic.Bool // set: the server answers 503
			e.srv.Wrap(func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if away.Load() {
						http.Error(w, "away", http.StatusServiceUnavailable)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			m := e.mount(t.TempDir(), sessionID("sesn_1"))
			if journalBoot(t, m.dir) == "" {
				t.Fatal("the mount's journal carries no boot")
			}
			away.Store(true)
			writeFile(t, m.dir, "mounted.md", "the agent's edit")
			if live {
				m.StartLive(e.ctx)
				eventually(t, "live mode to drop the mark", func() bool { return journalBoot(t, m.dir) == "" })
			} else {
				m.Sync(e.ctx)
				if got := journalBoot(t, m.dir); got != "" {
					t.Fatalf("a sync without the server left the mark %q", got)
				}
			}
			away.Store(false)
			m.End(e.ctx, true)
			equal(t, "server", e.server(), map[string]string{"/mounted.md": "the agent's edit"})
		})
	}
}
