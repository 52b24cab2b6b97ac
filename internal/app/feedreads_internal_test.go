package app

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// A read of the feed that began before a write was woken for may not hold
// that write: a long poll that comes after the wake must read again, not
// take that read's answer (it would then wait for a wake that is past,
// up to the poll's recheck).
func TestAPollAfterAWakeDoesNotJoinAReadFromBeforeIt(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Store: db})
	t.Cleanup(func() {
		a.Close()
		db.Close()
	})
	by := Caller{Actor: storage.Actor{Kind: storage.ActorUser, ID: "user_01"}, LogKey: "user_id", LogID: "user_01"}
	st, err := a.MemoryStores.Create(ctx, storage.NewMemoryStore{Name: "notes"}, by)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Memories
	// A read of the empty feed is in flight (its answer, no change, is
	// held back here) when a write lands and wakes the store.
	stale := &feedRead{done: make(chan struct{}), page: storage.ChangePage{}}
	before := feedQuestion{st.ID, 0, 100, m.changes.wait(st.ID)}
	m.reads.mu.Lock()
	m.reads.inFlight[before] = stale
	m.reads.mu.Unlock()
	if _, err := m.Create(ctx, st.ID, "/a.md", "a1", by); err != nil {
		t.Fatal(err)
	}
	got := make(chan storage.ChangePage, 1)
	go func() {
		page, err := m.ListChanges(ctx, st.ID, 0, 100)
		if err != nil {
			t.Error(err)
		}
		got <- page
	}()
	var page storage.ChangePage
	select {
	case page = <-got:
	case <-time.After(5 * time.Second):
		// It waits on the read from before the write: let that read
		// answer, and see what the poll would have got.
		close(stale.done)
		page = <-got
	}
	if len(page.Changes) != 1 || page.Latest != 1 {
		t.Fatalf("the poll after the write got %d changes, latest %d; want the write's one change (it joined the read from before it)", len(page.Changes), page.Latest)
	}
}
