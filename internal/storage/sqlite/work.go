package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/workqueue"
)

const workColumns = `id, environment_id, session_id, state, metadata, created_at, queued_at, claimed_at, worker_id, token_id,
	lease_expires_at, lease_ttl_seconds, acknowledged_at, started_at, latest_heartbeat_at, stop_requested_at, stopped_at`

func scanWork(r rowScanner) (storage.Work, error) {
	var (
		w                                        storage.Work
		meta, created, queued                    string
		claimed, lease, ack, started, hb, sr, st sql.NullString
	)
	err := r.Scan(&w.ID, &w.EnvironmentID, &w.SessionID, &w.State, &meta, &created, &queued, &claimed, &w.WorkerID, &w.TokenID,
		&lease, &w.LeaseTTLSeconds, &ack, &started, &hb, &sr, &st)
	if err != nil {
		return storage.Work{}, notFound(err)
	}
	if err := json.Unmarshal([]byte(meta), &w.Metadata); err != nil {
		return storage.Work{}, err
	}
	if w.CreatedAt, err = parseTime(created); err != nil {
		return storage.Work{}, err
	}
	if w.QueuedAt, err = parseTime(queued); err != nil {
		return storage.Work{}, err
	}
	for _, f := range []struct {
		dst **time.Time
		src sql.NullString
	}{{&w.ClaimedAt, claimed}, {&w.LeaseExpiresAt, lease}, {&w.AcknowledgedAt, ack}, {&w.StartedAt, started},
		{&w.LatestHeartbeatAt, hb}, {&w.StopRequestedAt, sr}, {&w.StoppedAt, st}} {
		if *f.dst, err = nullTime(f.src); err != nil {
			return storage.Work{}, err
		}
	}
	return w, nil
}

func insertWork(ctx context.Context, q queryer, w storage.Work) error {
	_, err := q.ExecContext(ctx, `INSERT INTO work_items (`+workColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.EnvironmentID, w.SessionID, w.State, metadataJSON(w.Metadata), formatTime(w.CreatedAt), formatTime(w.QueuedAt),
		nullTimeArg(w.ClaimedAt), w.WorkerID, w.TokenID, nullTimeArg(w.LeaseExpiresAt), w.LeaseTTLSeconds,
		nullTimeArg(w.AcknowledgedAt), nullTimeArg(w.StartedAt), nullTimeArg(w.LatestHeartbeatAt), nullTimeArg(w.StopRequestedAt), nullTimeArg(w.StoppedAt))
	if err != nil {
		return fmt.Errorf("queue work item %s: %w", w.ID, err)
	}
	return nil
}

// saveWork writes every mutable column of w.
func saveWork(ctx context.Context, q queryer, w storage.Work) error {
	_, err := q.ExecContext(ctx, `UPDATE work_items SET state = ?, metadata = ?, queued_at = ?, claimed_at = ?, worker_id = ?, token_id = ?,
		lease_expires_at = ?, lease_ttl_seconds = ?, acknowledged_at = ?, started_at = ?, latest_heartbeat_at = ?, stop_requested_at = ?, stopped_at = ?
		WHERE id = ?`,
		w.State, metadataJSON(w.Metadata), formatTime(w.QueuedAt), nullTimeArg(w.ClaimedAt), w.WorkerID, w.TokenID,
		nullTimeArg(w.LeaseExpiresAt), w.LeaseTTLSeconds, nullTimeArg(w.AcknowledgedAt), nullTimeArg(w.StartedAt),
		nullTimeArg(w.LatestHeartbeatAt), nullTimeArg(w.StopRequestedAt), nullTimeArg(w.StoppedAt), w.ID)
	return err
}

func getWork(ctx context.Context, q queryer, environmentID, workID string) (storage.Work, error) {
	return scanWork(q.QueryRowContext(ctx, `SELECT `+workColumns+` FROM work_items WHERE id = ? AND environment_id = ?`, workID, environmentID))
}

// queuedWork reads an environment's queued items, oldest first: the rows
// the statistics are counted over.
func queuedWork(ctx context.Context, q queryer, environmentID string) ([]storage.Work, error) {
	return queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' ORDER BY queued_at, id`, environmentID)
}

// leasedWork reads an environment's live items that hold a lease, the
// rows workqueue.Lapsed is asked about.
func leasedWork(ctx context.Context, q queryer, environmentID string, now time.Time) ([]storage.Work, error) {
	// The bound on lease_expires_at only spares reading leases that are
	// plainly current; workqueue.Lapsed decides.
	return queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state != 'stopped' AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?`,
		environmentID, formatTime(now))
}

func sessionWork(ctx context.Context, q queryer, sessionID string) ([]storage.Work, error) {
	return queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = ?`, sessionID)
}

func hasLiveWork(ctx context.Context, q queryer, sessionID string) (bool, error) {
	items, err := sessionWork(ctx, q, sessionID)
	return workqueue.AnyLive(items), err
}

// EnsureWork implements storage.WorkQueue.
func (s *DB) EnsureWork(ctx context.Context, sessionID string, w storage.Work) (out storage.Work, queued bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		out, queued, err = workqueue.EnsureIn(ctx, workRows{s, tx}, sessionID, w)
		return err
	})
	return out, queued, err
}

// ExpireLeases implements storage.WorkQueue.
func (s *DB) ExpireLeases(ctx context.Context, environmentID string) ([]storage.Work, error) {
	// Most calls find nothing lapsed: check with a read before taking the
	// write lock, which every poll would otherwise hold for a moment.
	lapsed, err := leasedWork(ctx, s.db, environmentID, s.now())
	if err != nil || !slices.ContainsFunc(lapsed, func(w storage.Work) bool { return workqueue.Lapsed(w, s.now()) }) {
		return nil, err
	}
	var settled []storage.Work
	err = s.tx(ctx, func(tx *sql.Tx) (err error) {
		settled, _, err = workqueue.ExpireIn(ctx, workRows{s, tx}, environmentID)
		return err
	})
	return settled, err
}

// claimable lists the items a claim may take at now: the oldest queued
// item nobody claimed and, when c reclaims, the oldest claimed long enough
// ago. Each is one LIMIT 1 walk of work_items_claimable (migration 0010),
// which keeps the claimed items out of the way of the unclaimed ones;
// workqueue.Next decides between the two.
func claimable(ctx context.Context, q queryer, c storage.Claim, now time.Time) ([]storage.Work, error) {
	out, err := queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' AND claimed_at IS NULL
		ORDER BY queued_at, id LIMIT 1`, c.EnvironmentID)
	if err != nil || c.ReclaimOlderThan <= 0 {
		return out, err
	}
	old, err := queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' AND claimed_at <= ?
		ORDER BY queued_at, id LIMIT 1`, c.EnvironmentID, formatTime(now.Add(-c.ReclaimOlderThan)))
	return append(out, old...), err
}

// ClaimWork implements storage.WorkQueue.
func (s *DB) ClaimWork(ctx context.Context, c storage.Claim) (storage.Work, error) {
	// An empty queue is the common answer to a poll: find that out with a
	// read, without taking the write lock.
	now := s.now()
	candidates, err := claimable(ctx, s.db, c, now)
	if err != nil {
		return storage.Work{}, err
	}
	if _, ok := workqueue.Next(candidates, now, c.ReclaimOlderThan); !ok {
		return storage.Work{}, storage.ErrNoWork
	}
	var out storage.Work
	err = s.tx(ctx, func(tx *sql.Tx) (err error) {
		// One write transaction per claim (BEGIN IMMEDIATE): a second
		// poller waits for this one to commit, then sees the item claimed.
		out, err = workqueue.ClaimIn(ctx, workRows{s, tx}, c)
		return err
	})
	return out, err
}

// changeWork applies a rule of package workqueue to one item in a write
// transaction.
func (s *DB) changeWork(ctx context.Context, environmentID, workID string, rule func(storage.Work, time.Time) (storage.Work, bool, error)) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) (err error) {
		out, err = workqueue.ChangeIn(ctx, workRows{s, tx}, environmentID, workID, rule)
		return err
	})
	return out, err
}

// workRows are the work queue's rows in a write transaction
// (workqueue.Rows); SQLite's single writer needs no row locks.
type workRows struct {
	s  *DB
	tx *sql.Tx
}

func (r workRows) Now(context.Context) (time.Time, error) { return r.s.now(), nil }

func (r workRows) Work(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return getWork(ctx, r.tx, environmentID, workID)
}

func (r workRows) Claimable(ctx context.Context, c storage.Claim, now time.Time) ([]storage.Work, error) {
	return claimable(ctx, r.tx, c, now)
}

func (r workRows) Leased(ctx context.Context, environmentID string, now time.Time) ([]storage.Work, error) {
	return leasedWork(ctx, r.tx, environmentID, now)
}

func (r workRows) SaveWork(ctx context.Context, w storage.Work) error { return saveWork(ctx, r.tx, w) }

func (r workRows) Session(ctx context.Context, sessionID string) (api.Session, error) {
	return getSession(ctx, r.tx, sessionID)
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

// GetWork implements storage.WorkQueue.
func (s *DB) GetWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return getWork(ctx, s.db, environmentID, workID)
}

// ListWork implements storage.WorkQueue.
func (s *DB) ListWork(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Work, error) {
	return queryAll(ctx, s.db, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		environmentID, q.After, q.After, limitArg(q.Limit))
}

// UpdateWork implements storage.WorkQueue.
func (s *DB) UpdateWork(ctx context.Context, environmentID, workID string, fn func(*storage.Work) error) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.Update(environmentID, workID, fn))
}

// WorkStats implements storage.WorkQueue.
func (s *DB) WorkStats(ctx context.Context, environmentID string) (storage.QueueStats, error) {
	queued, err := queuedWork(ctx, s.db, environmentID)
	if err != nil {
		return storage.QueueStats{}, err
	}
	return workqueue.Stats(queued), nil
}
