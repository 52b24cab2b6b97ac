package sqlite

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints in the background. SQLite copies the WAL back into the
// database file (a checkpoint) from inside the COMMIT that takes the WAL
// past wal_autocheckpoint pages (1,000): that commit writes up to 4 MiB
// into the database file and fsyncs it before it returns, with SQLite's
// write lock and the committer held, so that write and every write queued
// behind it wait. At a few dozen writes a second that was one commit in a
// hundred: the p99 of memory writes. memstore's connections turn automatic
// checkpoints off and this goroutine runs a PASSIVE checkpoint (it waits
// for no reader or writer) on a connection of its own shortly after writes,
// while writers go on appending to the WAL.

// checkpointEvery is how often, at most, the checkpointer runs: the WAL
// holds about this long of writes.
const checkpointEvery = 250 * time.Millisecond

type checkpointer struct {
	dirty   atomic.Bool
	quit    chan struct{}
	stopped sync.WaitGroup
}

// wrote notes a commit for the next checkpoint.
func (s *DB) wrote() { s.checkpoints.dirty.Store(true) }

func (s *DB) startCheckpointer() {
	s.checkpoints.quit = make(chan struct{})
	s.checkpoints.stopped.Add(1)
	go func() {
		defer s.checkpoints.stopped.Done()
		t := time.NewTicker(checkpointEvery)
		defer t.Stop()
		for {
			select {
			case <-s.checkpoints.quit:
				return
			case <-t.C:
				if s.checkpoints.dirty.Swap(false) {
					s.checkpoint()
				}
			}
		}
	}()
}

// stopCheckpointer ends the checkpointer; closing the last connection
// checkpoints what is left.
func (s *DB) stopCheckpointer() {
	close(s.checkpoints.quit)
	s.checkpoints.stopped.Wait()
}

func (s *DB) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var busy, walPages, copied int
	if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walPages, &copied); err != nil {
		// The next write retries; until then the WAL only grows.
		slog.Warn("sqlite: checkpoint failed", "err", err)
		s.checkpoints.dirty.Store(true)
	}
}
