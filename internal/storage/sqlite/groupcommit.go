package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/memstore/memstore/internal/storage"
)

// Group commit. SQLite lets one writer in at a time; writers that arrive
// together used to queue on the file lock, each sleeping in the busy
// handler and then paying for its own BEGIN and COMMIT. The committer is
// one goroutine that takes every write waiting at that moment and runs
// them in one transaction, and answers each of them only after the COMMIT
// returned: a write is acknowledged exactly when it is as durable as
// before, and concurrent writers share the cost of one commit.
//
// A write refused by its checks (not found, conflict, precondition…) has
// changed nothing, so the others go on. A write that fails otherwise (after
// changing something, an I/O error, a panic) cannot be undone alone without a
// savepoint per write, and savepoints cost every write a copy of each page
// it touches into the statement journal: instead the transaction is rolled
// back, that write gets its error, and the others run again in a new one.
// So each write still succeeds or fails on its own.

// maxBatch bounds the writes of one transaction, so that one batch cannot
// hold the write lock for long.
const maxBatch = 64

// batchFn is a write run by the committer. It must use the ctx it is given
// (not the caller's): a caller's cancellation must not interrupt a
// statement of a transaction that other writes share. It makes its checks
// before its changes, and its changes with tx.ExecContext, which is how
// the committer knows whether a failed write left anything to undo. It may
// run more than once (see above), so it sets its results on each run.
type batchFn func(ctx context.Context, tx *batchTx) error

// batchTx is the shared transaction as a write sees it: statements run
// prepared (cachedQ), and the memory-store counters the batch keeps.
type batchTx struct {
	cachedQ
	stores storeCounters
	// changed: the running write has executed a statement that may have
	// changed the database.
	changed bool
}

// ExecContext runs a statement that changes the database.
func (w *batchTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	w.changed = true
	return w.cachedQ.ExecContext(ctx, query, args...)
}

type commitRequest struct {
	ctx  context.Context
	fn   batchFn
	done chan error
}

type committer struct {
	requests chan commitRequest
	quit     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

func (s *DB) startCommitter() {
	s.commits.requests = make(chan commitRequest)
	s.commits.quit = make(chan struct{})
	s.commits.stopped = make(chan struct{})
	go s.runCommits()
}

// stopCommitter ends the committer once the batch it runs is answered.
func (s *DB) stopCommitter() {
	s.commits.stopOnce.Do(func() { close(s.commits.quit) })
	<-s.commits.stopped
}

// batch runs fn as one write transaction of its own, from the caller's
// point of view, sharing the actual SQLite transaction with whatever other
// writes are waiting. It returns fn's error, or the commit's.
func (s *DB) batch(ctx context.Context, fn batchFn) error {
	req := commitRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.commits.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.commits.quit:
		return fmt.Errorf("sqlite: the database is closed")
	}
	// Once handed over, the write runs to its end whatever ctx says, so
	// its outcome is known when batch returns.
	return <-req.done
}

func (s *DB) runCommits() {
	defer close(s.commits.stopped)
	for {
		var first commitRequest
		select {
		case first = <-s.commits.requests:
		case <-s.commits.quit:
			return
		}
		s.commitBatch(first)
	}
}

// pendingBatch is the writes of one batch and what is known of each.
type pendingBatch struct {
	reqs []commitRequest
	// own[i] is what reqs[i] did on its own when it last ran; settled[i]:
	// that outcome stands whatever the transaction does (it failed
	// halfway, and its changes were rolled back).
	own     []error
	settled []bool
}

func (b *pendingBatch) add(r commitRequest) {
	b.reqs, b.own, b.settled = append(b.reqs, r), append(b.own, nil), append(b.settled, false)
}

// finish answers each write with its own error, or with the batch's when
// it has none (not run, or run but not committed).
func (b *pendingBatch) finish(batchErr error) {
	for i, r := range b.reqs {
		err := batchErr
		if b.own[i] != nil {
			err = b.own[i]
		}
		r.done <- err
	}
}

// commitBatch runs first and the writes that join it to one COMMIT, then
// answers each; a write failing halfway costs the others one more run.
func (s *DB) commitBatch(first commitRequest) {
	s.writer.Lock()
	defer s.writer.Unlock()
	b := &pendingBatch{}
	b.add(first)
	for {
		again, err := s.runBatch(context.Background(), b)
		if !again {
			b.finish(err)
			return
		}
	}
}

// runBatch opens a transaction, runs the batch's unsettled writes in it
// and keeps taking the writes that wait, including those that arrived
// while the previous ones ran, until none waits or maxBatch is reached;
// then it commits. Under load a batch thus grows to whatever arrives
// during its own execution, not only to what was queued when it started.
// again reports a write that failed halfway: the transaction was rolled
// back and the batch must run again without it.
func (s *DB) runBatch(ctx context.Context, b *pendingBatch) (again bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	w := &batchTx{cachedQ: s.cached(tx), stores: newStoreCounters()}
	for i := 0; i < len(b.reqs); i++ {
		if b.settled[i] {
			continue
		}
		w.changed = false
		b.own[i] = runWrite(ctx, w, b.reqs[i])
		if b.own[i] != nil && (w.changed || !storage.IsRefusal(b.own[i])) {
			tx.Rollback()
			b.settled[i] = true
			return true, nil
		}
		w.stores.settle(b.own[i] == nil)
		if len(b.reqs) < maxBatch {
			select {
			case next := <-s.commits.requests:
				b.add(next)
			default:
			}
		}
	}
	if err := w.stores.flush(ctx, w); err != nil {
		tx.Rollback()
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqlite: commit: %w", err)
	}
	return false, nil
}

// runWrite runs r's write unless its caller gave up while it waited,
// turning a panic into an error so that one bad write cannot take the
// committer, and with it every writer, down.
func runWrite(ctx context.Context, w *batchTx, r commitRequest) (err error) {
	if err := r.ctx.Err(); err != nil {
		return err // given up while waiting: never run
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite: write panicked: %v", p)
		}
	}()
	return r.fn(ctx, w)
}
