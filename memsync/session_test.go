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
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/memsync"
)

func TestMountDownloadsEverything(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "alpha")
	e.put("/docs/deep/b.md", "beta ✓")
	e.put("/empty", "")
	m := e.mount(t.TempDir())
	equal(t, "folder", folder(t, m.dir), e.server())

	st, err := os.Stat(m.dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("store folder mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	for _, rel := range []string{"a.md", "docs/deep/b.md", memsync.MarkerName} {
		if fi, err := os.Stat(filepath.Join(m.dir, rel)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v (%v), want 0600", rel, fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(m.dir, "docs/deep")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("docs/deep mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	marker, err := os.ReadFile(filepath.Join(m.dir, memsync.MarkerName))
	if err != nil || string(marker) != "version 1\n"+e.storeID {
		t.Fatalf("marker = %q, %v", marker, err)
	}
}

func TestMountPagesThroughLargeStores(t *testing.T) {
	e := newEnv(t)
	want := map[string]string{}
	for i := range 45 {
		p := fmt.Sprintf("/m/%d/n%02d.md", i%4, i)
		want[p] = p
		e.put(p, p)
	}
	m := e.session(t.TempDir())
	if err := m.Mount(e.ctx); err != nil {
		t.Fatal(err)
	}
	equal(t, "folder", folder(t, m.dir), want)
	// Against the hosted API's shape: the snapshot is refused (404), and
	// 45 memories are three pages of the full listing, and nothing else.
	reqs := m.rec.take()
	if len(reqs) != 4 || !strings.HasSuffix(reqs[0], "/snapshot") || len(writes(reqs)) != 0 {
		t.Fatalf("mount sent %v, want the refused snapshot and three listing pages", reqs)
	}
}

func TestTwoMountsSeeEachOthersEdits(t *testing.T) {
	e := newEnv(t)
	e.put("/shared.md", "v1")
	e.put("/gone.md", "bye")
	a := e.mount(t.TempDir())
	b := e.mount(t.TempDir())
	if a.dir == b.dir {
		t.Fatal("the two mounts share a folder")
	}

	writeFile(t, a.dir, "shared.md", "v2 from a")
	writeFile(t, a.dir, "new/from-a.md", "hello from a")
	a.Sync(e.ctx)
	b.Sync(e.ctx)
	equal(t, "b's folder", folder(t, b.dir), map[string]string{"/shared.md": "v2 from a", "/gone.md": "bye", "/new/from-a.md": "hello from a"})

	writeFile(t, b.dir, "shared.md", "v3 from b")
	removeFile(t, b.dir, "gone.md")
	b.Sync(e.ctx)
	e.clock.Advance(memsync.DefaultCorroborationWindow)
	b.Sync(e.ctx)
	a.Sync(e.ctx)
	want := map[string]string{"/shared.md": "v3 from b", "/new/from-a.md": "hello from a"}
	equal(t, "a's folder", folder(t, a.dir), want)
	equal(t, "b's folder", folder(t, b.dir), want)
	equal(t, "server", e.server(), want)
	if _, err := os.Stat(filepath.Join(a.dir, "gone.md")); !os.IsNotExist(err) {
		t.Fatalf("gone.md is still in a's folder: %v", err)
	}
	if w := e.logs.Records(t, slog.LevelWarn, ""); len(w) != 0 {
		t.Fatalf("edits taking turns logged warnings: %v", w)
	}
}

func TestConflictKeepsTheServerVersionAndWarns(t *testing.T) {
	e := newEnv(t)
	e.put("/plan.md", "base")
	var mu sync.Mutex
	var reps []memsync.SyncReport
	m := e.mount(t.TempDir(), reports(&mu, &reps))
	before := e.versions()

	writeFile(t, m.dir, "plan.md", "the agent's edit")
	e.put("/plan.md", "a human's edit")
	m.Sync(e.ctx)

	// Each step reports what it moved; the sync counts the conflict.
	mu.Lock()
	got := slices.Clone(reps)
	mu.Unlock()
	for i := range got {
		got[i].Duration = 0
	}
	want := []memsync.SyncReport{
		{MemoryStoreID: e.storeID, Step: "mount", Changes: 1, BytesDownloaded: int64(len("base"))},
		{MemoryStoreID: e.storeID, Step: "sync", Changes: 1, Conflicts: 1, BytesDownloaded: int64(len("a human's edit"))},
	}
	if !slices.Equal(got, want) {
		t.Errorf("sync reports = %+v, want %+v", got, want)
	}

	equal(t, "folder", folder(t, m.dir), map[string]string{"/plan.md": "a human's edit"})
	equal(t, "server", e.server(), map[string]string{"/plan.md": "a human's edit"})
	if got := e.versions(); got != before+1 {
		t.Fatalf("%d versions after the conflict, want %d (only the human's)", got, before+1)
	}
	warns := e.logs.Records(t, slog.LevelWarn, "server version wins")
	if len(warns) != 1 {
		t.Fatalf("conflict warnings: %v\nlog:\n%s", warns, e.logs)
	}
	w := warns[0]
	for k, v := range map[string]string{"memory_store_id": e.storeID, "path": "/plan.md", "folder": m.dir, "mount_path": "/mnt/memory/notes"} {
		if w[k] != v {
			t.Errorf("conflict warning %s = %v, want %q", k, w[k], v)
		}
	}
	// The agent's losing edit is kept where the log says.
	equal(t, "kept copies", keptCopies(t, m.dir), map[string]string{"/plan.md": "the agent's edit"})
	kept := e.logs.Records(t, slog.LevelWarn, "the agent's losing edit is kept at kept_copy")
	if len(kept) != 1 || kept[0]["path"] != "/plan.md" {
		t.Fatalf("kept-copy log: %v", kept)
	}
	if b, err := os.ReadFile(kept[0]["kept_copy"].(string)); err != nil || string(b) != "the agent's edit" {
		t.Fatalf("the logged kept copy holds %q, %v", b, err)
	}
	// The next sync has nothing to do.
	m.Sync(e.ctx)
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("sync after the conflict wrote %v", w)
	}
}

func TestSymlinksAreNeverFollowedOrUploaded(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "alpha")
	e.put("/docs/readme.md", "read me")
	m := e.mount(t.TempDir())
	outside := t.TempDir()
	writeFile(t, outside, "secret", "SECRET")
	writeFile(t, outside, "inner/also-secret", "SECRET 2")

	// A link to a file outside, a link to a folder outside, and a memory's
	// folder replaced by a link.
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(m.dir, "link.md")))
	must(t, os.Symlink(outside, filepath.Join(m.dir, "linkdir")))
	must(t, os.RemoveAll(filepath.Join(m.dir, "docs")))
	must(t, os.Symlink(outside, filepath.Join(m.dir, "docs")))
	// The server changes the memory whose folder is now a link: the
	// download must not write through it.
	e.put("/docs/readme.md", "read me, v2")

	for range 3 {
		m.Sync(e.ctx)
		e.clock.Advance(memsync.DefaultCorroborationWindow + time.Second)
	}
	equal(t, "server", e.server(), map[string]string{"/a.md": "alpha", "/docs/readme.md": "read me, v2"})
	equal(t, "outside", folder(t, outside), map[string]string{"/secret": "SECRET", "/inner/also-secret": "SECRET 2"})
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("the sync sent %v with symlinks in the folder", w)
	}
	if w := e.logs.Records(t, slog.LevelWarn, "memories at or under it are not synced"); len(w) != 1 || w[0]["path"] != "/docs" {
		t.Fatalf("want one warning about /docs hiding a memory, got %v\nlog:\n%s", w, e.logs)
	}
	// The links are left in place, untouched.
	for _, name := range []string{"link.md", "linkdir", "docs"} {
		if fi, err := os.Lstat(filepath.Join(m.dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: %v %v, want the planted symlink", name, fi, err)
		}
	}
}

func TestLocalDeleteReachesTheServerOnlyAfterTheWindow(t *testing.T) {
	e := newEnv(t)
	e.put("/keep.md", "keep")
	e.put("/drop.md", "drop")
	m := e.mount(t.TempDir())
	removeFile(t, m.dir, "drop.md")

	m.Sync(e.ctx) // the clock of the window starts
	e.clock.Advance(memsync.DefaultCorroborationWindow - time.Second)
	m.Sync(e.ctx)
	if _, ok := e.server()["/drop.md"]; !ok {
		t.Fatal("the memory was deleted before its file had stayed gone for the window")
	}
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("syncs inside the window sent %v", w)
	}
	e.clock.Advance(time.Second)
	m.Sync(e.ctx)
	equal(t, "server", e.server(), map[string]string{"/keep.md": "keep"})
	if w := writes(m.rec.take()); len(w) != 1 || !strings.HasPrefix(w[0], "DELETE ") {
		t.Fatalf("the corroborated delete sent %v, want one DELETE", w)
	}
	if r := e.logs.Records(t, slog.LevelInfo, "deleted the memory on the server"); len(r) != 1 || r[0]["path"] != "/drop.md" {
		t.Fatalf("delete log: %v", r)
	}
}

func TestAFileBackWithinTheWindowCancelsTheDelete(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	e.put("/b.md", "b")
	m := e.mount(t.TempDir())
	removeFile(t, m.dir, "a.md")
	m.Sync(e.ctx)
	writeFile(t, m.dir, "a.md", "a") // an editor's save-by-rename
	e.clock.Advance(time.Minute)
	m.Sync(e.ctx)
	removeFile(t, m.dir, "a.md")
	m.Sync(e.ctx) // a new window starts here
	e.clock.Advance(memsync.DefaultCorroborationWindow / 2)
	m.Sync(e.ctx)
	equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/b.md": "b"})
}

func TestLostUploadResponsesCreateNoDuplicateAndNoConflict(t *testing.T) {
	e := newEnv(t)
	e.put("/old.md", "v1")
	m := e.mount(t.TempDir())
	before := e.versions()

	// Every upload reaches the server, which commits it, and then the
	// connection drops before the response arrives. The client resends
	// the update (it has a precondition, so that is safe) and is cut
	// again; it never resends a create.
	m.rec.cut = func(r *http.Request) bool { return r.Method == http.MethodPost }
	writeFile(t, m.dir, "new.md", "created")
	writeFile(t, m.dir, "old.md", "v2")
	m.Sync(e.ctx)
	if sent := writes(m.rec.take()); len(sent) != 1+1+instant.MaxRetries {
		t.Fatalf("uploads sent: %v, want one create and the update with its retries", sent)
	}
	m.rec.cut = nil
	equal(t, "server", e.server(), map[string]string{"/old.md": "v2", "/new.md": "created"})
	if w := e.logs.Records(t, slog.LevelWarn, "got no answer"); len(w) != 2 {
		t.Fatalf("warnings about the cut uploads: %v", w)
	}
	warned := len(e.logs.Records(t, slog.LevelWarn, ""))

	// The agent edits both files again before the next sync. That sync's
	// listing shows the lost uploads landed: it must read them as its own
	// (not as another writer's change that conflicts with the new edits)
	// and upload the new edits as updates, not as duplicate creates.
	writeFile(t, m.dir, "new.md", "created, then edited")
	writeFile(t, m.dir, "old.md", "v3")
	e.clock.Advance(time.Minute)
	m.Sync(e.ctx)
	want := map[string]string{"/old.md": "v3", "/new.md": "created, then edited"}
	equal(t, "server", e.server(), want)
	equal(t, "folder", folder(t, m.dir), want)
	if w := e.logs.Records(t, slog.LevelWarn, ""); len(w) != warned {
		t.Fatalf("warnings after the lost responses were settled: %v", w[warned:])
	}
	if got := e.versions(); got != before+4 {
		t.Fatalf("%d versions, want %d: two updates of /old.md, a create and an update of /new.md", got, before+4)
	}
	m.rec.take()
	m.Sync(e.ctx)
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("a sync after settling sent %v", w)
	}
}

func TestWipedFolderIsRebuiltWithoutRemoteDeletes(t *testing.T) {
	for _, how := range []string{"files deleted", "folder deleted"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			want := map[string]string{"/a.md": "a", "/b/c.md": "c", "/d.md": "d"}
			for p, c := range want {
				e.put(p, c)
			}
			m := e.mount(t.TempDir())
			before := e.versions()
			if how == "files deleted" {
				for _, rel := range []string{"a.md", "b", "d.md"} {
					must(t, os.RemoveAll(filepath.Join(m.dir, rel)))
				}
			} else {
				must(t, os.RemoveAll(m.dir))
			}
			m.Sync(e.ctx)
			equal(t, "folder", folder(t, m.dir), want)
			for range 2 {
				e.clock.Advance(memsync.DefaultCorroborationWindow + time.Second)
				m.Sync(e.ctx)
			}
			equal(t, "server", e.server(), want)
			if got := e.versions(); got != before {
				t.Fatalf("%d versions after the rebuild, want %d", got, before)
			}
			if w := writes(m.rec.take()); len(w) != 0 {
				t.Fatalf("the rebuild sent %v", w)
			}
			if w := e.logs.Records(t, slog.LevelWarn, "rebuilding the folder"); len(w) != 1 {
				t.Fatalf("rebuild warnings: %v", w)
			}
			// The rebuilt folder is trusted again: a later edit goes up.
			writeFile(t, m.dir, "a.md", "a2")
			m.Sync(e.ctx)
			if got := e.server()["/a.md"]; got != "a2" {
				t.Fatalf("edit after the rebuild: server has %q", got)
			}
		})
	}
}

func TestReadOnlyStorePullsButNeverPushes(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	e.put("/b.md", "b")
	e.put("/c.md", "c")
	m := e.mount(t.TempDir(), readOnly)

	writeFile(t, m.dir, "a.md", "local edit")
	writeFile(t, m.dir, "new.md", "local file")
	removeFile(t, m.dir, "b.md")
	e.put("/c.md", "c2")
	for range 3 {
		m.Sync(e.ctx)
		e.clock.Advance(time.Minute)
	}
	equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/b.md": "b", "/c.md": "c2"})
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "local edit", "/new.md": "local file", "/c.md": "c2"})

	// The memory's next change overwrites the local edit.
	e.put("/a.md", "a2")
	m.Sync(e.ctx)
	if got := folder(t, m.dir)["/a.md"]; got != "a2" {
		t.Fatalf("a.md = %q after a server change, want a2", got)
	}
	m.End(e.ctx, true)
	equal(t, "server", e.server(), map[string]string{"/a.md": "a2", "/b.md": "b", "/c.md": "c2"})
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("a read-only store sent %v", w)
	}
}

// An idle sync — nothing changed on either side — moves no memory content
// and rewrites nothing: it sends one basic listing per 100 memories, whose
// answers carry no content, and its scan reads no file, every digest coming
// from the stat-keyed hash cache.
func TestIdleSyncIsOneListingPerPageAndNoWrites(t *testing.T) {
	e := newEnv(t)
	fill(t, e, 101)
	m := e.mount(t.TempDir())
	m.SkipRacyWindow()
	stamp := func() map[string]time.Time {
		out := map[string]time.Time{}
		must(t, filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				out[p] = fi.ModTime()
			}
			return err
		}))
		return out
	}
	// The first sync hashes every file once: the cache starts empty.
	m.Sync(e.ctx)
	if got := m.FilesHashed(); got != 101 {
		t.Fatalf("the first sync hashed %d files, want the 101 downloaded", got)
	}
	m.rec.take()
	mtimes := stamp()
	listed := 0
	m.rec.answered = func(r *http.Request, body []byte) {
		var page struct {
			Data []map[string]any `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Errorf("%s %s answered %q: %v", r.Method, r.URL, body, err)
			return
		}
		for _, item := range page.Data {
			listed++
			if c, ok := item["content"]; ok && c != nil {
				t.Errorf("an idle sync's listing carried the content of %v", item["path"])
			}
		}
	}
	for range 3 {
		e.clock.Advance(memsync.DefaultInterval)
		m.SyncIfDue(e.ctx)
		reqs := m.rec.take()
		if len(reqs) != 2 {
			t.Fatalf("an idle sync of 101 memories sent %d requests, want 2 (listing pages of 100): %v", len(reqs), reqs)
		}
		for _, r := range reqs {
			if r != "GET /v1/memory_stores/"+e.storeID+"/memories" {
				t.Fatalf("an idle sync sent %s", r)
			}
		}
		if got := m.FilesHashed(); got != 101 {
			t.Fatalf("an idle sync read %d files, want none", got-101)
		}
	}
	m.rec.answered = nil
	if listed != 3*101 {
		t.Fatalf("the idle syncs' listings held %d memories, want %d", listed, 3*101)
	}
	if after := stamp(); len(after) != len(mtimes) {
		t.Fatal("the idle syncs changed the folder")
	} else {
		for k, v := range mtimes {
			if !after[k].Equal(v) {
				t.Fatalf("the idle syncs rewrote %s", k)
			}
		}
	}
	// An edit is read, and only that file.
	writeFile(t, m.dir, "topic-3/note-0003.md", "edited")
	m.Sync(e.ctx)
	if got := m.FilesHashed(); got != 102 {
		t.Fatalf("a sync after one edit read %d files, want 1", got-101)
	}
	if got := e.server()["/topic-3/note-0003.md"]; got != "edited" {
		t.Fatalf("the edit did not reach the server: %q", got)
	}
}

// SyncIfDue syncs once the interval has passed since the last sync (or the
// mount): 15 s unless configured — SPEC §5's default, spelled out here
// rather than read from the constant, so that changing it fails a test.
func TestSyncIfDueHonoursTheInterval(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     []mountOption
		interval time.Duration
	}{
		{"default", nil, 15 * time.Second},
		{"configured", []mountOption{interval(time.Minute)}, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.mount(t.TempDir(), c.opts...)
			writeFile(t, m.dir, "a.md", "a")
			e.clock.Advance(c.interval - time.Second)
			m.SyncIfDue(e.ctx)
			if reqs := m.rec.take(); len(reqs) != 0 {
				t.Fatalf("SyncIfDue before the interval sent %v", reqs)
			}
			e.clock.Advance(time.Second)
			m.SyncIfDue(e.ctx)
			equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
			// The interval restarts at the last sync.
			writeFile(t, m.dir, "b.md", "b")
			e.clock.Advance(c.interval - time.Second)
			m.SyncIfDue(e.ctx)
			if _, ok := e.server()["/b.md"]; ok {
				t.Fatal("SyncIfDue synced again before the interval passed")
			}
			e.clock.Advance(time.Second)
			m.SyncIfDue(e.ctx)
			equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/b.md": "b"})
		})
	}
}

func TestNewSessionIntervalRules(t *testing.T) {
	e := newEnv(t)
	base := func(iv time.Duration) memsync.SessionConfig {
		return memsync.SessionConfig{Client: e.admin, Interval: iv, Stores: []memsync.StoreMount{{MemoryStoreID: e.storeID, Dir: filepath.Join(t.TempDir(), "s")}}}
	}
	for _, iv := range []time.Duration{0, 5 * time.Second, time.Minute} {
		s, err := memsync.NewSession(base(iv))
		if err != nil || s.Disabled() {
			t.Fatalf("interval %v: %v, disabled %v", iv, err, s != nil && s.Disabled())
		}
	}
	for _, iv := range []time.Duration{time.Nanosecond, time.Second, memsync.MinInterval - 1} {
		_, err := memsync.NewSession(base(iv))
		if err == nil || !strings.Contains(err.Error(), "minimum is 5s") {
			t.Fatalf("interval %v: err = %v, want the minimum named", iv, err)
		}
	}
	s, err := memsync.NewSession(base(-1))
	if err != nil || !s.Disabled() {
		t.Fatalf("negative interval: %v, disabled %v", err, s.Disabled())
	}
	// A disabled session does nothing at all.
	dir := base(-1).Stores[0].Dir
	if err := s.Mount(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("a disabled session created %s", dir)
	}
	cfg := base(0)
	cfg.Stores = append(cfg.Stores, memsync.StoreMount{MemoryStoreID: "memstore_other", Dir: cfg.Stores[0].Dir})
	if _, err := memsync.NewSession(cfg); err == nil || !strings.Contains(err.Error(), "would both be mounted at") {
		t.Fatalf("two stores in one folder: %v", err)
	}
}

// Each of End's steps gets 30 s unless configured (SPEC §5), spelled out
// here rather than read from the constant.
func TestEndStepsAreBoundedBy30sByDefault(t *testing.T) {
	for cfg, want := range map[time.Duration]time.Duration{0: 30 * time.Second, 2 * time.Second: 2 * time.Second} {
		s, err := memsync.NewSession(memsync.SessionConfig{EndTimeout: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.EndTimeout(); got != want {
			t.Errorf("EndTimeout %v: each End step is bounded by %v, want %v", cfg, got, want)
		}
	}
}

func TestMountRefusals(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	type refusal struct {
		name  string
		setup func(t *testing.T) (root string)
		want  []string
	}
	cases := []refusal{
		{
			name:  "parent missing",
			setup: func(t *testing.T) string { return filepath.Join(t.TempDir(), "no-such-root") },
			want:  []string{"does not exist", "sudo mkdir -p", `chown "$USER"`, "--mount-root"},
		},
		{
			name: "parent is a file",
			setup: func(t *testing.T) string {
				root := filepath.Join(t.TempDir(), "root")
				must(t, os.WriteFile(root, []byte("x"), 0o600))
				return root
			},
			want: []string{"is not a folder", "sudo mkdir -p"},
		},
		{
			name:  "parent not writable",
			setup: unwritableRoot,
			want:  []string{"cannot create folders in", `chown "$USER"`},
		},
		{
			name: "folder already exists",
			setup: func(t *testing.T) string {
				root := t.TempDir()
				writeFile(t, root, "notes/leftover.md", "an earlier session's file")
				return root
			},
			want: []string{"something already exists there", "move it away or remove it"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := c.setup(t)
			m := e.session(root)
			var before map[string]string
			if _, err := os.Stat(m.dir); err == nil {
				before = folder(t, m.dir)
			}
			err := m.Mount(e.ctx)
			if err == nil {
				t.Fatal("Mount succeeded")
			}
			for _, w := range append(c.want, e.storeID, m.dir, "/mnt/memory/notes") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if before != nil {
				equal(t, "the existing folder", folder(t, m.dir), before)
			} else if _, err := os.Lstat(m.dir); !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTDIR) {
				t.Fatalf("a refused mount left %s behind (%v)", m.dir, err)
			}
			if reqs := m.rec.take(); len(reqs) != 0 {
				t.Fatalf("a refused mount sent %v", reqs)
			}
			logged := e.logs.Records(t, slog.LevelError, err.Error())
			if len(logged) != 1 || logged[0]["memory_store_id"] != e.storeID || logged[0]["folder"] != m.dir {
				t.Fatalf("refusal log: %v", logged)
			}
			// End after a refused mount touches nothing.
			if rep := m.End(e.ctx, false); len(rep.Removed)+len(rep.Kept) != 0 {
				t.Fatalf("End after a refused mount: %+v", rep)
			}
			if before != nil {
				equal(t, "the existing folder", folder(t, m.dir), before)
			}
		})
	}
}

// unwritableRoot returns a folder the worker cannot create folders in: a
// read-only bind mount when the test runs as root (root ignores mode bits),
// a folder of mode 0500 otherwise.
func unwritableRoot(t *testing.T) string {
	base := t.TempDir()
	root := filepath.Join(base, "ro")
	must(t, os.Mkdir(root, 0o700))
	if os.Geteuid() != 0 {
		must(t, os.Chmod(root, 0o500))
		t.Cleanup(func() { os.Chmod(root, 0o700) })
		return root
	}
	if err := bindReadOnly(t, root); err != nil {
		t.Skipf("running as root, and a read-only bind mount is not possible here: %v", err)
	}
	return root
}

func TestMountRefusesBeforeCreatingAnything(t *testing.T) {
	// Of two stores, the second's folder exists: the first is not created.
	e := newEnv(t)
	root := t.TempDir()
	writeFile(t, root, "second/x", "x")
	s, err := memsync.NewSession(memsync.SessionConfig{
		Client: e.admin,
		Logger: slog.New(slog.DiscardHandler),
		Stores: []memsync.StoreMount{
			{MemoryStoreID: e.storeID, Dir: filepath.Join(root, "first")},
			{MemoryStoreID: e.storeID, Dir: filepath.Join(root, "second")},
		},
	})
	must(t, err)
	if err := s.Mount(e.ctx); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "second")) {
		t.Fatalf("Mount = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "first")); !os.IsNotExist(err) {
		t.Fatal("the first store's folder was created although the mount was refused")
	}
}

func TestFailedDownloadRemovesWhatMountCreated(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.session(t.TempDir())
	m.rec.cut = func(*http.Request) bool { return true }
	err := m.Mount(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot download its memories") {
		t.Fatalf("Mount = %v", err)
	}
	if _, err := os.Lstat(m.dir); !os.IsNotExist(err) {
		t.Fatal("a failed mount left its folder behind")
	}
}

func TestEndFinalSyncFlushAndDisposal(t *testing.T) {
	t.Run("clean end: final sync without the window, then removal", func(t *testing.T) {
		e := newEnv(t)
		e.put("/a.md", "a")
		e.put("/b.md", "b")
		m := e.mount(t.TempDir())
		writeFile(t, m.dir, "a.md", "a2")
		removeFile(t, m.dir, "b.md")
		e.put("/c.md", "from elsewhere")
		rep := m.End(e.ctx, true)
		equal(t, "server", e.server(), map[string]string{"/a.md": "a2", "/c.md": "from elsewhere"})
		if !rep.FinalSync.Ran || rep.FinalSync.Changes != 3 || !rep.Flush.Ran || rep.Flush.Changes != 0 {
			t.Fatalf("report %+v", rep)
		}
		if len(rep.Removed) != 1 || rep.Removed[0] != m.dir || len(rep.Kept) != 0 {
			t.Fatalf("report %+v", rep)
		}
		if _, err := os.Lstat(m.dir); !os.IsNotExist(err) {
			t.Fatal("the folder is still there")
		}
		// After a clean final sync the flush has nothing to send: the one
		// listing is the final sync's.
		reqs, listing := m.rec.take(), "GET /v1/memory_stores/"+e.storeID+"/memories"
		if n := slices.Index(reqs, listing); n < 0 || slices.Contains(reqs[n+1:], listing) {
			t.Fatalf("End sent %v, want exactly one listing", reqs)
		}
		// End is once.
		if rep := m.End(e.ctx, true); rep.FinalSync.Ran || rep.Flush.Ran {
			t.Fatalf("second End did something: %+v", rep)
		}
	})
	t.Run("unclean end: flush uploads edits only", func(t *testing.T) {
		e := newEnv(t)
		e.put("/a.md", "a")
		e.put("/b.md", "b")
		e.put("/c.md", "c")
		m := e.mount(t.TempDir())
		writeFile(t, m.dir, "a.md", "a2")
		writeFile(t, m.dir, "new.md", "new")
		writeFile(t, m.dir, "c.md", "c, edited here")
		removeFile(t, m.dir, "b.md")
		e.put("/c.md", "c, edited there")
		e.put("/d.md", "d")
		rep := m.End(e.ctx, false)
		// No delete, no pull: b stays, c keeps the server's version (with
		// a warning), d is not downloaded (the folder goes anyway).
		equal(t, "server", e.server(), map[string]string{"/a.md": "a2", "/b.md": "b", "/c.md": "c, edited there", "/d.md": "d", "/new.md": "new"})
		if rep.FinalSync.Ran || rep.Flush.Changes != 2 || len(rep.Removed) != 1 {
			t.Fatalf("report %+v", rep)
		}
		if w := e.logs.Records(t, slog.LevelWarn, "local edit is not uploaded at the end of the session"); len(w) != 1 || w[0]["path"] != "/c.md" {
			t.Fatalf("flush conflict warning: %v", w)
		}
		for _, r := range writes(m.rec.take()) {
			if strings.HasPrefix(r, "DELETE") {
				t.Fatalf("the flush deleted: %s", r)
			}
		}
	})
	t.Run("flush failures are listed", func(t *testing.T) {
		e := newEnv(t)
		e.put("/a.md", "a")
		m := e.mount(t.TempDir())
		writeFile(t, m.dir, "a.md", "a2")
		writeFile(t, m.dir, "b.md", "b")
		m.rec.before = func(r *http.Request) error {
			if r.Method == http.MethodPost {
				return errors.New("connection refused (by the test)")
			}
			return nil
		}
		rep := m.End(e.ctx, false)
		if rep.Flush.Failed != 2 || rep.Flush.Changes != 0 {
			t.Fatalf("flush report %+v", rep.Flush)
		}
		w := e.logs.Records(t, slog.LevelWarn, "local edits could not be uploaded at the end of the session")
		if len(w) != 1 || fmt.Sprint(w[0]["paths"]) != "[/a.md /b.md]" {
			t.Fatalf("flush failure summary: %v", w)
		}
		equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
	})
	t.Run("uploads the server refused at the flush are listed as lost", func(t *testing.T) {
		// Another writer gets in between the flush's listing and its
		// uploads: the update meets a changed memory, the create a memory
		// where its folder should be. The server wins both, and with no
		// sync to come, the edits go with the folder: the operator must be
		// told which.
		e := newEnv(t)
		e.put("/a.md", "a")
		m := e.mount(t.TempDir())
		writeFile(t, m.dir, "a.md", "a2")
		writeFile(t, m.dir, "x/y.md", "y")
		var once sync.Once // the uploads run in parallel: all wait for it
		m.rec.before = func(r *http.Request) error {
			if r.Method == http.MethodPost {
				once.Do(func() {
					e.put("/a.md", "a from elsewhere")
					e.put("/x", "x from elsewhere")
				})
			}
			return nil
		}
		rep := m.End(e.ctx, false)
		equal(t, "server", e.server(), map[string]string{"/a.md": "a from elsewhere", "/x": "x from elsewhere"})
		if rep.Flush.Changes != 0 {
			t.Fatalf("flush report %+v", rep.Flush)
		}
		w := e.logs.Records(t, slog.LevelWarn, "local edits could not be uploaded at the end of the session")
		if len(w) != 1 || fmt.Sprint(w[0]["paths"]) != "[/a.md /x/y.md]" {
			t.Fatalf("lost edits summary: %v\n%s", w, e.logs)
		}
	})
	t.Run("distrusted folder holding files is kept", func(t *testing.T) {
		e := newEnv(t)
		e.put("/a.md", "a")
		m := e.mount(t.TempDir())
		writeFile(t, m.dir, memsync.MarkerName, "version 1\nmemstore_someone_else")
		writeFile(t, m.dir, "a.md", "edited after the marker changed")
		m.Sync(e.ctx)
		rep := m.End(e.ctx, true)
		if len(rep.Kept) != 1 || rep.Kept[0] != m.dir || len(rep.Removed) != 0 {
			t.Fatalf("report %+v", rep)
		}
		equal(t, "kept folder", folder(t, m.dir), map[string]string{"/a.md": "edited after the marker changed"})
		equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
		if w := e.logs.Records(t, slog.LevelWarn, "the folder was kept"); len(w) != 1 || w[0]["folder"] != m.dir {
			t.Fatalf("kept warning: %v", w)
		}
		// The untrusted marker was warned about once, though two syncs saw it.
		if w := e.logs.Records(t, slog.LevelWarn, "so the folder may not be this store's"); len(w) != 1 {
			t.Fatalf("marker warnings: %d, want 1\n%s", len(w), e.logs)
		}
	})
	t.Run("distrusted empty folder is removed", func(t *testing.T) {
		e := newEnv(t)
		m := e.mount(t.TempDir())
		removeFile(t, m.dir, memsync.MarkerName)
		rep := m.End(e.ctx, false)
		if len(rep.Removed) != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
}

// Each of End's steps stops at its time limit and says, per store, how
// many changes it could not make and which paths they were; on a clean end
// the final sync is cut off first and the flush still gets its own time.
func TestEndCountsWhatTheTimeLimitCutOff(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			e := newEnv(t)
			e.put("/a.md", "a")
			// Long enough for a step's scan and listing on a loaded
			// machine; the uploads then wait out the rest.
			m := e.mount(t.TempDir(), endTimeout(time.Second))
			writeFile(t, m.dir, "a.md", "a2")
			writeFile(t, m.dir, "b.md", "b")
			writeFile(t, m.dir, "c.md", "c")
			// Uploads hang, unsent, until their context ends.
			m.rec.before = func(r *http.Request) error {
				if r.Method == http.MethodPost {
					<-r.Context().Done()
					return r.Context().Err()
				}
				return nil
			}
			rep := m.End(e.ctx, clean)
			steps := map[string]memsync.StepReport{"flush": rep.Flush}
			if clean {
				steps["final sync"] = rep.FinalSync
			} else if rep.FinalSync.Ran {
				t.Fatalf("an unclean end ran the final sync: %+v", rep.FinalSync)
			}
			for name, step := range steps {
				if !step.Ran || step.CutOff != 3 || step.Changes != 0 {
					t.Fatalf("%s report %+v, want 3 cut off", name, step)
				}
				w := e.logs.Records(t, slog.LevelWarn, "the "+name+" of this memory store ran out of its 1s: 3 planned changes were not made")
				if len(w) != 1 || w[0]["memory_store_id"] != e.storeID || w[0]["folder"] != m.dir {
					t.Fatalf("%s cut-off warning: %v\n%s", name, w, e.logs)
				}
				var got []string
				for _, p := range w[0]["paths"].([]any) {
					got = append(got, p.(string))
				}
				slices.Sort(got)
				if !slices.Equal(got, []string{"/a.md", "/b.md", "/c.md"}) {
					t.Fatalf("%s cut-off paths %v", name, got)
				}
			}
			equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
			if len(rep.Removed) != 1 {
				t.Fatalf("the folder was not removed after the steps ran out: %+v", rep)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeletionModes(t *testing.T) {
	for _, mode := range []memsync.DeletionMode{memsync.DeletionsLogOnly, memsync.DeletionsDisabled} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t)
			e.put("/a.md", "a")
			e.put("/b.md", "b")
			m := e.mount(t.TempDir(), deletions(mode))
			removeFile(t, m.dir, "a.md")
			for range 4 {
				m.Sync(e.ctx)
				e.clock.Advance(memsync.DefaultCorroborationWindow + time.Second)
			}
			m.End(e.ctx, true)
			equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/b.md": "b"})
			if w := writes(m.rec.take()); len(w) != 0 {
				t.Fatalf("%v sent %v", mode, w)
			}
			want := map[memsync.DeletionMode]string{
				memsync.DeletionsLogOnly:  "log_only: this file has stayed deleted",
				memsync.DeletionsDisabled: "memory_sync_deletions is disabled",
			}[mode]
			// Said once, though every sync (and the final one) finds it again.
			if r := e.logs.Records(t, slog.LevelInfo, want); len(r) != 1 || r[0]["path"] != "/a.md" {
				t.Fatalf("%d log records %q, want 1:\n%s", len(r), want, e.logs)
			}
		})
	}
}

func TestOneFailingStoreDoesNotStopTheOthers(t *testing.T) {
	e := newEnv(t)
	other, err := e.admin.CreateMemoryStore(e.ctx, api.CreateMemoryStoreRequest{Name: "doomed"})
	must(t, err)
	root := t.TempDir()
	s, err := memsync.NewSession(memsync.SessionConfig{
		Client: e.admin,
		Now:    e.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)),
		Stores: []memsync.StoreMount{
			{MemoryStoreID: other.ID, Dir: filepath.Join(root, "doomed")},
			{MemoryStoreID: e.storeID, Dir: filepath.Join(root, "notes")},
		},
	})
	must(t, err)
	must(t, s.Mount(e.ctx))
	_, err = e.admin.DeleteMemoryStore(e.ctx, other.ID)
	must(t, err)
	for i := range 3 {
		writeFile(t, filepath.Join(root, "notes"), "n.md", fmt.Sprint("edit ", i))
		s.Sync(e.ctx)
		equal(t, "server", e.server(), map[string]string{"/n.md": fmt.Sprint("edit ", i)})
	}
	w := e.logs.Records(t, slog.LevelWarn, "cannot list the store's memories")
	if len(w) != 1 || w[0]["memory_store_id"] != other.ID {
		t.Fatalf("want one warning about the deleted store, got %v", w)
	}
}

func TestCaseCollisionsAreNeverMerged(t *testing.T) {
	// On a case-insensitive filesystem /Notes.md and /notes.md would be one
	// file: neither is written, the others are, and the warning is said
	// once while the collision lasts.
	e := newEnv(t)
	e.put("/Notes.md", "upper")
	e.put("/notes.md", "lower")
	e.put("/other.md", "other")
	m := e.session(t.TempDir(), caseInsensitive)
	must(t, m.Mount(e.ctx))
	// A basic listing plans the whole download before the full listing
	// fills it.
	if reqs := m.rec.take(); len(reqs) != 2 {
		t.Fatalf("mount sent %v, want a basic and a full listing", reqs)
	}
	equal(t, "folder", folder(t, m.dir), map[string]string{"/other.md": "other"})
	for range 2 {
		e.clock.Advance(time.Minute)
		m.Sync(e.ctx)
	}
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("syncs sent %v", w)
	}
	if w := e.logs.Records(t, slog.LevelWarn, "differ only in letter case"); len(w) != 1 {
		t.Fatalf("collision warnings: %v", w)
	}
	// Renaming one spelling away ends the collision.
	e.remove("/Notes.md")
	m.Sync(e.ctx)
	equal(t, "folder", folder(t, m.dir), map[string]string{"/notes.md": "lower", "/other.md": "other"})
}

func TestArchivedStoreRefusalIsRememberedNotResent(t *testing.T) {
	e := newEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	_, err := e.admin.ArchiveMemoryStore(e.ctx, e.storeID)
	must(t, err)
	writeFile(t, m.dir, "a.md", "edited")
	writeFile(t, m.dir, "new.md", "new")
	m.Sync(e.ctx)
	if w := writes(m.rec.take()); len(w) != 2 {
		t.Fatalf("first sync sent %v, want one update and one create", w)
	}
	if w := e.logs.Records(t, slog.LevelWarn, "the server refused this file's content"); len(w) != 2 {
		t.Fatalf("refusal warnings: %v", w)
	}
	for range 2 {
		e.clock.Advance(time.Minute)
		m.Sync(e.ctx)
	}
	if w := writes(m.rec.take()); len(w) != 0 {
		t.Fatalf("refused uploads were sent again: %v", w)
	}
	equal(t, "server", e.server(), map[string]string{"/a.md": "a"})
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "edited", "/new.md": "new"})
}

// The agent may write into a wiped folder while the sync that rebuilds it
// runs (a background job of its shell). What it writes is its edit of the
// memories it had before the wipe: uploaded, never overwritten as if the
// server had changed them.
func TestAnEditDuringARebuildIsTheAgents(t *testing.T) {
	for _, how := range []string{"files deleted", "folder deleted"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			e.put("/a/b.md", "b")
			e.put("/c.md", "c")
			e.put("/d.md", "d")
			m := e.mount(t.TempDir())
			if how == "files deleted" {
				for _, rel := range []string{"a", "c.md", "d.md"} {
					must(t, os.RemoveAll(filepath.Join(m.dir, rel)))
				}
			} else {
				must(t, os.RemoveAll(m.dir))
			}
			// After the scan, before the downloads: /c.md rewritten, and a
			// file /a where the folder of /a/b.md was.
			edited := false
			m.rec.before = func(r *http.Request) error {
				if !edited && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/memories") {
					edited = true
					writeFile(t, m.dir, "c.md", "c, the agent's")
					writeFile(t, m.dir, "a", "a file now")
				}
				return nil
			}
			m.Sync(e.ctx)
			want := map[string]string{"/a": "a file now", "/c.md": "c, the agent's", "/d.md": "d"}
			equal(t, "folder after the rebuild", folder(t, m.dir), want)
			if w := e.logs.Records(t, slog.LevelWarn, "server version wins"); len(w) != 0 {
				t.Fatalf("the agent's edit was taken for a conflict: %v", w)
			}
			m.End(e.ctx, true)
			equal(t, "server", e.server(), want)
		})
	}
}
