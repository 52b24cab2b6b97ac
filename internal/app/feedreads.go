package app

import (
	"context"
	"sync"

	"github.com/memstore/memstore/internal/storage"
)

// feedReads lets the change feed's long polls of one store that wake
// together read it once: a write wakes every poll of its store, and those
// that ask the same question (the same cursor and limit, as workers that
// follow a store in step do) share one query and its answer rather than
// each running it. A read is joined only by polls that come before the
// store's next wake: one started before a write was woken for may not
// hold that write, and a poll that joined it would wait for a wake that
// already happened.
type feedReads struct {
	mu       sync.Mutex
	inFlight map[feedQuestion]*feedRead
}

type feedQuestion struct {
	storeID string
	after   int64
	limit   int
	// wake is the store's wake channel when the read started: the
	// question's generation.
	wake <-chan struct{}
}

type feedRead struct {
	done chan struct{}
	page storage.ChangePage
	err  error
}

// ListChanges answers one page of storeID's change feed after the cursor,
// joining an identical read already running. The page is shared: callers
// must not change it.
func (m *Memories) ListChanges(ctx context.Context, storeID string, after int64, limit int) (storage.ChangePage, error) {
	q := feedQuestion{storeID, after, limit, m.changes.wait(storeID)}
	r := &m.reads
	r.mu.Lock()
	if f, ok := r.inFlight[q]; ok {
		r.mu.Unlock()
		select {
		case <-f.done:
			return f.page, f.err
		case <-ctx.Done():
			return storage.ChangePage{}, ctx.Err()
		}
	}
	f := &feedRead{done: make(chan struct{})}
	r.inFlight[q] = f
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inFlight, q)
		r.mu.Unlock()
		close(f.done)
	}()
	// The read is the joiners' as much as this caller's: it does not end
	// when this caller goes.
	f.page, f.err = m.app.store.ListChanges(context.WithoutCancel(ctx), storeID, after, limit)
	if ctx.Err() != nil {
		return storage.ChangePage{}, ctx.Err()
	}
	return f.page, f.err
}
