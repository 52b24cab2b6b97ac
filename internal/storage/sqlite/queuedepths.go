package sqlite

import (
	"context"

	"github.com/memstore/memstore/internal/storage"
)

// QueueDepths implements storage.QueueGauges.
func (s *DB) QueueDepths(ctx context.Context) ([]storage.QueueDepth, error) {
	return queryAll(ctx, s.db, scanQueueDepth, `SELECT e.id, count(w.id) FILTER (WHERE w.claimed_at IS NULL), count(w.id) FILTER (WHERE w.claimed_at IS NOT NULL)
		FROM environments e LEFT JOIN work_items w ON w.environment_id = e.id AND w.state = 'queued'
		WHERE e.archived_at IS NULL GROUP BY e.id ORDER BY e.id`)
}

func scanQueueDepth(r rowScanner) (storage.QueueDepth, error) {
	var q storage.QueueDepth
	err := r.Scan(&q.EnvironmentID, &q.Depth, &q.Pending)
	return q, err
}
