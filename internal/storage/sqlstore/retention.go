package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
)

// Version retention: the pruner's reads and deletes, and the change feed's
// check that a cursor is still covered by the versions kept.

// retentionColumn is how memory_stores.version_retention holds a store's
// policy: NULL follows the server's default.
func retentionColumn(p *retention.Policy) any {
	if p == nil {
		return nil
	}
	return p.String()
}

// scanRetention reads memory_stores.version_retention into st.
func scanRetention(st *storage.MemoryStoreRow, column *string) error {
	if column == nil {
		return nil
	}
	p, err := retention.Parse(*column)
	if err != nil {
		return fmt.Errorf("memory store %s: version_retention: %w", st.ID, err)
	}
	st.Retention = &p
	return nil
}

// checkRetained refuses a change-feed cursor below what retention deleted.
func checkRetained(ctx context.Context, q Conn, storeID string, after int64) error {
	var pruned int64
	if err := q.QueryRow(ctx, `SELECT pruned_through FROM memory_stores WHERE id = ?`, storeID).Scan(&pruned); err != nil {
		return err
	}
	if after < pruned {
		return &storage.ChangesPrunedError{After: after, PrunedThrough: pruned}
	}
	return nil
}

// prunable selects up to limit versions the policy lets go, oldest first:
// never a redacted one, never a memory's newest (a later version of the
// same memory must exist). Keep-last counts the unredacted versions after
// each one; max-age compares its time.
func prunable(policy retention.Policy, storeID string, now time.Time, limit int) (string, args) {
	var a args
	where := []string{"v.store_id = " + a.add(storeID), "v.redacted_at IS NULL"}
	switch {
	case policy.KeepLast > 0:
		where = append(where, `(SELECT count(*) FROM memory_versions w WHERE w.memory_id = v.memory_id AND w.sequence > v.sequence AND w.redacted_at IS NULL) >= `+a.add(policy.KeepLast))
	case policy.MaxAge > 0:
		where = append(where, "v.created_at < "+a.add(now.Add(-policy.MaxAge)),
			`EXISTS (SELECT 1 FROM memory_versions w WHERE w.memory_id = v.memory_id AND w.sequence > v.sequence)`)
	}
	return `SELECT v.id, v.sequence FROM memory_versions v WHERE ` + strings.Join(where, " AND ") + ` ORDER BY v.sequence LIMIT ` + a.add(limit), a
}

// PruneVersions implements storage.Retention. The candidates are read
// outside the write, so the writers wait only for the delete; a version
// chosen there is still prunable when deleted, since later writes only add
// newer versions, and a redaction in between is spared by the delete's own
// test.
func (s *Store) PruneVersions(ctx context.Context, storeID string, policy retention.Policy, now time.Time, limit int) (int, error) {
	if policy.KeepsAll() || limit <= 0 {
		return 0, nil
	}
	type candidate struct {
		id  string
		seq int64
	}
	query, qa := prunable(policy, storeID, now, limit)
	found, err := queryAll(ctx, s.db(), func(r Row) (candidate, error) {
		var c candidate
		return c, r.Scan(&c.id, &c.seq)
	}, query, qa...)
	if err != nil {
		return 0, fmt.Errorf("find the versions of memory store %s that retention lets go: %w", storeID, err)
	}
	if len(found) == 0 {
		return 0, nil
	}
	var (
		da      args
		holders = make([]string, len(found))
		highest int64
	)
	store := da.add(storeID)
	for i, c := range found {
		holders[i] = da.add(c.id)
		highest = max(highest, c.seq)
	}
	var deleted int64
	err = s.write(ctx, func(tx *tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM memory_versions WHERE store_id = `+store+` AND redacted_at IS NULL AND id IN (`+strings.Join(holders, ", ")+`)`, da...)
		if err != nil {
			return fmt.Errorf("delete versions of memory store %s: %w", storeID, err)
		}
		deleted = n
		if n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE memory_stores SET pruned_through = ? WHERE id = ? AND pruned_through < ?`, highest, storeID, highest)
		return err
	})
	return int(deleted), err
}
