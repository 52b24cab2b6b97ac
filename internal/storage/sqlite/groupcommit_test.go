package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// Writes that share a transaction keep their own outcome: a write that
// fails after changing something, panics or hits a database error is
// undone alone, the others commit, and each caller hears its own result
// only once the shared transaction is committed.
func TestGroupCommitKeepsEachWriteOutcome(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec(`CREATE TABLE gc (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	const writers = 40
	refused := errors.New("refused on purpose")
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.batch(ctx, func(ctx context.Context, tx *batchTx) error {
				if i%4 == 3 {
					// A failure of the database, before any change.
					var n int
					return tx.QueryRowContext(ctx, `SELECT n FROM no_such_table`).Scan(&n)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO gc (n) VALUES (?)`, i); err != nil {
					return err
				}
				switch i % 4 {
				case 1:
					return refused // after writing: the row must go
				case 2:
					panic(fmt.Sprintf("write %d panics", i))
				}
				return nil
			})
		}()
	}
	wg.Wait()
	// A caller that gave up before its turn is never run.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.batch(gone, func(ctx context.Context, tx *batchTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO gc (n) VALUES (-1)`)
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	db.Close()

	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, err := range errs {
		var n int
		db.db.QueryRow(`SELECT count(*) FROM gc WHERE n = ?`, i).Scan(&n)
		switch i % 4 {
		case 1:
			if !errors.Is(err, refused) || n != 0 {
				t.Errorf("write %d: err %v, %d rows; want its own error and its row undone", i, err, n)
			}
		case 2:
			if err == nil || n != 0 {
				t.Errorf("write %d: err %v, %d rows; want the panic as an error and its row undone", i, err, n)
			}
		case 3:
			if err == nil || n != 0 {
				t.Errorf("write %d: err %v, %d rows; want the failed read's error", i, err, n)
			}
		default:
			if err != nil || n != 1 {
				t.Errorf("write %d: err %v, %d rows; want it committed", i, err, n)
			}
		}
	}
	var n int
	db.db.QueryRow(`SELECT count(*) FROM gc WHERE n = -1`).Scan(&n)
	if n != 0 {
		t.Fatal("a cancelled write ran")
	}
}

// The store counters a batch keeps in memory (storeCounters) count only
// the writes that succeed: refused creates sharing batches with accepted
// ones leave the change feed gap-free and the memory count exact.
func TestGroupCommitCountsOnlySucceededWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "counters"})
	if err != nil {
		t.Fatal(err)
	}
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_test"}
	const writers = 32
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the writers race for the same 4 paths: all but one
			// per path are refused with a conflict.
			p := fmt.Sprintf("/own/%d.md", i)
			if i%2 == 1 {
				p = fmt.Sprintf("/shared/%d.md", i%8)
			}
			_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: p, Content: "x", By: by, MaxMemories: 100})
			var conflict *storage.PathConflictError
			switch {
			case err == nil:
				mu.Lock()
				created++
				mu.Unlock()
			case !errors.As(err, &conflict):
				t.Errorf("create %s: %v", p, err)
			}
		}()
	}
	wg.Wait()
	db.Close()

	if db, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if created != writers/2+4 {
		t.Fatalf("%d creates succeeded, want %d", created, writers/2+4)
	}
	n, err := db.CountMemories(ctx, st.ID)
	if err != nil || n != created {
		t.Fatalf("memory count %d (%v), want %d", n, err, created)
	}
	page, err := db.ListChanges(ctx, st.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if page.Latest != int64(created) || len(page.Changes) != created {
		t.Fatalf("latest sequence %d, %d changes; want %d of each", page.Latest, len(page.Changes), created)
	}
	for i, c := range page.Changes {
		if c.Sequence != int64(i+1) {
			t.Fatalf("change %d has sequence %d: the feed has a gap", i, c.Sequence)
		}
	}
}
