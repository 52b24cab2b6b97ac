package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// Writes that share a transaction keep their own outcome: a failing or
// panicking write is undone alone, the others commit, and each caller hears
// its own result only once the shared transaction is committed.
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
			errs[i] = db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
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
	if err := db.batch(gone, func(ctx context.Context, tx *sql.Tx) error {
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
