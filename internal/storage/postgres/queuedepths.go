package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
)

// QueueDepths implements storage.QueueGauges.
func (s *DB) QueueDepths(ctx context.Context) ([]storage.QueueDepth, error) {
	out, err := queryAll(ctx, s.pool, scanQueueDepth, `SELECT e.id, count(w.id) FILTER (WHERE w.claimed_at IS NULL), count(w.id) FILTER (WHERE w.claimed_at IS NOT NULL)
		FROM environments e LEFT JOIN work_items w ON w.environment_id = e.id AND w.state = 'queued'
		WHERE e.archived_at IS NULL GROUP BY e.id ORDER BY e.id`)
	return out, unavailable(err)
}

func scanQueueDepth(r pgx.Row) (storage.QueueDepth, error) {
	var q storage.QueueDepth
	err := r.Scan(&q.EnvironmentID, &q.Depth, &q.Pending)
	return q, err
}
