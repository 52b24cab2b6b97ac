package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Every connection of the bounded pool held by a read transaction that
// runs a query not yet prepared: each must prepare on its own connection
// (preparing on the pool waited for a connection none would give back).
func TestStatementsPrepareInsideAFullPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const conns = 8
	db, err := Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), Options{MaxConnections: conns})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var all, held sync.WaitGroup
	held.Add(conns)
	errs := make(chan error, conns)
	for i := range conns {
		all.Add(1)
		go func() {
			defer all.Done()
			errs <- db.readTx(ctx, func(tx *sql.Tx) error {
				held.Done()
				held.Wait() // every connection is now in a transaction
				var n int
				query := fmt.Sprintf("SELECT %d + count(*) FROM schema_migrations", i%4)
				if err := db.cached(tx).QueryRowContext(ctx, query).Scan(&n); err != nil {
					return fmt.Errorf("query %q: %w", query, err)
				}
				return nil
			})
		}()
	}
	all.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The statements were then prepared on the pool for later use.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		db.stmts.Range(func(any, any) bool { n++; return true })
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 statements cached after the transactions ended", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A statement prepared in the background when a transaction first ran it
// must not outlive Close: the preparation opened a connection of its own,
// which could create the database's files again while the caller removed
// them (a test's temporary folder failed to go, "directory not empty").
func TestCloseWaitsForStatementsPreparedInTheBackground(t *testing.T) {
	ctx := context.Background()
	for i := range 20 {
		dir := t.TempDir()
		db, err := Open(ctx, filepath.Join(dir, "memstore.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.prepareLater(fmt.Sprintf("SELECT %d + count(*) FROM schema_migrations", i))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db.preparing.Range(func(query, _ any) bool {
			t.Fatalf("round %d: Close returned while %q was still being prepared in the background", i, query)
			return false
		})
		db.stmts.Range(func(query, _ any) bool {
			t.Fatalf("round %d: a statement for %q was kept after Close, never to be closed", i, query)
			return false
		})
	}
}

// Close does not wait for a background preparation that waits for a
// connection: it cancels it. With the pool's one connection held by a
// transaction, a preparation would otherwise wait as long as the
// transaction, and Close with it.
func TestCloseCancelsAPreparationWaitingForAConnection(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), Options{MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- db.readTx(ctx, func(*sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	db.prepareLater("SELECT count(*) FROM schema_migrations")
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Close waited for a background preparation that waited for the connection a transaction held")
	}
	close(release)
	<-txDone
}
