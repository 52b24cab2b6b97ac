package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
)

// guessingStore opens n replicas on one database, the first keeping the
// database's clock for an hour (a slow run must not make its batches read
// for the clock), and makes a memory store on it.
func guessingStore(t *testing.T, n int, name string) ([]*postgres.DB, string) {
	t.Helper()
	rs := replicas(t, n)
	rs[0].KeepClockFor(time.Hour)
	st, err := rs[0].CreateMemoryStore(t.Context(), storage.NewMemoryStore{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return rs, st.ID
}

// Writes a replica can foresee (its own stores, new paths, memories it
// wrote last) commit on their guesses, one round trip each, and land as
// writes that read first do: the feed gap-free, counts and heads exact.
func TestWritesThisReplicaForesawCommitOnTheirGuesses(t *testing.T) {
	rs, storeID := guessingStore(t, 1, "guessed")
	db, ctx := rs[0], t.Context()
	// The first write reads: nothing of the store is known yet.
	first, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/first.md", Content: "v0", By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	if n := db.GuessedBatches(); n != 0 {
		t.Fatalf("%d batches guessed before the store's counters were known", n)
	}
	const writes = 10
	head := first
	for i := range writes {
		if _, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: fmt.Sprintf("/d/%d.md", i), Content: "x", By: benchBy}); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprint("v", i+1)
		if head, _, err = db.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: storeID, MemoryID: first.ID, Content: &v, IfSHA256: head.ContentSHA256, By: benchBy}); err != nil {
			t.Fatal(err)
		}
	}
	if n, wrong := db.GuessedBatches(), db.WrongGuesses(); n != 2*writes || wrong != 0 {
		t.Fatalf("%d batches guessed, %d wrong; want %d, 0", n, wrong, 2*writes)
	}
	feedIsGapFree(t, db, storeID, 1+2*writes)
	if n, err := db.CountMemories(ctx, storeID); err != nil || n != 1+writes {
		t.Fatalf("count %d (%v), want %d", n, err, 1+writes)
	}
	got, err := db.GetMemory(ctx, storeID, first.ID)
	if err != nil || got.VersionID != head.VersionID || *got.Content != fmt.Sprint("v", writes) || !got.UpdatedAt.Equal(head.UpdatedAt) || !got.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("memory %+v (%v), want the last update's head %+v", got, err, head)
	}
}

// A guess the database finds wrong costs its batch a run that reads, and
// the write answers what reading first would have: after another replica
// wrote the store, a taken path, a memory changed elsewhere, a store
// archived elsewhere.
func TestAWrongGuessRunsTheBatchAgainReading(t *testing.T) {
	rs, storeID := guessingStore(t, 2, "two writers")
	a, b, ctx := rs[0], rs[1], t.Context()
	create := func(db *postgres.DB, path string) (storage.MemoryRow, error) {
		return db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: path, Content: path, By: benchBy})
	}
	// wrongOnce runs step on a, which must guess wrong exactly once.
	wrongOnce := func(what string, step func() error) error {
		t.Helper()
		a.GuessAgain()
		before := a.WrongGuesses()
		err := step()
		if n := a.WrongGuesses() - before; n != 1 {
			t.Fatalf("%s: %d wrong guesses, want 1", what, n)
		}
		return err
	}
	m, err := create(a, "/m.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(a, "/a1.md"); err != nil { // a guessed batch: a knows the store
		t.Fatal(err)
	}
	if _, err := create(b, "/b1.md"); err != nil {
		t.Fatal(err)
	}
	if err := wrongOnce("counters moved by another replica", func() error { _, err := create(a, "/a2.md"); return err }); err != nil {
		t.Fatal(err)
	}

	err = wrongOnce("a taken path", func() error { _, err := create(a, "/a2.md"); return err })
	var conflict *storage.PathConflictError
	if !errors.As(err, &conflict) || conflict.Path != "/a2.md" {
		t.Fatalf("creating a taken path: %v, want a conflict at /a2.md", err)
	}

	// b changes m, then a learns the store's counters again (a create that
	// guesses them wrong), but its own memory of m is stale.
	v2 := "v2"
	changed, _, err := b.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: storeID, MemoryID: m.ID, Content: &v2, By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	if err := wrongOnce("counters moved again", func() error { _, err := create(a, "/a3.md"); return err }); err != nil {
		t.Fatal(err)
	}
	v3 := "v3"
	err = wrongOnce("a memory changed elsewhere", func() error {
		_, _, err := a.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: storeID, MemoryID: m.ID, Content: &v3, IfSHA256: m.ContentSHA256, By: benchBy})
		return err
	})
	var stale *storage.PreconditionFailedError
	if !errors.As(err, &stale) || stale.CurrentSHA256 != changed.ContentSHA256 {
		t.Fatalf("updating on a stale hash: %v, want a failed precondition naming %s", err, changed.ContentSHA256)
	}

	if _, err := create(a, "/a4.md"); err != nil { // a knows the counters again
		t.Fatal(err)
	}
	if _, err := b.ArchiveMemoryStore(ctx, storeID); err != nil {
		t.Fatal(err)
	}
	err = wrongOnce("a store archived elsewhere", func() error { _, err := create(a, "/a5.md"); return err })
	if !errors.Is(err, storage.ErrStoreArchived) {
		t.Fatalf("creating in a store archived elsewhere: %v, want it refused as archived", err)
	}
	// m, a1, b1, a2, the update, a3, a4.
	feedIsGapFree(t, b, storeID, 7)
	if n, err := b.CountMemories(ctx, storeID); err != nil || n != 6 {
		t.Fatalf("count %d (%v), want 6", n, err)
	}
}

// Writers that batch together have their guessed path checks checked
// together (one statement for the paths of one depth): one of them
// creating a taken path makes the batch run again reading, and only that
// write is refused.
func TestATakenPathAmongGuessedCreatesIsRefusedAlone(t *testing.T) {
	rs, storeID := guessingStore(t, 1, "crowd")
	db, ctx := rs[0], t.Context()
	taken, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/g/taken.md", Content: "first", By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		path := fmt.Sprintf("/g/%d.md", w)
		if w == 0 {
			path = taken.Path
		}
		wg.Go(func() {
			_, errs[w] = db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: path, Content: "x", By: benchBy})
		})
	}
	wg.Wait()
	var conflict *storage.PathConflictError
	if !errors.As(errs[0], &conflict) || conflict.MemoryID != taken.ID {
		t.Fatalf("the create of a taken path: %v, want a conflict naming %s", errs[0], taken.ID)
	}
	for w, err := range errs[1:] {
		if err != nil {
			t.Fatalf("writer %d: %v", w+1, err)
		}
	}
	if n := db.WrongGuesses(); n != 1 {
		t.Fatalf("%d wrong guesses, want 1 (the taken path's)", n)
	}
	feedIsGapFree(t, db, storeID, writers)
	if n, err := db.CountMemories(ctx, storeID); err != nil || n != writers {
		t.Fatalf("count %d (%v), want %d", n, err, writers)
	}
}

// A write's reads that an earlier write of its own transaction changed are
// read, not guessed: a guess, checked before the transaction's writes, would
// miss them. Two creates that make /x a file and a directory, and two
// updates guarded by the same hash, each in one transaction: the second of
// each is refused, and the transaction stores nothing.
func TestReadsAnEarlierWriteChangedAreNotGuessed(t *testing.T) {
	rs, storeID := guessingStore(t, 1, "together")
	db, ctx := rs[0], t.Context()
	m, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/m.md", Content: "v0", By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	// twice runs write with a, then b, in one transaction.
	twice := func(write func(tx storage.MemoryTx, arg string) error, a, b string) error {
		return db.WriteMemoriesTogether(ctx, storeID, func(tx storage.MemoryTx) error {
			if err := write(tx, a); err != nil {
				return err
			}
			return write(tx, b)
		})
	}
	create := func(tx storage.MemoryTx, path string) error {
		in := storage.NewMemory{StoreID: storeID, Path: path, Content: path, By: benchBy}
		_, err := storage.CreateMemoryIn(ctx, tx, in, in.ContentSHA256())
		return err
	}
	err = twice(create, "/x", "/x/y.md")
	var conflict *storage.PathConflictError
	if !errors.As(err, &conflict) || conflict.Path != "/x" {
		t.Fatalf("/x and then /x/y.md together: %v, want a conflict at /x", err)
	}
	update := func(tx storage.MemoryTx, content string) error {
		in := storage.MemoryUpdate{StoreID: storeID, MemoryID: m.ID, Content: &content, IfSHA256: m.ContentSHA256, By: benchBy}
		_, _, err := storage.UpdateMemoryIn(ctx, tx, in, in.ContentSHA256())
		return err
	}
	err = twice(update, "v1", "v2")
	var stale *storage.PreconditionFailedError
	if !errors.As(err, &stale) {
		t.Fatalf("two updates guarded by one hash together: %v, want the second's precondition failed", err)
	}
	if n, wrong := db.GuessedBatches(), db.WrongGuesses(); n != 0 || wrong != 0 {
		t.Fatalf("%d batches committed on guesses, %d guessed wrong; want none: every such write reads", n, wrong)
	}
	got, err := db.GetMemory(ctx, storeID, m.ID)
	if err != nil || *got.Content != "v0" {
		t.Fatalf("memory %+v (%v), want v0 unchanged", got, err)
	}
	if _, err := db.GetMemoryAt(ctx, storeID, "/x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("/x after its transaction was refused: %v, want not found", err)
	}
	feedIsGapFree(t, db, storeID, 1)
}

// Guesses of rows deleted by another replica are found wrong: a memory
// deleted elsewhere is not deleted again (its count and feed untouched),
// and a store deleted elsewhere takes no write.
func TestGuessesOfRowsDeletedElsewhereAreFoundWrong(t *testing.T) {
	rs, storeID := guessingStore(t, 2, "deleted elsewhere")
	a, b, ctx := rs[0], rs[1], t.Context()
	m, err := a.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/m.md", Content: "v0", By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteMemory(ctx, storeID, m.ID, "", benchBy); err != nil {
		t.Fatal(err)
	}
	// a learns the store's counters again (its guess of them is wrong), but
	// still remembers m as it wrote it.
	if _, err := a.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/n.md", Content: "n", By: benchBy}); err != nil {
		t.Fatal(err)
	}
	a.GuessAgain()
	wrong := a.WrongGuesses()
	if err := a.DeleteMemory(ctx, storeID, m.ID, "", benchBy); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleting a memory deleted elsewhere: %v, want not found", err)
	}
	if n := a.WrongGuesses() - wrong; n != 1 {
		t.Fatalf("%d wrong guesses deleting a memory deleted elsewhere, want 1", n)
	}
	feedIsGapFree(t, b, storeID, 3) // m created and deleted, /n.md created
	if n, err := b.CountMemories(ctx, storeID); err != nil || n != 1 {
		t.Fatalf("count %d (%v), want 1", n, err)
	}

	if _, err := a.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/o.md", Content: "o", By: benchBy}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteMemoryStore(ctx, storeID); err != nil {
		t.Fatal(err)
	}
	a.GuessAgain()
	wrong = a.WrongGuesses()
	if _, err := a.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: "/p.md", Content: "p", By: benchBy}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("creating in a store deleted elsewhere: %v, want not found", err)
	}
	if n := a.WrongGuesses() - wrong; n != 1 {
		t.Fatalf("%d wrong guesses creating in a store deleted elsewhere, want 1", n)
	}
}
