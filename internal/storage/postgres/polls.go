package postgres

import (
	"context"
	"time"
)

// RecordPoll implements storage.PollLog.
func (s *DB) RecordPoll(ctx context.Context, environmentID, workerID string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO worker_polls (environment_id, worker_id, polled_at) VALUES ($1, $2, $3)
		ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = greatest(worker_polls.polled_at, excluded.polled_at)`,
		environmentID, workerID, at)
	return unavailable(err)
}

// CountPollers implements storage.PollLog.
func (s *DB) CountPollers(ctx context.Context, environmentID string, since time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM worker_polls WHERE environment_id = $1 AND polled_at >= $2`, environmentID, since).Scan(&n)
	return n, unavailable(err)
}
