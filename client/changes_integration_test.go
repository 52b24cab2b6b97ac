package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testdigest"
)

// The change feed and the snapshot (SPEC §8) through the client against the
// real server.

func TestChangeFeedAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()
	st := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "feed"})).ok(t)
	a := must(c.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: "/a", Content: "a1"})).ok(t)
	must(c.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: "/b", Content: "b1"})).ok(t)

	feed := must(c.ListChanges(ctx, st.ID, client.ListChangesParams{})).ok(t)
	if len(feed.Data) != 2 || feed.LatestSequence != 2 || feed.HasMore || feed.Data[0].MemoryID != a.ID || *feed.Data[0].Path != "/a" ||
		*feed.Data[0].ContentSHA256 != testdigest.SHA256("a1") || feed.Data[1].Sequence != 2 || feed.Type != "memory_change_list" {
		t.Fatalf("feed = %+v", feed)
	}
	page := must(c.ListChanges(ctx, st.ID, client.ListChangesParams{Limit: 1})).ok(t)
	if len(page.Data) != 1 || !page.HasMore || page.LatestSequence != 2 {
		t.Fatalf("limit 1 = %+v, want one change and has_more", page)
	}
	// Nothing after the latest sequence: an idle sync is one small answer.
	before := c.Stats()
	idle := must(c.ListChanges(ctx, st.ID, client.ListChangesParams{After: 2})).ok(t)
	if len(idle.Data) != 0 || idle.LatestSequence != 2 {
		t.Fatalf("idle feed = %+v", idle)
	}
	if d := c.Stats(); d.Requests-before.Requests != 1 || d.BytesReceived-before.BytesReceived > 1024 {
		t.Fatalf("an idle feed request cost %d requests, %d bytes", d.Requests-before.Requests, d.BytesReceived-before.BytesReceived)
	}

	// A long poll returns the change that ends its wait.
	got := make(chan *api.MemoryChangeList, 1)
	go func() {
		l, err := c.ListChanges(ctx, st.ID, client.ListChangesParams{After: 2, Wait: api.MaxChangesWait})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	must(c.UpdateMemory(ctx, st.ID, a.ID, api.UpdateMemoryRequest{Content: ptr("a2")})).ok(t)
	if l := <-got; l == nil || len(l.Data) != 1 || l.Data[0].Sequence != 3 || l.Data[0].Operation != api.OperationModified {
		t.Fatalf("long poll = %+v, want the update at 3", l)
	}
	// A cursor the store never issued is refused, and says what to do.
	_, err := c.ListChanges(ctx, st.ID, client.ListChangesParams{After: 99})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != api.InvalidRequest || !strings.Contains(ae.Message, "full listing") {
		t.Fatalf("cursor ahead: %v", err)
	}
}

func TestSnapshotAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()
	st := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "snap"})).ok(t)
	contents := map[string]string{"/notes/a.md": "alpha\n", "/notes/b.md": "", "/top": strings.Repeat("€", 3000), "/x/y/z": "deep"}
	for p, body := range contents {
		must(c.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: p, Content: body})).ok(t)
	}
	read := func(prefix string, consume bool) ([]string, int64) {
		t.Helper()
		s := must(c.Snapshot(ctx, st.ID, prefix)).ok(t)
		defer s.Close()
		var paths []string
		for {
			e, content, err := s.Next()
			if err == io.EOF {
				return paths, s.Sequence
			}
			if err != nil {
				t.Fatal(err)
			}
			paths = append(paths, e.Path)
			if !consume {
				continue // Next skips unread content
			}
			b, err := io.ReadAll(content)
			if err != nil || string(b) != contents[e.Path] || e.ContentSHA256 != testdigest.SHA256(string(b)) || !strings.HasPrefix(e.ID, "mem_") {
				t.Fatalf("%s: content %q (%v), entry %+v", e.Path, b, err, e)
			}
		}
	}
	if paths, seq := read("", true); !slices.Equal(paths, []string{"/notes/a.md", "/notes/b.md", "/top", "/x/y/z"}) || seq != 4 {
		t.Fatalf("snapshot = %v at %d", paths, seq)
	}
	if paths, _ := read("/notes/", false); !slices.Equal(paths, []string{"/notes/a.md", "/notes/b.md"}) {
		t.Fatalf("snapshot of /notes/ = %v", paths)
	}

	// A stream cut before its end line is an error, never a short store.
	rs.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &truncating{ResponseWriter: w, left: 300}
			h.ServeHTTP(rec, r)
		})
	})
	s := must(c.Snapshot(ctx, st.ID, "")).ok(t)
	defer s.Close()
	for {
		_, content, err := s.Next()
		if err == io.EOF {
			t.Fatal("a cut snapshot read as complete")
		}
		if err != nil {
			if !errors.Is(err, client.ErrSnapshotCut) {
				t.Fatalf("cut snapshot: %v, want ErrSnapshotCut", err)
			}
			break
		}
		io.Copy(io.Discard, content)
	}
}

// truncating passes the first left bytes of a body and drops the rest.
type truncating struct {
	http.ResponseWriter
	left int
}

func (w *truncating) Write(p []byte) (int, error) {
	n := min(len(p), w.left)
	w.left -= n
	w.ResponseWriter.Write(p[:n])
	return len(p), nil
}
