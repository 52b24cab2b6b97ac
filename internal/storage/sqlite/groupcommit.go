package sqlite

import (
	"context"
	"fmt"
	"sync"
)

// Group commit. SQLite lets one writer in at a time; writers that arrive
// together used to queue on the file lock, each sleeping in the busy
// handler and then paying for its own BEGIN and COMMIT. The committer is
// one goroutine that takes every write waiting at that moment and runs
// them in one transaction, each inside its own savepoint so that a write
// that fails is undone alone, and answers each of them only after the
// COMMIT returned: a write is acknowledged exactly when it is as durable as
// before, and concurrent writers share the cost of one commit.

// maxBatch bounds the writes of one transaction, so that one batch cannot
// hold the write lock for long.
const maxBatch = 64

// batchFn is a write run by the committer. It must use the ctx it is given
// (not the caller's): a caller's cancellation must not interrupt a
// statement of a transaction that other writes share.
type batchFn func(ctx context.Context, tx *batchTx) error

// batchTx is the shared transaction as a write sees it: statements run
// prepared (cachedQ), and the memory-store counters the batch keeps.
type batchTx struct {
	cachedQ
	stores storeCounters
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

// commitBatch opens a transaction with first and keeps taking the writes
// that wait, including those that arrived while the previous ones ran,
// until none waits or maxBatch is reached; then it commits and answers
// each. Under load a batch thus grows to whatever arrives during its own
// execution, not only to what was queued when it started.
func (s *DB) commitBatch(first commitRequest) {
	ctx := context.Background()
	reqs := []commitRequest{first}
	// errs[i] is what reqs[i] did on its own; finish answers each with
	// that, or with the batch's error when it has none (not run yet, or
	// run but not committed).
	var errs []error
	finish := func(batchErr error) {
		for i, r := range reqs {
			err := batchErr
			if i < len(errs) && errs[i] != nil {
				err = errs[i]
			}
			r.done <- err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		finish(err)
		return
	}
	// The savepoint statements run as prepared statements too: three per
	// write would otherwise be parsed each time.
	w := &batchTx{cachedQ: s.cached(tx), stores: newStoreCounters()}
	for i := 0; i < len(reqs); i++ {
		own, err := runInSavepoint(ctx, w, reqs[i])
		w.stores.settle(own == nil && err == nil)
		errs = append(errs, own)
		if err != nil {
			tx.Rollback()
			finish(err)
			return
		}
		if len(reqs) < maxBatch {
			select {
			case next := <-s.commits.requests:
				reqs = append(reqs, next)
			default:
			}
		}
	}
	if err := w.stores.flush(ctx, w); err != nil {
		tx.Rollback()
		finish(err)
		return
	}
	if err := tx.Commit(); err != nil {
		finish(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	finish(nil)
}

// runInSavepoint runs r inside a savepoint of tx and returns r's own
// outcome; a failed write is undone alone. err is set when the
// transaction itself is lost, and the whole batch with it.
func runInSavepoint(ctx context.Context, w *batchTx, r commitRequest) (own, err error) {
	if err := r.ctx.Err(); err != nil {
		return err, nil // given up while waiting: never run
	}
	if _, err := w.ExecContext(ctx, `SAVEPOINT write`); err != nil {
		return nil, fmt.Errorf("sqlite: open a savepoint: %w", err)
	}
	if own = runGuarded(ctx, r.fn, w); own != nil {
		// If SQLite already rolled the whole transaction back (some
		// errors do), the savepoint is gone and the batch fails as one:
		// nothing of it is committed.
		if _, err := w.ExecContext(ctx, `ROLLBACK TO write`); err != nil {
			return own, fmt.Errorf("sqlite: a write of this batch failed (%v) and took the transaction with it: %w", own, err)
		}
	}
	if _, err := w.ExecContext(ctx, `RELEASE write`); err != nil {
		return own, fmt.Errorf("sqlite: release a savepoint: %w", err)
	}
	return own, nil
}

// runGuarded calls fn, turning a panic into an error so that one bad write
// cannot take the committer, and with it every writer, down.
func runGuarded(ctx context.Context, fn batchFn, tx *batchTx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite: write panicked: %v", p)
		}
	}()
	return fn(ctx, tx)
}
