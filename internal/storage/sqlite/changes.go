package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/memstore/memstore/internal/storage"
)

// latestSequence reads a store's change-feed counter.
func latestSequence(ctx context.Context, q queryer, storeID string) (int64, error) {
	var seq int64
	err := q.QueryRowContext(ctx, `SELECT last_sequence FROM memory_stores WHERE id = ?`, storeID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, storage.ErrNotFound
	}
	return seq, err
}

// ListChanges implements storage.MemoryStores.
func (s *DB) ListChanges(ctx context.Context, storeID string, after int64, limit int) (storage.ChangePage, error) {
	var page storage.ChangePage
	err := s.readTx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		latest, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		page, err = storage.PageChanges(latest, after, limit, func(n int) ([]storage.VersionRow, error) {
			scan := func(r rowScanner) (storage.VersionRow, error) { return scanVersion(r, false) }
			changes, err := queryAll(ctx, tx, scan, `SELECT `+versionColumns+` FROM memory_versions WHERE store_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`,
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

// Snapshot implements storage.MemoryStores. The read transaction is the
// consistent view: WAL readers see the database as of their first read
// while writers go on.
func (s *DB) Snapshot(ctx context.Context, storeID, prefix string, at func(int64) error, each func(storage.MemoryRow) error) error {
	return s.readTx(ctx, func(sqlTx *sql.Tx) error {
		tx := s.cached(sqlTx)
		seq, err := latestSequence(ctx, tx, storeID)
		if err != nil {
			return err
		}
		if err := at(seq); err != nil {
			return err
		}
		_, upper := storage.SubtreeRange(prefix)
		rows, err := tx.QueryContext(ctx, memoryWithContent+` WHERE m.store_id = ? AND m.path >= ? AND m.path < ? ORDER BY m.path`, storeID, prefix, upper)
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
