package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/storage"
)

// storeCounters holds, for one group-commit batch, the memory_stores
// columns every memory write moves: the change-feed sequence (see migration
// 0007) and the live memory count, and whether the store is archived. The
// committer holds SQLite's write lock for the whole batch, so nothing else
// changes those rows meanwhile: the batch reads a store's row once, counts
// in memory, and writes each changed row once before COMMIT, where every
// write used to update the row itself (an UPDATE…RETURNING per write, the
// committer running writes one after another).
type storeCounters struct {
	// kept is the state after the batch's writes that succeeded; pending
	// is what the write now running changed, kept if it succeeds.
	kept, pending map[string]storeRow
}

// storeRow is the part of a memory_stores row a memory write needs.
type storeRow struct {
	seq      int64
	count    int
	archived bool
	changed  bool
}

func newStoreCounters() storeCounters {
	return storeCounters{kept: map[string]storeRow{}, pending: map[string]storeRow{}}
}

// load returns a store's row as the running write sees it, reading it the
// first time the batch needs it.
func (c storeCounters) load(ctx context.Context, q queryer, storeID string) (storeRow, error) {
	if r, ok := c.pending[storeID]; ok {
		return r, nil
	}
	if r, ok := c.kept[storeID]; ok {
		return r, nil
	}
	var (
		r          storeRow
		archivedAt sql.NullString
	)
	err := q.QueryRowContext(ctx, `SELECT last_sequence, memory_count, archived_at FROM memory_stores WHERE id = ?`, storeID).Scan(&r.seq, &r.count, &archivedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, storage.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("read the counters of memory store %s: %w", storeID, err)
	}
	r.archived = archivedAt.Valid
	c.kept[storeID] = r
	return r, nil
}

// take claims a store's next change-feed sequence for the running write and
// moves its memory count by delta, returning the row after the change. The
// claim counts only if the write succeeds.
func (c storeCounters) take(ctx context.Context, q queryer, storeID string, delta int) (storeRow, error) {
	r, err := c.load(ctx, q, storeID)
	if err != nil {
		return r, err
	}
	r.seq++
	r.count += delta
	r.changed = true
	c.pending[storeID] = r
	return r, nil
}

// settle ends the running write: its claims are kept when it succeeded and
// forgotten when it was refused.
func (c storeCounters) settle(succeeded bool) {
	for id, r := range c.pending {
		if succeeded {
			c.kept[id] = r
		}
		delete(c.pending, id)
	}
}

// batchCounters are sqlstore.StoreCounters on a batch: the committer runs
// writes one after another, so "locking" a store is reading its counters.
type batchCounters struct{ tx *batchTx }

func (c batchCounters) Lock(ctx context.Context, storeID string) (storage.StoreState, error) {
	r, err := c.tx.stores.load(ctx, c.tx, storeID)
	return storage.StoreState{Archived: r.archived, Memories: r.count}, err
}

func (c batchCounters) Next(ctx context.Context, storeID string, delta int) (int64, error) {
	r, err := c.tx.stores.take(ctx, c.tx, storeID, delta)
	return r.seq, err
}

// flush writes the rows the batch changed, before its COMMIT.
func (c storeCounters) flush(ctx context.Context, q queryer) error {
	for id, r := range c.kept {
		if !r.changed {
			continue
		}
		if _, err := q.ExecContext(ctx, `UPDATE memory_stores SET last_sequence = ?, memory_count = ? WHERE id = ?`, r.seq, r.count, id); err != nil {
			return fmt.Errorf("write the counters of memory store %s: %w", id, err)
		}
	}
	return nil
}
