package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/internal/testenv"
)

// A transaction whose BEGIN travels with its first statement commits what
// its statements wrote, rolls all of it back when one fails (the first or
// a later one, looked at or not), and hands its connection back clean: a
// pool of one connection serves every case in turn.
func TestALazyTransactionIsAWholeTransaction(t *testing.T) {
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, testenv.PostgresSchema(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert := func(q querier, id int) error {
		_, err := q.Exec(ctx, `INSERT INTO notes VALUES ($1, 'x')`, id)
		return err
	}

	// Committed: a first statement that returns rows, read to the end,
	// then writes.
	if err := runLazyTx(ctx, pool, "BEGIN", true, func(q *lazyTx) error {
		rs, err := q.Query(ctx, `SELECT generate_series(1, 3)`)
		if err != nil {
			return err
		}
		n := 0
		for rs.Next() {
			n++
		}
		if err := rs.Err(); err != nil || n != 3 {
			t.Errorf("first statement's rows: %d, %v; want 3, nil", n, err)
		}
		return errors.Join(insert(q, 1), insert(q, 2))
	}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 2 {
		t.Fatalf("after a committed transaction: %d notes, want 2", got)
	}

	// A failing first statement: its error is returned, nothing stays.
	err = runLazyTx(ctx, pool, "BEGIN", true, func(q *lazyTx) error { return insert(q, 1) })
	if err == nil {
		t.Fatal("a duplicate key as the first statement returned no error")
	}

	// A failing later statement that fn ignores: COMMIT rolls back, and
	// the caller is told.
	err = runLazyTx(ctx, pool, "BEGIN", true, func(q *lazyTx) error {
		if err := insert(q, 3); err != nil {
			return err
		}
		_ = insert(q, 1)
		return nil
	})
	if !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("commit after an ignored failure: %v, want %v", err, pgx.ErrTxCommitRollback)
	}
	if got := count(); got != 2 {
		t.Fatalf("after two failed transactions: %d notes, want 2", got)
	}

	// QueryRow as the first statement, and no row.
	if err := runLazyTx(ctx, pool, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", false, func(q *lazyTx) error {
		var body string
		if err := q.QueryRow(ctx, `SELECT body FROM notes WHERE id = 9`).Scan(&body); !errors.Is(err, pgx.ErrNoRows) {
			t.Errorf("QueryRow of no row: %v, want pgx.ErrNoRows", err)
		}
		return q.QueryRow(ctx, `SELECT body FROM notes WHERE id = 1`).Scan(&body)
	}); err != nil {
		t.Fatal(err)
	}
	// The read-only BEGIN was the one sent.
	err = runLazyTx(ctx, pool, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", false, func(q *lazyTx) error { return insert(q, 4) })
	if err == nil {
		t.Fatal("a write in a read-only transaction returned no error")
	}
	if got := count(); got != 2 {
		t.Fatalf("after a refused write: %d notes, want 2", got)
	}

	// Deferred statements run in order before the next statement, which
	// sees them, and before the COMMIT.
	if err := runLazyTx(ctx, pool, "BEGIN", true, func(q *lazyTx) error {
		q.Defer(`INSERT INTO notes VALUES ($1, 'x')`, 5)
		var n int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM notes`).Scan(&n); err != nil || n != 3 {
			t.Errorf("a read after a deferred insert: %d, %v; want 3, nil", n, err)
		}
		q.Defer(`INSERT INTO notes VALUES ($1, 'x')`, 6)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 4 {
		t.Fatalf("after deferred inserts: %d notes, want 4", got)
	}
	// A deferred statement that fails at the COMMIT fails the transaction,
	// and the statements before it are rolled back with it.
	err = runLazyTx(ctx, pool, "BEGIN", true, func(q *lazyTx) error {
		q.Defer(`INSERT INTO notes VALUES ($1, 'x')`, 7)
		q.Defer(`INSERT INTO notes VALUES ($1, 'x')`, 1)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("a deferred duplicate key: %v, want its error", err)
	}
	if got := count(); got != 4 {
		t.Fatalf("at the end: %d notes, want 4", got)
	}
}
