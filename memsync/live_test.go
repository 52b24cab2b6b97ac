package memsync_test

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Live mode (SPEC §8): syncs run beside the agent, a written file is
// uploaded at once, and the change feed brings other sessions' changes.

// eventually waits for cond, which background work makes true; it fails
// the test after a generous bound instead of hanging. It asserts an
// outcome, not a duration.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tool call never waits for a periodic sync: with the interval passed
// and a server that answers nothing until the test lets it, Nudge returns,
// and only then does the sync it queued reach the server.
func TestNudgeNeverWaitsForASlowServer(t *testing.T) {
	e := newFeedEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir(), interval(5*time.Second))
	m.StartLive(e.ctx)
	arrived := make(chan string, 16)
	release := make(chan struct{})
	e.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("wait_ms") == "" { // the follower's long poll may wait on its own
				arrived <- r.Method + " " + r.URL.Path
				<-release
			}
			h.ServeHTTP(w, r)
		})
	})
	writeFile(t, m.dir, "from-bash.md", "made by bash")
	e.clock.Advance(6 * time.Second)
	m.Nudge(e.ctx) // returns while the server holds every request
	select {
	case r := <-arrived:
		if !strings.HasSuffix(r, "/changes") {
			t.Fatalf("the queued sync began with %s, want the change feed", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the nudge queued no sync")
	}
	close(release)
	e.srv.Wrap(nil)
	m.End(e.ctx, true)
	equal(t, "server", e.server(), map[string]string{"/a.md": "a", "/from-bash.md": "made by bash"})
}

// A successful write is uploaded at once, once: the sync after it finds
// nothing to send.
func TestWroteUploadsTheFileOnce(t *testing.T) {
	e := newFeedEnv(t)
	m := e.mount(t.TempDir())
	m.StartLive(e.ctx)
	defer m.End(e.ctx, false)
	writeFile(t, m.dir, "notes/todo.md", "buy milk")
	m.Wrote(filepath.Join(m.dir, "notes/todo.md"))
	eventually(t, "the written file reaches the server", func() bool { return e.find("/notes/todo.md") != nil })
	m.Sync(e.ctx)
	posts := 0
	for _, r := range m.rec.take() {
		if strings.HasPrefix(r, "POST ") {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("%d uploads for one write, want 1", posts)
	}
	// The advertised mount path works as well as the real folder.
	writeFile(t, m.dir, "notes/todo.md", "buy milk and eggs")
	m.Wrote("/mnt/memory/notes/notes/todo.md")
	eventually(t, "the edit reaches the server", func() bool { return e.server()["/notes/todo.md"] == "buy milk and eggs" })
}

// Two sessions on one store: a write in one reaches the other's folder
// through the feed, without either syncing periodically. When the second
// session's agent edits the same file meanwhile, the server wins and the
// losing edit is reported, never dropped silently.
func TestTwoLiveSessionsSeeEachOthersWrites(t *testing.T) {
	e := newFeedEnv(t)
	e.put("/shared.md", "v0")
	a := e.mount(t.TempDir())
	// B's edit below must still be only on B's disk when A's upload lands:
	// B's folder is not watched, so the edit waits for a sync B has no
	// reason to run until the feed reports A's change.
	b := e.mount(t.TempDir(), noWatch)
	a.StartLive(e.ctx)
	b.StartLive(e.ctx)
	defer a.End(e.ctx, false)
	defer b.End(e.ctx, false)

	writeFile(t, a.dir, "from-a.md", "hello from A")
	a.Wrote(filepath.Join(a.dir, "from-a.md"))
	eventually(t, "A's write appears in B's folder", func() bool {
		got, err := os.ReadFile(filepath.Join(b.dir, "from-a.md"))
		return err == nil && string(got) == "hello from A"
	})

	writeFile(t, b.dir, "shared.md", "B's local edit")
	writeFile(t, a.dir, "shared.md", "A's edit")
	a.Wrote(filepath.Join(a.dir, "shared.md"))
	eventually(t, "the server's version reaches B", func() bool {
		got, _ := os.ReadFile(filepath.Join(b.dir, "shared.md"))
		return string(got) == "A's edit"
	})
	if recs := e.logs.Records(t, slog.LevelWarn, ""); !logsMention(recs, "/shared.md") {
		t.Fatalf("B's losing edit was overwritten without a warning naming the path")
	}
}

// What bash writes (no Wrote) reaches the server without waiting for the
// periodic sync: the folder's watch queues a sync once it goes quiet.
func TestBashWriteReachesTheServerWithinTwoSeconds(t *testing.T) {
	e := newFeedEnv(t)
	m := e.mount(t.TempDir())
	m.StartLive(e.ctx)
	defer m.End(e.ctx, false)

	if err := os.MkdirAll(filepath.Join(m.dir, "logs", "today"), 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	writeFile(t, m.dir, "logs/today/run.md", "written by bash")
	deadline := start.Add(2 * time.Second)
	for e.server()["/logs/today/run.md"] != "written by bash" {
		if time.Now().After(deadline) {
			t.Fatalf("a file written without the write tool was not on the server 2 s later; the server holds %v", e.server())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func logsMention(recs []map[string]any, path string) bool {
	for _, r := range recs {
		if r["path"] == path {
			return true
		}
	}
	return false
}

// An edit uploaded right after the write that created its file updates the
// memory that write created, even before any sync has read the change feed
// again (the follower is held here, as it is whenever the agent is quicker
// than the feed): the edit reaches the server and stays in the folder, and
// the worker's own memory is never taken for another writer's.
func TestAnEditRightAfterTheWriteThatCreatedItIsAnUpdate(t *testing.T) {
	e := newFeedEnv(t)
	m := e.mount(t.TempDir(), noWatch)
	release := make(chan struct{})
	e.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("wait_ms") != "" { // the follower's long poll
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	m.StartLive(e.ctx)
	defer m.End(e.ctx, false)
	defer close(release)

	writeFile(t, m.dir, "notes.md", "v1")
	m.Wrote(filepath.Join(m.dir, "notes.md"))
	eventually(t, "the write reaches the server", func() bool { return e.server()["/notes.md"] == "v1" })
	writeFile(t, m.dir, "notes.md", "v2")
	m.Wrote(filepath.Join(m.dir, "notes.md"))
	eventually(t, "the edit reaches the server", func() bool { return e.server()["/notes.md"] == "v2" })

	m.Sync(e.ctx)
	if got, _ := os.ReadFile(filepath.Join(m.dir, "notes.md")); string(got) != "v2" {
		t.Fatalf("the folder holds %q after the sync, want the agent's edit v2", got)
	}
	equal(t, "server", e.server(), map[string]string{"/notes.md": "v2"})
	for _, msg := range []string{"another writer", "server version wins"} {
		if strings.Contains(e.logs.String(), msg) {
			t.Fatalf("the worker's own upload was taken for another writer's (the log says %q):\n%s", msg, e.logs.String())
		}
	}
}
