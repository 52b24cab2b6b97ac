package memsync_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// A session whose change-feed cursor fell behind the server's version
// retention (the versions after it were pruned while it was not looking)
// is refused by the feed with 410; the sync reads the store again from a
// snapshot and loses nothing: the remote edits reach the folder, the local
// edits reach the server, and the feed is followed on from the snapshot.
func TestCursorBehindRetentionRecoversFromASnapshot(t *testing.T) {
	e := newFeedEnvWith(t, testserver.Options{PruneInterval: 10 * time.Millisecond})
	if _, err := e.admin.UpdateMemoryStore(e.ctx, e.storeID, api.UpdateMemoryStoreRequest{
		VersionRetention: &api.VersionRetention{Type: api.RetentionKeepLast, KeepLast: 1}}); err != nil {
		t.Fatal(err)
	}
	e.put("/a.md", "a1")
	e.put("/b.md", "b1")
	m := e.mount(t.TempDir())
	defer m.End(e.ctx, false)
	cursor := e.latest()

	// While the session looks away: others edit /a.md three times and add
	// /c.md, the pruner deletes the versions behind the session's cursor,
	// and the agent edits /b.md and adds /d.md in its folder.
	for _, c := range []string{"a2", "a3", "a4"} {
		e.put("/a.md", c)
	}
	e.put("/c.md", "c1")
	eventually(t, "the pruner deletes the versions after the session's cursor", func() bool {
		_, err := e.admin.ListChanges(e.ctx, e.storeID, client.ListChangesParams{After: cursor})
		return client.IsStatus(err, http.StatusGone)
	})
	writeFile(t, m.dir, "b.md", "b edited by the agent")
	writeFile(t, m.dir, "d.md", "d made by the agent")

	m.Sync(e.ctx)
	want := map[string]string{"/a.md": "a4", "/b.md": "b edited by the agent", "/c.md": "c1", "/d.md": "d made by the agent"}
	equal(t, "server", e.server(), want)
	equal(t, "folder", folder(t, m.dir), want)
	if got := e.logs.Records(t, 0, "this store's change-feed cursor fell behind the server's version retention, so the store is read again from a snapshot and followed from there"); len(got) != 1 {
		t.Fatalf("recovery logged %d times, want once", len(got))
	}

	// The feed is followed again from where the snapshot left it.
	e.put("/a.md", "a5")
	m.Sync(e.ctx)
	want["/a.md"] = "a5"
	equal(t, "folder after the next remote edit", folder(t, m.dir), want)
	if got := e.logs.Records(t, 0, "this store's change-feed cursor fell behind the server's version retention, so the store is read again from a snapshot and followed from there"); len(got) != 1 {
		t.Fatalf("recovery logged %d times after the next sync, want still once: the cursor should be current again", len(got))
	}
}

// latest is the store's latest change-feed sequence.
func (e *env) latest() int64 {
	e.t.Helper()
	l, err := e.admin.ListChanges(e.ctx, e.storeID, client.ListChangesParams{After: 0, Limit: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.LatestSequence
}
