package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// cachedQ runs queries as statements prepared once per connection and
// reused, instead of handing SQL text to the driver each time: SQLite then
// parses and plans each query once, where parsing used to be about a
// quarter of the CPU time of a memory write. It wraps a transaction, or
// the database itself when tx is nil, and satisfies queryer.
//
// A statement that fails to prepare is not cached; the query then runs
// unprepared, so its error reaches the caller the usual way.
type cachedQ struct {
	s  *DB
	tx *sql.Tx
}

// cached returns a query runner for tx (nil: outside a transaction).
func (s *DB) cached(tx *sql.Tx) cachedQ { return cachedQ{s: s, tx: tx} }

func (c cachedQ) stmt(ctx context.Context, query string) *sql.Stmt {
	v, ok := c.s.stmts.Load(query)
	if !ok && c.tx != nil {
		// The pool is bounded (maxOpenConns): preparing on the pool here
		// would wait for a second connection while this transaction holds
		// one, and with every connection held by such a transaction none
		// would ever come. So the first use inside a transaction prepares
		// on the transaction's own connection, for this transaction only,
		// and the pool-wide statement is prepared in the background.
		c.s.prepareLater(query)
		st, err := c.tx.PrepareContext(ctx, query)
		if err != nil {
			return nil
		}
		return st
	}
	if !ok {
		st, err := c.s.db.PrepareContext(ctx, query)
		if err != nil {
			return nil
		}
		v = c.s.keep(query, st)
	}
	st := v.(*sql.Stmt)
	if c.tx != nil {
		// Reuses the statement already prepared on the transaction's
		// connection, preparing it there the first time.
		return c.tx.StmtContext(ctx, st)
	}
	return st
}

// keep caches st for query, or returns the statement another goroutine
// cached first (closing st).
func (s *DB) keep(query string, st *sql.Stmt) any {
	if prev, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev
	}
	return st
}

// prepareLater prepares query on the pool in the background, once, so the
// next transaction finds it cached.
func (s *DB) prepareLater(query string) {
	if _, busy := s.preparing.LoadOrStore(query, true); busy {
		return
	}
	if !s.background.start() {
		s.preparing.Delete(query)
		return
	}
	go func() {
		defer s.background.done()
		defer s.preparing.Delete(query)
		if st, err := s.db.PrepareContext(s.background.ctx, query); err == nil {
			s.keep(query, st)
		}
	}()
}

// background is the work the database runs on its own goroutines, which
// Close must wait for: a preparation opens a connection of its own, and
// one opened after Close returned created the database's files again
// while the caller was removing them.
type background struct {
	// ctx ends when stop begins; mu orders start after it.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	wg     sync.WaitGroup
}

// start counts one more piece of work, or answers false once stop began.
func (b *background) start() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return false
	}
	b.wg.Add(1)
	return true
}

func (b *background) done() { b.wg.Done() }

// stop refuses new work, cancels what waits for a connection, and waits
// for all of it to end.
func (b *background) stop() {
	b.mu.Lock()
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
}

func (c cachedQ) direct() queryer {
	if c.tx != nil {
		return c.tx
	}
	return c.s.db
}

func (c cachedQ) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.direct().QueryRowContext(ctx, query, args...)
}

func (c cachedQ) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.direct().QueryContext(ctx, query, args...)
}

func (c cachedQ) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.direct().ExecContext(ctx, query, args...)
}

// closeStatements closes every cached statement (before the database).
func (s *DB) closeStatements() {
	s.stmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		s.stmts.Delete(k)
		return true
	})
}
