package storagetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
)

// prune runs PruneVersions in batches of batch until a batch comes back
// short, and returns how many versions went.
func (f *fixture) prune(storeID string, p retention.Policy, batch int) int {
	f.t.Helper()
	total := 0
	for {
		n, err := f.s.PruneVersions(f.ctx, storeID, p, f.clock.Now(), batch)
		if err != nil {
			f.t.Fatalf("PruneVersions: %v", err)
		}
		total += n
		if n < batch {
			return total
		}
	}
}

// updateN writes n more versions of memory m.
func (f *fixture) updateN(m storage.MemoryRow, n int) {
	f.t.Helper()
	for i := range n {
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: m.StoreID, MemoryID: m.ID, Content: ptr(m.Path + " v" + string(rune('a'+i))), By: apiActor}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func testRetention(t *testing.T, open Factory) {
	t.Run("PolicyIsStoredAndCleared", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		if st.Retention != nil || st.PrunedThrough != 0 {
			t.Fatalf("new store: retention %v, pruned through %d; want the server default and nothing pruned", st.Retention, st.PrunedThrough)
		}
		got, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Retention: &storage.RetentionSetting{Policy: retention.Policy{KeepLast: 2}}})
		if err != nil || got.Retention == nil || *got.Retention != (retention.Policy{KeepLast: 2}) || !got.UpdatedAt.After(st.UpdatedAt) && !got.UpdatedAt.Equal(st.UpdatedAt) {
			t.Fatalf("set keep_last=2: %+v, %v", got.Retention, err)
		}
		if read, err := f.s.GetMemoryStore(f.ctx, st.ID); err != nil || read.Retention == nil || read.Retention.KeepLast != 2 {
			t.Fatalf("read back: %+v, %v", read.Retention, err)
		}
		got, err = f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Retention: &storage.RetentionSetting{Inherit: true}})
		if err != nil || got.Retention != nil {
			t.Fatalf("back to the server default: %+v, %v", got.Retention, err)
		}
	})

	t.Run("KeepLastKeepsNewestAndRedactions", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/ten", "v0")
		f.updateN(m, 9) // 10 versions
		hist := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID})
		if len(hist) != 10 {
			t.Fatalf("%d versions before pruning, want 10", len(hist))
		}
		redacted := hist[6] // the 4th oldest
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, redacted.ID, apiActor); err != nil {
			t.Fatal(err)
		}
		gone := f.create(st.ID, "/gone", "g0")
		f.updateN(gone, 2)
		if err := f.s.DeleteMemory(f.ctx, st.ID, gone.ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
		single := f.create(st.ID, "/single", "s0")
		other := f.store("other")
		om := f.create(other.ID, "/o", "o0")
		f.updateN(om, 4)

		if n := f.prune(st.ID, retention.Policy{KeepLast: 2}, 3); n != 7+2 {
			t.Fatalf("pruned %d versions, want 9 (7 of /ten, 2 of /gone)", n)
		}
		kept := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID})
		ids := mapSlice(kept, func(v storage.VersionRow) string { return v.ID })
		if want := []string{hist[0].ID, hist[1].ID, redacted.ID}; !slices.Equal(ids, want) {
			t.Fatalf("/ten keeps %v, want the newest two and the redaction record %v", ids, want)
		}
		if cur, err := f.s.GetMemory(f.ctx, st.ID, m.ID); err != nil || cur.VersionID != hist[0].ID || cur.Content == nil || *cur.Content != "/ten vi" {
			t.Fatalf("/ten after pruning: %+v, %v", cur, err)
		}
		ops := mapSlice(f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: gone.ID}), func(v storage.VersionRow) string { return string(v.Operation) })
		if !slices.Equal(ops, []string{"deleted", "modified"}) {
			t.Fatalf("deleted memory keeps %v, want its deletion and the version before", ops)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: single.ID})); n != 1 {
			t.Fatalf("/single keeps %d versions, want 1", n)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: other.ID})); n != 5 {
			t.Fatalf("another store lost versions: %d left, want 5", n)
		}
		// Pruning again finds nothing.
		if n := f.prune(st.ID, retention.Policy{KeepLast: 2}, 3); n != 0 {
			t.Fatalf("second pass pruned %d", n)
		}

		// The feed refuses a cursor below the pruned sequences, and serves
		// one at or above them.
		after, err := f.s.GetMemoryStore(f.ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Sequences: /ten 1-10 (4 redacted), /gone 11-14, /single 15; the
		// highest pruned is /gone's first modification.
		if after.PrunedThrough != 12 {
			t.Fatalf("pruned through %d, want 12", after.PrunedThrough)
		}
		var pruned *storage.ChangesPrunedError
		if _, err := f.s.ListChanges(f.ctx, st.ID, 0, 10); !errors.As(err, &pruned) || pruned.PrunedThrough != after.PrunedThrough {
			t.Fatalf("feed from 0 after pruning: %v, want a *ChangesPrunedError", err)
		}
		got, latest := f.changes(st.ID, after.PrunedThrough, 10)
		if strs := mapSlice(got, changeString); !slices.Equal(strs, []string{"13 modified /gone", "14 deleted /gone", "15 created /single"}) || latest != 15 {
			t.Fatalf("feed after the pruned range = %v at %d", strs, latest)
		}
	})

	t.Run("MaxAgeKeepsYoungAndNewest", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/m", "old")
		f.updateN(m, 2)
		lone := f.create(st.ID, "/lone", "old and alone")
		f.clock.Advance(2 * time.Hour)
		f.updateN(m, 1)
		if n := f.prune(st.ID, retention.Policy{MaxAge: time.Hour}, 10); n != 3 {
			t.Fatalf("pruned %d, want the 3 versions of /m older than an hour", n)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID})); n != 1 {
			t.Fatalf("/m keeps %d versions, want 1 (the young one)", n)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: lone.ID})); n != 1 {
			t.Fatalf("/lone keeps %d versions, want its only one, however old", n)
		}
	})
}
