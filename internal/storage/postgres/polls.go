package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordPoll implements storage.PollLog. The INSERT runs whether or not
// the environment exists, as a statement of its own did.
func (s *DB) RecordPoll(ctx context.Context, environmentID, workerID string, at time.Time) (*time.Time, bool, error) {
	var archivedAt *time.Time
	err := s.pool.QueryRow(ctx, `WITH polled AS (
			INSERT INTO worker_polls (environment_id, worker_id, polled_at) VALUES ($1, $2, $3)
			ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = greatest(worker_polls.polled_at, excluded.polled_at))
		SELECT archived_at FROM environments WHERE id = $1`,
		environmentID, workerID, at).Scan(&archivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return archivedAt, err == nil, unavailable(err)
}

// CountPollers implements storage.PollLog.
func (s *DB) CountPollers(ctx context.Context, environmentID string, since time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM worker_polls WHERE environment_id = $1 AND polled_at >= $2`, environmentID, since).Scan(&n)
	return n, unavailable(err)
}
