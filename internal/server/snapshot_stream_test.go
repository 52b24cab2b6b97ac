package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// heldSnapshots holds each snapshot's read after its first memory until
// the test says the client has that memory, then lets it go on, or fail.
type heldSnapshots struct {
	storage.Store
	received chan struct{}
	fail     error
}

func (h heldSnapshots) Snapshot(ctx context.Context, storeID, prefix string, at func(int64) error, each func(storage.MemoryRow) error) error {
	n := 0
	return h.Store.Snapshot(ctx, storeID, prefix, at, func(m storage.MemoryRow) error {
		if err := each(m); err != nil {
			return err
		}
		if n++; n > 1 {
			return nil
		}
		select {
		case <-h.received:
		case <-time.After(10 * time.Second):
			return errors.New("the client did not get the first memory while the read went on")
		}
		return h.fail
	})
}

// snapshotServer serves a store on SQLite through wrap, with one memory
// store holding a memory at each of paths (content: "memory " and its
// index), and returns an admin client and the store's id.
func snapshotServer(t *testing.T, wrap func(storage.Store) storage.Store, paths ...string) (*client.Client, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: wrap(db), Logger: slog.New(slog.DiscardHandler)})
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(server.Config{App: a, SpoolDir: dir}).Handler())
	t.Cleanup(func() { ts.Close(); a.Close(); db.Close() })
	c, err := client.New(ts.URL, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		if _, err := c.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: p, Content: fmt.Sprint("memory ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return c, st.ID
}

// A snapshot is streamed while it is read: the client has the first
// memory before the read goes past it, so a worker starts writing files
// while the server still reads. A read that fails after that ends the
// stream without its end line, which the client reports as incomplete
// rather than taking a part for the whole.
func TestASnapshotIsSentWhileItIsRead(t *testing.T) {
	for _, fail := range []error{nil, errors.New("the disk went away")} {
		t.Run(fmt.Sprintf("fail=%v", fail != nil), func(t *testing.T) {
			ctx := context.Background()
			held := heldSnapshots{received: make(chan struct{}), fail: fail}
			c, storeID := snapshotServer(t, func(db storage.Store) storage.Store { held.Store = db; return held }, "/m0.md", "/m1.md", "/m2.md")
			s, err := c.Snapshot(ctx, storeID, "/")
			if err != nil {
				t.Fatalf("the snapshot did not start while its read was held: %v", err)
			}
			defer s.Close()
			e, content, err := s.Next()
			if err != nil {
				t.Fatalf("first entry: %v", err)
			}
			b, _ := io.ReadAll(content)
			if e.Path != "/m0.md" || string(b) != "memory 0" {
				t.Fatalf("first entry = %s %q", e.Path, b)
			}
			close(held.received)
			var paths []string
			for {
				e, _, err := s.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if fail == nil {
						t.Fatalf("after %v: %v", paths, err)
					}
					return // incomplete, as it should be
				}
				paths = append(paths, e.Path)
			}
			if fail != nil {
				t.Fatalf("a snapshot whose read failed ended as whole after %v", paths)
			}
			if fmt.Sprint(paths) != "[/m1.md /m2.md]" || s.Sequence != 3 {
				t.Fatalf("rest of the snapshot = %v at sequence %d, want [/m1.md /m2.md] at 3", paths, s.Sequence)
			}
		})
	}
}

// retriedSnapshots reads each snapshot twice, as a backend that retries a
// read after a serialization failure does, the second time from the top.
type retriedSnapshots struct{ storage.Store }

func (r retriedSnapshots) Snapshot(ctx context.Context, storeID, prefix string, at func(int64) error, each func(storage.MemoryRow) error) error {
	if err := r.Store.Snapshot(ctx, storeID, prefix, at, each); err != nil {
		return err
	}
	return r.Store.Snapshot(ctx, storeID, prefix, at, each)
}

// A read retried after its first memories went out cannot be sent again
// behind them: the stream ends without its end line, and the client reads
// it as incomplete instead of taking every memory twice.
func TestARetriedSnapshotReadIsCutNotRepeated(t *testing.T) {
	ctx := context.Background()
	c, storeID := snapshotServer(t, func(db storage.Store) storage.Store { return retriedSnapshots{db} }, "/a.md")
	s, err := c.Snapshot(ctx, storeID, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var paths []string
	for {
		e, _, err := s.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the retried read ended as a whole snapshot: %v", paths)
		}
		if err != nil {
			break
		}
		paths = append(paths, e.Path)
	}
	if fmt.Sprint(paths) != "[/a.md]" {
		t.Fatalf("memories before the cut = %v, want [/a.md] once", paths)
	}
}
