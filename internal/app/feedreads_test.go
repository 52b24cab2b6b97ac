package app_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// Long polls woken by one write ask the feed together: each gets the page
// after its own cursor, whoever else asked, and one that leaves while a
// read it joined runs gets its own cancellation, not the others' answer.
func TestLongPollsWokenTogetherEachGetTheirPage(t *testing.T) {
	f := newFixture(t, app.Config{})
	st := f.store()
	for _, p := range []string{"/a.md", "/b.md", "/c.md"} {
		if _, err := f.app.Memories.Create(f.ctx, st.ID, p, "x", person); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := int64(i % 3)
			page, err := f.app.Memories.ListChanges(f.ctx, st.ID, after, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if len(page.Changes) != 3-int(after) || page.Latest != 3 || page.Changes[0].Sequence != after+1 {
				t.Errorf("after %d: %d changes from %d, latest %d; want %d from %d, latest 3", after, len(page.Changes), page.Changes[0].Sequence, page.Latest, 3-after, after+1)
			}
		}()
	}
	wg.Wait()

	gone, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := f.app.Memories.ListChanges(gone, st.ID, 0, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled poll: %v; want context.Canceled", err)
	}
	var ahead *storage.SequenceAheadError
	if _, err := f.app.Memories.ListChanges(f.ctx, st.ID, 9, 100); !errors.As(err, &ahead) {
		t.Fatalf("a cursor ahead of the store: %v; want a SequenceAheadError", err)
	}
}
