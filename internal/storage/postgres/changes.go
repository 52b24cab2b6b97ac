package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
)

// latestSequence reads a store's change-feed counter.
func latestSequence(ctx context.Context, q querier, storeID string) (int64, error) {
	var seq int64
	err := q.QueryRow(ctx, `SELECT last_sequence FROM memory_stores WHERE id = $1`, storeID).Scan(&seq)
	return seq, notFound(err)
}

// ListChanges implements storage.MemoryVersions. The counter and the page
// are read in one snapshot, so Latest covers every change returned.
func (s *DB) ListChanges(ctx context.Context, storeID string, after int64, limit int) (storage.ChangePage, error) {
	var page storage.ChangePage
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		latest, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		page, err = storage.PageChanges(latest, after, limit, func(n int) ([]storage.VersionRow, error) {
			scan := func(r pgx.Row) (storage.VersionRow, error) { return scanVersion(r, false) }
			changes, err := queryAll(ctx, tx, scan, `SELECT `+versionColumns+` FROM memory_versions WHERE store_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`,
				storeID, after, n)
			if err != nil {
				return nil, fmt.Errorf("list changes of memory store %s: %w", storeID, err)
			}
			return changes, nil
		})
		return err
	})
	return page, err
}

// Snapshot implements storage.MemoryVersions. readTx is REPEATABLE READ:
// the counter and every memory are read as of the transaction's first
// query while writers go on.
func (s *DB) Snapshot(ctx context.Context, storeID, prefix string, at func(int64) error, each func(storage.MemoryRow) error) error {
	return s.readTx(ctx, func(tx pgx.Tx) error {
		seq, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		if err := at(seq); err != nil {
			return err
		}
		_, upper := storage.SubtreeRange(prefix)
		rows, err := tx.Query(ctx, memoryWithContent+` WHERE m.store_id = $1 AND m.path >= $2 AND m.path < $3 ORDER BY m.path`, storeID, prefix, upper)
		if err != nil {
			return fmt.Errorf("snapshot of memory store %s: %w", storeID, err)
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanMemory(rows, true)
			if err != nil {
				return err
			}
			if err := each(m); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// MemoryStoreUsage implements storage.MemoryStores: one walk of the
// prefix's key range of the path index.
func (s *DB) MemoryStoreUsage(ctx context.Context, storeID, prefix string) (storage.StoreUsage, error) {
	var u storage.StoreUsage
	_, upper := storage.SubtreeRange(prefix)
	err := s.pool.QueryRow(ctx, `SELECT count(m.id), coalesce(sum(m.content_size_bytes), 0), max(m.updated_at)
		FROM memory_stores st LEFT JOIN memories m ON m.store_id = st.id AND m.path >= $1 AND m.path < $2
		WHERE st.id = $3 GROUP BY st.id`, prefix, upper, storeID).Scan(&u.Memories, &u.Bytes, &u.LastChange)
	return u, unavailable(notFound(err))
}
