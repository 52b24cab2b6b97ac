package postgres

import (
	"context"
	"time"
)

// notePoll is Dialect.NotePoll: a worker's last poll of an open
// environment, kept whether or not it found work, so that every server
// counts it.
const notePoll = `WITH polled AS (
	INSERT INTO worker_polls (environment_id, worker_id, polled_at) VALUES (?, ?, ?)
	ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = greatest(worker_polls.polled_at, excluded.polled_at))`

// CountPollers implements storage.PollLog.
func (s *DB) CountPollers(ctx context.Context, environmentID string, since time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM worker_polls WHERE environment_id = $1 AND polled_at >= $2`, environmentID, since).Scan(&n)
	return n, unavailable(err)
}
