package memsync

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// A store keeps its state compactly between syncs; whatever a path
// records must come back exactly, and a path moves between the two forms
// as its record grows and shrinks.
func TestKeptStateKeepsEveryRecord(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	s := State{
		"/base.md":     {Base: "aa"},
		"/held.md":     {Base: "aa", Held: "bb"},
		"/sent.md":     {Sent: "cc"},
		"/missing.md":  {Base: "aa", MissingSince: since},
		"/deleting.md": {Base: "aa", DeleteSent: true},
		"/removing.md": {Base: "aa", RemoveStarted: true},
		"/fetching.md": {Fetching: "dd"},
	}
	k := keepState(s)
	if got := k.full(); !maps.Equal(got, s) {
		t.Fatalf("kept and expanded:\n%v\nwant\n%v", got, s)
	}
	if len(k.bases) != 1 || len(k.rest) != len(s)-1 {
		t.Fatalf("%d paths kept as a bare base and %d as records, want 1 and %d", len(k.bases), len(k.rest), len(s)-1)
	}
	k.set("/base.md", PathState{Base: "aa", Sent: "ee"})
	k.set("/held.md", PathState{Base: "ff"})
	k.set("/sent.md", PathState{})
	want := maps.Clone(s)
	want["/base.md"] = PathState{Base: "aa", Sent: "ee"}
	want["/held.md"] = PathState{Base: "ff"}
	delete(want, "/sent.md")
	if got := k.full(); !maps.Equal(got, want) {
		t.Fatalf("after set:\n%v\nwant\n%v", got, want)
	}
	if ps, ok := k.get("/held.md"); !ok || ps != (PathState{Base: "ff"}) {
		t.Fatalf("get /held.md = %+v, %v", ps, ok)
	}
	if _, ok := k.get("/sent.md"); ok {
		t.Fatal("a path set to the zero state is still there")
	}
}

// The listing copy finds a changed memory by looking through itself for a
// few changes and through an index for many; both ways must end the same.
func TestRemoteCacheAppliesBatchesOfAnySize(t *testing.T) {
	start := Remote{}
	for i := range 30 {
		start[fmt.Sprintf("/m%02d.md", i)] = RemoteMemory{ID: fmt.Sprintf("mem_%02d", i), SHA256: "s0"}
	}
	str := func(s string) *string { return &s }
	var changes []api.MemoryChange
	for i := range 10 {
		// Renamed, then changed again at the new path.
		id := fmt.Sprintf("mem_%02d", i)
		changes = append(changes,
			api.MemoryChange{MemoryID: id, Operation: api.OperationModified, Path: str(fmt.Sprintf("/moved/m%02d.md", i)), ContentSHA256: str("s1")},
			api.MemoryChange{MemoryID: id, Operation: api.OperationModified, Path: str(fmt.Sprintf("/moved/m%02d.md", i)), ContentSHA256: str("s2")})
	}
	for i := 10; i < 15; i++ {
		changes = append(changes, api.MemoryChange{MemoryID: fmt.Sprintf("mem_%02d", i), Operation: api.OperationDeleted})
	}
	// A new memory at a path a deleted one left; a redacted path.
	changes = append(changes,
		api.MemoryChange{MemoryID: "mem_new", Operation: api.OperationCreated, Path: str("/m10.md"), ContentSHA256: str("s3")},
		api.MemoryChange{MemoryID: "mem_20", Operation: api.OperationModified})
	if len(changes) <= indexedBatch {
		t.Fatalf("the batch has %d changes; it must be larger than %d to use the index", len(changes), indexedBatch)
	}

	var one, batch remoteCache
	one.reset(maps.Clone(start))
	batch.reset(maps.Clone(start))
	for _, ch := range changes {
		one.apply([]api.MemoryChange{ch})
	}
	batch.apply(changes)
	if !maps.Equal(one.remote, batch.remote) {
		t.Fatalf("one change at a time:\n%v\nall at once:\n%v", one.remote, batch.remote)
	}
	if got := one.remote["/moved/m03.md"]; got != (RemoteMemory{ID: "mem_03", SHA256: "s2"}) {
		t.Fatalf("renamed memory: %+v", got)
	}
	if _, ok := one.remote["/m03.md"]; ok {
		t.Fatal("a renamed memory is still at its old path")
	}
	if got := one.remote["/m10.md"]; got.ID != "mem_new" {
		t.Fatalf("a path a deleted memory left holds %+v, want mem_new", got)
	}
	if _, ok := one.remote["/m20.md"]; ok || len(one.remote) != 30-5 {
		t.Fatalf("after the redacted change and 5 deletions and 1 create: %d memories, want 25", len(one.remote))
	}
}
