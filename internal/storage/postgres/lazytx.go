package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction whose BEGIN is sent in one pipeline with its
// first statement instead of on its own: a short transaction (a claim, a
// send) saves one round trip to the database, and the backend one message
// exchange. What runs is the same BEGIN, statements and COMMIT, in order;
// a statement that fails leaves the transaction aborted, as it would have.
type lazyTx struct {
	c     *pgxpool.Conn
	begin string
	begun bool
	// deferred are statements whose results nobody reads, sent in one
	// pipeline with the next statement or the COMMIT.
	deferred []deferredStatement
}

type deferredStatement struct {
	sql  string
	args []any
	// read, when set, reads the statement's rows once they arrive.
	read func(pgx.Rows) error
}

// Defer queues a statement whose row count the caller does not look at:
// it is sent, in order, in the pipeline of the next statement or of the
// COMMIT, and its error fails the transaction there. Its arguments are
// encoded when it is sent: a caller must not change what they point to.
func (t *lazyTx) Defer(sql string, args ...any) {
	t.deferred = append(t.deferred, deferredStatement{sql: sql, args: args})
}

// DeferRead is Defer for a statement whose rows read reads, once they
// arrive; read's error fails the transaction as the statement's would.
func (t *lazyTx) DeferRead(sql string, args []any, read func(pgx.Rows) error) {
	t.deferred = append(t.deferred, deferredStatement{sql: sql, args: args, read: read})
}

// runLazyTx runs fn in one transaction on a connection of pool, opened by
// begin, committing when fn returns nil and rolling back otherwise. A
// transaction that writes and whose COMMIT went out but whose answer did
// not come back may have committed: it answers storage.ErrOutcomeUnknown
// and is not run again. A read-only one changed nothing.
func runLazyTx(ctx context.Context, pool *pgxpool.Pool, begin string, writes bool, fn func(*lazyTx) error) (err error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The pool closes a connection it gets back in a transaction, so a
	// ROLLBACK that fails (a broken connection) loses nothing.
	defer c.Release()
	t := &lazyTx{c: c, begin: begin}
	if err := fn(t); err != nil {
		if t.begun {
			t.rollback(ctx)
		}
		return err
	}
	if !t.begun && len(t.deferred) == 0 {
		return nil
	}
	br, err := t.pipeline(ctx, "COMMIT", nil)
	if err != nil {
		// A statement's answer ahead of the COMMIT: refused, PostgreSQL
		// skipped the COMMIT; the connection lost, it may have run.
		if writes && connectionLost(err) {
			return outcomeUnknown("the COMMIT of a transaction", readBackWrites, err)
		}
		t.rollback(ctx)
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if writes && answerLost(err) {
			return outcomeUnknown("the COMMIT of a transaction", readBackWrites, err)
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		// PostgreSQL answers COMMIT of an aborted transaction by rolling
		// it back: a statement failed that fn did not look at.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// rollbackTimeout bounds a ROLLBACK sent after a failure, also when the
// request that ran the transaction was cancelled; a connection it cannot
// reach is closed by the pool, which drops a connection handed back inside
// a transaction.
const rollbackTimeout = 5 * time.Second

func (t *lazyTx) rollback(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_, _ = t.c.Exec(ctx, "ROLLBACK")
}

// pipeline sends, in one pipeline, BEGIN if the transaction has not begun,
// the deferred statements and sql, reads the answers to all but sql and
// returns the results with sql's next to read.
func (t *lazyTx) pipeline(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	return t.send(ctx, &deferredStatement{sql: sql, args: args})
}

// send sends, in one pipeline, BEGIN if the transaction has not begun, the
// deferred statements and last when not nil, and reads the answers to all
// but last, whose results are next to read.
func (t *lazyTx) send(ctx context.Context, last *deferredStatement) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	for _, d := range t.deferred {
		b.Queue(d.sql, d.args...)
	}
	if last != nil {
		b.Queue(last.sql, last.args...)
	}
	br := t.c.SendBatch(ctx, b)
	if !t.begun {
		t.begun = true
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("begin a transaction: %w", err)
		}
	}
	deferred := t.deferred
	t.deferred = nil
	for _, d := range deferred {
		if err := d.result(br); err != nil {
			br.Close()
			return nil, fmt.Errorf("%s: %w", firstLine(d.sql), err)
		}
	}
	return br, nil
}

// result reads the deferred statement's answer from br.
func (d deferredStatement) result(br pgx.BatchResults) error {
	if d.read == nil {
		_, err := br.Exec()
		return err
	}
	rs, err := br.Query()
	if err != nil {
		return err
	}
	defer rs.Close()
	if err := d.read(rs); err != nil {
		return err
	}
	rs.Close()
	return rs.Err()
}

// firstLine is a statement's first line, to say which deferred one failed.
func firstLine(sql string) string {
	if i := strings.IndexByte(sql, '\n'); i >= 0 {
		return sql[:i]
	}
	return sql
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun && len(t.deferred) == 0 {
		return t.c.Exec(ctx, sql, args...)
	}
	br, err := t.pipeline(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun && len(t.deferred) == 0 {
		return t.c.Query(ctx, sql, args...)
	}
	br, err := t.pipeline(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rs, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &firstRows{Rows: rs, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rs, err := t.Query(ctx, sql, args...)
	if err != nil {
		return failedRow{err}
	}
	return firstRow{rs}
}

// firstRows are the rows of a pipeline's last statement: closing them
// closes the pipeline's results too, which reads what is left of them.
type firstRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closed   bool
	closeErr error
}

func (r *firstRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.closeErr = r.br.Close()
}

func (r *firstRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *firstRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// firstRow is QueryRow's answer over firstRows: the first row, and
// pgx.ErrNoRows when there is none.
type firstRow struct{ rs pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rs.Close()
	if !r.rs.Next() {
		if err := r.rs.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rs.Scan(dest...); err != nil {
		return err
	}
	r.rs.Close()
	return r.rs.Err()
}

type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }
