package memsync_test

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// Against a memstore server (SPEC §8): a mount is one snapshot request, an
// idle sync one change-feed request, and remote changes arrive through the
// feed.

func TestFeedMountIsOneRequestAndIdleSyncOne(t *testing.T) {
	e := newFeedEnv(t)
	want := map[string]string{}
	for i := range 150 {
		p := fmt.Sprintf("/d%d/m%03d.md", i%5, i)
		want[p] = strings.Repeat("x", i)
		e.put(p, want[p])
	}
	m := e.session(t.TempDir())
	if err := m.Mount(e.ctx); err != nil {
		t.Fatal(err)
	}
	equal(t, "folder", folder(t, m.dir), want)
	if reqs := m.rec.take(); len(reqs) != 1 || !strings.HasSuffix(reqs[0], "/snapshot") {
		t.Fatalf("mount sent %v, want one snapshot", reqs)
	}
	before := m.stats()
	m.Sync(e.ctx)
	after := m.stats()
	if reqs := m.rec.take(); len(reqs) != 1 || !strings.HasSuffix(reqs[0], "/changes") {
		t.Fatalf("an idle sync sent %v, want one change-feed request", reqs)
	}
	if got := after.BytesReceived - before.BytesReceived; got >= 1024 {
		t.Fatalf("an idle sync received %d bytes, want < 1 KB", got)
	}
}

func TestFeedBringsRemoteChanges(t *testing.T) {
	e := newFeedEnv(t)
	e.put("/keep.md", "k")
	e.put("/edit.md", "v1")
	e.put("/gone.md", "g")
	e.put("/old/name.md", "moved")
	m := e.mount(t.TempDir())
	e.put("/edit.md", "v2")
	e.remove("/gone.md")
	mem := e.find("/old/name.md")
	newPath := "/new/name.md"
	if _, err := e.admin.UpdateMemory(e.ctx, e.storeID, mem.ID, api.UpdateMemoryRequest{Path: &newPath}); err != nil {
		t.Fatal(err)
	}
	e.put("/fresh.md", "new")
	writeFile(t, m.dir, "local.md", "from the agent")
	m.Sync(e.ctx)
	want := map[string]string{"/keep.md": "k", "/edit.md": "v2", "/new/name.md": "moved", "/fresh.md": "new", "/local.md": "from the agent"}
	equal(t, "folder", folder(t, m.dir), want)
	equal(t, "server", e.server(), want)
	// The next sync has nothing to do but read the feed (its own upload
	// comes back through it and changes nothing).
	m.rec.take()
	m.Sync(e.ctx)
	if reqs := m.rec.take(); len(reqs) != 1 || len(writes(reqs)) != 0 {
		t.Fatalf("the sync after sent %v, want one change-feed request", reqs)
	}
}

// A cursor the server refuses (the store was recreated under the same id
// on a restored server, say) costs one full listing, and the feed goes on.
func TestFeedCursorRefusedFallsBackToOneListing(t *testing.T) {
	e := newFeedEnv(t)
	e.put("/a.md", "a")
	m := e.mount(t.TempDir())
	var refuse atomic.Bool
	refuse.Store(true)
	e.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/changes") && r.URL.Query().Get("after") != "0" && refuse.CompareAndSwap(true, false) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"after: ahead"}}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	e.put("/b.md", "b")
	m.Sync(e.ctx)
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "a", "/b.md": "b"})
	if logs := e.logs.Records(t, slog.LevelWarn, "change-feed cursor"); len(logs) != 1 {
		t.Fatalf("want one warning about the refused cursor, got %v", logs)
	}
	e.put("/c.md", "c")
	m.rec.take()
	m.Sync(e.ctx)
	equal(t, "folder", folder(t, m.dir), map[string]string{"/a.md": "a", "/b.md": "b", "/c.md": "c"})
	if reqs := m.rec.take(); len(reqs) != 2 || !strings.Contains(reqs[0], "/changes") {
		t.Fatalf("the sync after the fallback sent %v, want the feed and one download", reqs)
	}
}

// cutFirstSnapshots answers the first n snapshot requests with their status
// and only the first 300 bytes of the body, then drops the connection, as
// a server whose read fails after the first memories went out does.
func cutFirstSnapshots(n int32) func(http.Handler) http.Handler {
	var left atomic.Int32
	left.Store(n)
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/snapshot") || left.Add(-1) < 0 {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes()[:300])
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		})
	}
}

// A fresh mount whose snapshot the server cuts short reads it again into
// an emptied folder, and ends with exactly the server's memories.
func TestACutSnapshotIsReadAgain(t *testing.T) {
	for _, cuts := range []int32{1, 3} {
		t.Run(fmt.Sprintf("cuts=%d", cuts), func(t *testing.T) {
			e := newFeedEnv(t)
			want := map[string]string{}
			for i := range 8 {
				p := fmt.Sprintf("/d%d/m%d.md", i%3, i)
				e.put(p, strings.Repeat(fmt.Sprint(i), 100))
				want[p] = strings.Repeat(fmt.Sprint(i), 100)
			}
			e.srv.Wrap(cutFirstSnapshots(cuts))
			m := e.session(t.TempDir())
			err := m.Mount(e.ctx)
			warned := len(e.logs.Records(t, slog.LevelWarn, "the server cut this store's snapshot short"))
			if cuts == 3 {
				// Three attempts, all cut: the mount fails and says why.
				if !errors.Is(err, client.ErrSnapshotCut) || warned != 2 {
					t.Fatalf("mount with every snapshot cut: %v, %d warnings; want ErrSnapshotCut after 2 warnings", err, warned)
				}
				m.End(e.ctx, false)
				return
			}
			must(t, err)
			if warned != 1 {
				t.Fatalf("%d warnings of a cut snapshot, want 1", warned)
			}
			equal(t, "folder", folder(t, m.dir), want)
			m.End(e.ctx, true)
		})
	}
}
