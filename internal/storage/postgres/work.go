package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/workqueue"
)

const workColumns = `id, environment_id, session_id, state, metadata, created_at, queued_at, claimed_at, worker_id, token_id,
	lease_expires_at, lease_ttl_seconds, acknowledged_at, started_at, latest_heartbeat_at, stop_requested_at, stopped_at`

func scanWork(r pgx.Row) (storage.Work, error) {
	var (
		w    storage.Work
		meta string
	)
	err := r.Scan(&w.ID, &w.EnvironmentID, &w.SessionID, &w.State, &meta, &w.CreatedAt, &w.QueuedAt, &w.ClaimedAt, &w.WorkerID, &w.TokenID,
		&w.LeaseExpiresAt, &w.LeaseTTLSeconds, &w.AcknowledgedAt, &w.StartedAt, &w.LatestHeartbeatAt, &w.StopRequestedAt, &w.StoppedAt)
	if err != nil {
		return storage.Work{}, notFound(err)
	}
	return w, json.Unmarshal([]byte(meta), &w.Metadata)
}

func insertWork(ctx context.Context, q querier, w storage.Work) error {
	if err := notifyWake(ctx, q, storage.TopicQueue, w.EnvironmentID); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `INSERT INTO work_items (`+workColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		w.ID, w.EnvironmentID, w.SessionID, w.State, metadataJSON(w.Metadata), w.CreatedAt, w.QueuedAt,
		w.ClaimedAt, w.WorkerID, w.TokenID, w.LeaseExpiresAt, w.LeaseTTLSeconds,
		w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt, w.StopRequestedAt, w.StoppedAt)
	if err != nil {
		return fmt.Errorf("queue work item %s: %w", w.ID, err)
	}
	return nil
}

// saveWork writes every mutable column of w.
func saveWork(ctx context.Context, q querier, w storage.Work) error {
	_, err := q.Exec(ctx, `UPDATE work_items SET state = $1, metadata = $2, queued_at = $3, claimed_at = $4, worker_id = $5, token_id = $6,
		lease_expires_at = $7, lease_ttl_seconds = $8, acknowledged_at = $9, started_at = $10, latest_heartbeat_at = $11, stop_requested_at = $12, stopped_at = $13
		WHERE id = $14`,
		w.State, metadataJSON(w.Metadata), w.QueuedAt, w.ClaimedAt, w.WorkerID, w.TokenID,
		w.LeaseExpiresAt, w.LeaseTTLSeconds, w.AcknowledgedAt, w.StartedAt,
		w.LatestHeartbeatAt, w.StopRequestedAt, w.StoppedAt, w.ID)
	return err
}

func sessionWork(ctx context.Context, q querier, sessionID string) ([]storage.Work, error) {
	return queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = $1 FOR UPDATE`, sessionID)
}

func hasLiveWork(ctx context.Context, q querier, sessionID string) (bool, error) {
	items, err := queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = $1`, sessionID)
	return workqueue.AnyLive(items), err
}

// EnsureWork implements storage.WorkQueue.
func (s *DB) EnsureWork(ctx context.Context, sessionID string, w storage.Work) (out storage.Work, queued bool, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) error {
		out, queued, err = workqueue.EnsureIn(ctx, workRows{s, tx}, sessionID, w)
		return err
	})
	return out, queued, err
}

// ExpireLeases implements storage.WorkQueue. Items another replica is
// settling or changing are skipped (SKIP LOCKED): it decides them.
func (s *DB) ExpireLeases(ctx context.Context, environmentID string) ([]storage.Work, error) {
	var settled []storage.Work
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var requeued bool
		var err error
		settled, requeued, err = workqueue.ExpireIn(ctx, workRows{s, tx}, environmentID)
		if err == nil && requeued {
			err = notifyWake(ctx, tx, storage.TopicQueue, environmentID)
		}
		return err
	})
	return settled, err
}

// ClaimWork implements storage.WorkQueue. Each poller locks the oldest
// queued item no other poller holds (FOR UPDATE SKIP LOCKED), so
// concurrent claims neither wait for each other nor get the same item.
func (s *DB) ClaimWork(ctx context.Context, c storage.Claim) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		out, err = workqueue.ClaimIn(ctx, workRows{s, tx}, c)
		return err
	})
	return out, err
}

// changeWork locks one item and applies a rule of package workqueue to it.
func (s *DB) changeWork(ctx context.Context, environmentID, workID string, rule func(storage.Work, time.Time) (storage.Work, bool, error)) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		out, err = workqueue.ChangeIn(ctx, workRows{s, tx}, environmentID, workID, rule)
		return err
	})
	return out, err
}

// workRows are the work queue's rows in a transaction (workqueue.Rows),
// locked as they are read.
type workRows struct {
	s  *DB
	tx pgx.Tx
}

func (r workRows) Now(ctx context.Context) (time.Time, error) { return r.s.now(ctx, r.tx) }

func (r workRows) Work(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return scanWork(r.tx.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items WHERE id = $1 AND environment_id = $2 FOR UPDATE`, workID, environmentID))
}

// Claimable narrows to what workqueue.Claimable accepts so that LIMIT 1
// finds it through the index, skipping items other pollers hold.
func (r workRows) Claimable(ctx context.Context, c storage.Claim, now time.Time) ([]storage.Work, error) {
	return queryAll(ctx, r.tx, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = $1 AND state = 'queued' AND (claimed_at IS NULL OR ($2 AND claimed_at <= $3))
		ORDER BY queued_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`, c.EnvironmentID, c.ReclaimOlderThan > 0, now.Add(-c.ReclaimOlderThan))
}

// Leased bounds lease_expires_at only to spare reading current leases;
// workqueue.Lapsed decides.
func (r workRows) Leased(ctx context.Context, environmentID string, now time.Time) ([]storage.Work, error) {
	return queryAll(ctx, r.tx, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = $1 AND state != 'stopped' AND lease_expires_at <= $2 FOR UPDATE SKIP LOCKED`, environmentID, now)
}

func (r workRows) SaveWork(ctx context.Context, w storage.Work) error { return saveWork(ctx, r.tx, w) }

// Session takes the session's row lock, which orders EnsureWork with every
// other EnsureWork and append of the session: two replicas never both
// queue an item for it.
func (r workRows) Session(ctx context.Context, sessionID string) (api.Session, error) {
	return getSession(ctx, r.tx, sessionID, true)
}

func (r workRows) SessionWork(ctx context.Context, sessionID string) ([]storage.Work, error) {
	return sessionWork(ctx, r.tx, sessionID)
}

func (r workRows) InsertWork(ctx context.Context, w storage.Work) error {
	return insertWork(ctx, r.tx, w)
}

func (r workRows) InsertCredential(ctx context.Context, c storage.Credential, hash string) error {
	return insertCredential(ctx, r.tx, c, hash)
}

// AckWork implements storage.WorkQueue.
func (s *DB) AckWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.Ack)
}

// HeartbeatWork implements storage.WorkQueue.
func (s *DB) HeartbeatWork(ctx context.Context, h storage.Heartbeat) (storage.Work, error) {
	return s.changeWork(ctx, h.EnvironmentID, h.WorkID, workqueue.HeartbeatRule(h))
}

// StopWork implements storage.WorkQueue.
func (s *DB) StopWork(ctx context.Context, environmentID, workID string, force bool) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.StopRule(force))
}

// UpdateWork implements storage.WorkQueue.
func (s *DB) UpdateWork(ctx context.Context, environmentID, workID string, fn func(*storage.Work) error) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.Update(environmentID, workID, fn))
}

// GetWork implements storage.WorkQueue.
func (s *DB) GetWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	w, err := scanWork(s.pool.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items WHERE id = $1 AND environment_id = $2`, workID, environmentID))
	return w, unavailable(err)
}

// ListWork implements storage.WorkQueue.
func (s *DB) ListWork(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Work, error) {
	out, err := queryAll(ctx, s.pool, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = $1 AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`,
		environmentID, q.After, limitArg(q.Limit))
	return out, unavailable(err)
}

// WorkStats implements storage.WorkQueue.
func (s *DB) WorkStats(ctx context.Context, environmentID string) (storage.QueueStats, error) {
	queued, err := queryAll(ctx, s.pool, scanWork, `SELECT `+workColumns+` FROM work_items WHERE environment_id = $1 AND state = 'queued'`, environmentID)
	if err != nil {
		return storage.QueueStats{}, unavailable(err)
	}
	return workqueue.Stats(queued), nil
}
