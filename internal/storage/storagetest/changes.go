package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testdigest"
)

// Reopener opens a fresh, empty database whose clock is now, and returns a
// function that opens that same database (a restart). The suite closes
// every store it opens.
type Reopener func(t *testing.T, now func() time.Time) (open func() storage.Store)

// changes reads a store's whole feed after a cursor, in pages of limit.
func (f *fixture) changes(storeID string, after int64, limit int) ([]storage.VersionRow, int64) {
	f.t.Helper()
	var all []storage.VersionRow
	for {
		page, err := f.s.ListChanges(f.ctx, storeID, after, limit)
		if err != nil {
			f.t.Fatalf("ListChanges(after %d): %v", after, err)
		}
		all = append(all, page.Changes...)
		if !page.More {
			return all, page.Latest
		}
		after = page.Changes[len(page.Changes)-1].Sequence
	}
}

// changeString renders a change as "seq op path" for comparisons.
func changeString(c storage.VersionRow) string {
	p := "<redacted>"
	if !c.Redacted() {
		p = c.Path
	}
	return fmt.Sprintf("%d %s %s", c.Sequence, c.Operation, p)
}

func testChanges(t *testing.T, open Factory) {
	t.Run("EveryChangeOnceInOrder", func(t *testing.T) {
		f := newFixture(t, open)
		st, other := f.store("s"), f.store("other")
		if got, latest := f.changes(st.ID, 0, 10); len(got) != 0 || latest != 0 {
			t.Fatalf("a new store's feed = %v at %d, want empty at 0", got, latest)
		}
		a := f.create(st.ID, "/a", "a1")
		b := f.create(st.ID, "/b", "b1")
		f.create(other.ID, "/a", "elsewhere")
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("a2"), By: apiActor}); err != nil {
			t.Fatal(err)
		}
		// A no-op and a refused write are not changes.
		if _, changed, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("a2"), By: apiActor}); err != nil || changed {
			t.Fatalf("no-op update: changed=%v, %v", changed, err)
		}
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("a3"), IfSHA256: testdigest.SHA256("stale"), By: apiActor}); err == nil {
			t.Fatal("stale precondition accepted")
		}
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: b.ID, Path: ptr("/dir/b"), By: apiActor}); err != nil {
			t.Fatal(err)
		}
		if err := f.s.DeleteMemory(f.ctx, st.ID, a.ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
		got, latest := f.changes(st.ID, 0, 2)
		want := []string{"1 created /a", "2 created /b", "3 modified /a", "4 modified /dir/b", "5 deleted /a"}
		if strs := mapSlice(got, changeString); !slices.Equal(strs, want) || latest != 5 {
			t.Fatalf("feed = %v at %d, want %v at 5", strs, latest, want)
		}
		// The entries are the versions: same ids, hashes and sizes.
		for _, c := range got {
			v, err := f.s.GetMemoryVersion(f.ctx, st.ID, c.ID)
			if err != nil || v.MemoryID != c.MemoryID || v.Operation != c.Operation || v.ContentSHA256 != c.ContentSHA256 ||
				v.ContentSizeBytes != c.ContentSizeBytes || !v.CreatedAt.Equal(c.CreatedAt) || v.Sequence != c.Sequence || c.Content != "" {
				t.Fatalf("change %+v does not match its version %+v (%v)", c, v, err)
			}
		}
		if got[3].MemoryID != b.ID || got[3].ContentSHA256 != testdigest.SHA256("b1") {
			t.Fatalf("a rename keeps the memory id and hash: %+v", got[3])
		}
		// A cursor resumes exactly after itself; the other store counts on its own.
		if rest, _ := f.changes(st.ID, 3, 10); !slices.Equal(mapSlice(rest, changeString), want[3:]) {
			t.Fatalf("after 3 = %v", mapSlice(rest, changeString))
		}
		if o, latest := f.changes(other.ID, 0, 10); len(o) != 1 || o[0].Sequence != 1 || latest != 1 {
			t.Fatalf("other store's feed = %v at %d", mapSlice(o, changeString), latest)
		}
	})

	t.Run("RedactedVersionKeepsItsPlace", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/secret", "s1")
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("s2"), By: apiActor}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, m.VersionID, apiActor); err != nil {
			t.Fatal(err)
		}
		got, latest := f.changes(st.ID, 0, 10)
		if strs := mapSlice(got, changeString); !slices.Equal(strs, []string{"1 created <redacted>", "2 modified /secret"}) || latest != 2 {
			t.Fatalf("feed after a redaction = %v at %d", strs, latest)
		}
		if got[0].HasContent() || got[0].ContentSHA256 != "" || got[0].ContentSizeBytes != 0 {
			t.Fatalf("a redacted change still carries its hash or size: %+v", got[0])
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		f.create(st.ID, "/a", "a")
		var ahead *storage.SequenceAheadError
		if _, err := f.s.ListChanges(f.ctx, st.ID, 2, 10); !errors.As(err, &ahead) || ahead.After != 2 || ahead.Latest != 1 {
			t.Fatalf("cursor ahead: %v, want a *SequenceAheadError 2 > 1", err)
		}
		if _, err := f.s.ListChanges(f.ctx, "memstore_01NOPENOPENOPENOPENOPENOPE", 0, 10); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown store: %v", err)
		}
		if got, latest := f.changes(st.ID, 0, 10); len(got) != 1 || latest != 1 {
			t.Fatalf("a refused read changed the feed: %v at %d", mapSlice(got, changeString), latest)
		}
	})

	t.Run("ConcurrentWritersGetDistinctSequences", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		const writers, each = 8, 6
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*2)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					m, err := f.s.CreateMemory(context.Background(), storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/w%d/%d", w, i), Content: "v1", By: apiActor, MaxMemories: 100})
					if err != nil {
						errs <- err
						continue
					}
					if _, _, err := f.s.UpdateMemory(context.Background(), storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("v2"), IfSHA256: m.ContentSHA256, By: apiActor}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, latest := f.changes(st.ID, 0, 7)
		if latest != writers*each*2 || len(got) != writers*each*2 {
			t.Fatalf("%d changes at %d, want %d", len(got), latest, writers*each*2)
		}
		created := map[string]int64{}
		for i, c := range got {
			if c.Sequence != int64(i+1) {
				t.Fatalf("sequence %d at position %d: not gap-free", c.Sequence, i)
			}
			// A memory's own versions appear in the order they were written.
			switch c.Operation {
			case storage.OpCreated:
				created[c.MemoryID] = c.Sequence
			case storage.OpModified:
				if s, ok := created[c.MemoryID]; !ok || s > c.Sequence {
					t.Fatalf("modification of %s before its creation", c.MemoryID)
				}
			}
		}
	})

	t.Run("Snapshot", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		f.create(st.ID, "/notes/b", "bee")
		f.create(st.ID, "/notes/a", "ay")
		f.create(st.ID, "/other", "not under the prefix")
		f.create(st.ID, "/notes0", "a sibling sorting right after the prefix")
		snap := func(prefix string, during func()) (int64, []string) {
			t.Helper()
			var (
				seq  int64 = -1
				seen []string
			)
			err := f.s.Snapshot(f.ctx, st.ID, prefix, func(s int64) error { seq = s; return nil }, func(m storage.MemoryRow) error {
				if m.Content == nil || m.ContentSHA256 != testdigest.SHA256(*m.Content) || m.ContentSizeBytes != int64(len(*m.Content)) || m.StoreID != st.ID {
					t.Fatalf("snapshot memory %+v", m)
				}
				seen = append(seen, m.Path+"="+*m.Content)
				if during != nil {
					during()
					during = nil
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return seq, seen
		}
		if seq, got := snap("/notes/", nil); seq != 4 || !slices.Equal(got, []string{"/notes/a=ay", "/notes/b=bee"}) {
			t.Fatalf("snapshot of /notes/ = %v at %d", got, seq)
		}
		// A write landing while the snapshot streams is not in it: the
		// snapshot is the state at its sequence.
		seq, got := snap("/", func() { f.create(st.ID, "/zzz", "late") })
		if seq != 4 || len(got) != 4 || slices.Contains(got, "/zzz=late") {
			t.Fatalf("snapshot while writing = %v at %d, want the 4 memories at 4", got, seq)
		}
		stop := errors.New("stop")
		if err := f.s.Snapshot(f.ctx, st.ID, "/", func(int64) error { return nil }, func(storage.MemoryRow) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("a callback's error = %v, want it returned", err)
		}
		if err := f.s.Snapshot(f.ctx, "memstore_01NOPENOPENOPENOPENOPENOPE", "/", func(int64) error { return nil }, func(storage.MemoryRow) error { return nil }); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("snapshot of an unknown store: %v", err)
		}
	})
}

// RunRestarts checks what must survive a restart of the backend: the
// change feed's sequences continue, never repeating one.
func RunRestarts(t *testing.T, reopen Reopener) {
	clock := newClock()
	open := reopen(t, clock.Now)
	ctx := context.Background()
	s := open()
	f := &fixture{t: t, ctx: ctx, s: s, clock: clock}
	st := f.store("s")
	a := f.create(st.ID, "/a", "1")
	f.create(st.ID, "/b", "2")
	s.Close()

	s = open()
	t.Cleanup(func() { s.Close() })
	f.s = s
	if _, _, err := s.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("1b"), By: apiActor}); err != nil {
		t.Fatal(err)
	}
	got, latest := f.changes(st.ID, 0, 10)
	if strs := mapSlice(got, changeString); !slices.Equal(strs, []string{"1 created /a", "2 created /b", "3 modified /a"}) || latest != 3 {
		t.Fatalf("feed across a restart = %v at %d", strs, latest)
	}
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}
