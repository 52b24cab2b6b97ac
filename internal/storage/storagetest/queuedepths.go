package storagetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// testQueueDepths: one read counts every open environment's queue as
// WorkStats counts each, empty ones included and archived ones left out.
func testQueueDepths(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	busy, empty, archived := f.env, f.newEnvironment("empty"), f.newEnvironment("archived")
	for range 3 {
		f.newSession(busy)
	}
	if _, _, err := f.claim(busy, "worker-1"); err != nil {
		t.Fatal(err)
	}
	f.newSession(archived)
	if _, err := f.s.UpdateEnvironment(f.ctx, archived.ID, func(e *storage.Environment) error {
		now := f.clock.Now()
		e.ArchivedAt = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.QueueDepths(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.QueueDepth{{EnvironmentID: busy.ID, Depth: 2, Pending: 1}, {EnvironmentID: empty.ID}}
	slices.SortFunc(want, func(a, b storage.QueueDepth) int { return strings.Compare(a.EnvironmentID, b.EnvironmentID) })
	if !slices.Equal(got, want) {
		t.Fatalf("QueueDepths = %+v, want %+v (%s archived)", got, want, archived.ID)
	}
	for _, q := range got {
		if st, err := f.s.WorkStats(f.ctx, q.EnvironmentID); err != nil || st.Depth != q.Depth || st.Pending != q.Pending {
			t.Fatalf("%s: QueueDepths says %+v, WorkStats %+v, %v", q.EnvironmentID, q, st, err)
		}
	}
}
