package sqlstore

import (
	"context"
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

func scanWork(r Row) (storage.Work, error) {
	var (
		w    storage.Work
		meta string
	)
	err := r.Scan(&w.ID, &w.EnvironmentID, &w.SessionID, &w.State, &meta, &w.CreatedAt, &w.QueuedAt, &w.ClaimedAt, &w.WorkerID, &w.TokenID,
		&w.LeaseExpiresAt, &w.LeaseTTLSeconds, &w.AcknowledgedAt, &w.StartedAt, &w.LatestHeartbeatAt, &w.StopRequestedAt, &w.StoppedAt)
	if err != nil {
		return storage.Work{}, err
	}
	return w, json.Unmarshal([]byte(meta), &w.Metadata)
}

// insertWork stores a new item and wakes the pollers of its queue, on
// every server, at commit.
func insertWork(ctx context.Context, tx *tx, w storage.Work) error {
	if err := tx.s.b.Notify(ctx, tx, storage.TopicQueue, w.EnvironmentID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO work_items (`+workColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.EnvironmentID, w.SessionID, w.State, metadataJSON(w.Metadata), w.CreatedAt, w.QueuedAt,
		w.ClaimedAt, w.WorkerID, w.TokenID, w.LeaseExpiresAt, w.LeaseTTLSeconds,
		w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt, w.StopRequestedAt, w.StoppedAt)
	if err != nil {
		return fmt.Errorf("queue work item %s: %w", w.ID, err)
	}
	return nil
}

// saveWork writes every mutable column of w.
func saveWork(ctx context.Context, q Conn, w storage.Work) error {
	_, err := q.Exec(ctx, `UPDATE work_items SET state = ?, metadata = ?, queued_at = ?, claimed_at = ?, worker_id = ?, token_id = ?,
		lease_expires_at = ?, lease_ttl_seconds = ?, acknowledged_at = ?, started_at = ?, latest_heartbeat_at = ?, stop_requested_at = ?, stopped_at = ?
		WHERE id = ?`,
		w.State, metadataJSON(w.Metadata), w.QueuedAt, w.ClaimedAt, w.WorkerID, w.TokenID,
		w.LeaseExpiresAt, w.LeaseTTLSeconds, w.AcknowledgedAt, w.StartedAt,
		w.LatestHeartbeatAt, w.StopRequestedAt, w.StoppedAt, w.ID)
	return err
}

func (s *Store) getWork(ctx context.Context, q Conn, environmentID, workID string, lock bool) (storage.Work, error) {
	return scanWork(q.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items WHERE id = ? AND environment_id = ?`+s.lock(lock), workID, environmentID))
}

// SessionWork implements storage.WorkQueue.
func (s *Store) SessionWork(ctx context.Context, sessionID string) ([]storage.Work, error) {
	return queryAll(ctx, s.db(), scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = ? ORDER BY id`, sessionID)
}

// leasedWork reads an environment's live items that hold a lease, the
// rows workqueue.Lapsed is asked about; locking skips the items another
// server is settling or changing: it decides them. The bound on
// lease_expires_at only spares reading leases that are plainly current.
func (s *Store) leasedWork(ctx context.Context, q Conn, environmentID string, now time.Time, lock string) ([]storage.Work, error) {
	return queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state != 'stopped' AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?`+lock, environmentID, now)
}

// claimable lists the items a claim may take at now: the oldest queued
// item nobody claimed and, when c reclaims, the oldest claimed long enough
// ago. Each is one LIMIT 1 walk of the index on (environment_id, state,
// claimed_at, queued_at, id), which keeps the claimed items out of the way
// of the unclaimed ones; workqueue.Next decides between the two. Locking
// skips the items other pollers hold, so concurrent claims neither wait
// for each other nor get the same item.
func (s *Store) claimable(ctx context.Context, q Conn, c storage.Claim, now time.Time, lock string) ([]storage.Work, error) {
	out, err := queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' AND claimed_at IS NULL
		ORDER BY queued_at, id LIMIT 1`+lock, c.EnvironmentID)
	if err != nil || c.ReclaimOlderThan <= 0 {
		return out, err
	}
	old, err := queryAll(ctx, q, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' AND claimed_at <= ?
		ORDER BY queued_at, id LIMIT 1`+lock, c.EnvironmentID, now.Add(-c.ReclaimOlderThan))
	return append(out, old...), err
}

// EnsureWork implements storage.WorkQueue.
func (s *Store) EnsureWork(ctx context.Context, sessionID string, w storage.Work) (out storage.Work, queued bool, err error) {
	err = s.write(ctx, func(tx *tx) error {
		out, queued, err = workqueue.EnsureIn(ctx, workRows{tx}, sessionID, w)
		return err
	})
	return out, queued, err
}

// ExpireLeases implements storage.WorkQueue.
func (s *Store) ExpireLeases(ctx context.Context, environmentID string) ([]storage.Work, error) {
	if s.d.SingleWriter {
		now, err := s.b.Now(ctx, s.db())
		if err != nil {
			return nil, err
		}
		lapsed, err := s.leasedWork(ctx, s.db(), environmentID, now, "")
		if err != nil || !slices.ContainsFunc(lapsed, func(w storage.Work) bool { return workqueue.Lapsed(w, now) }) {
			return nil, err
		}
	}
	var settled []storage.Work
	err := s.write(ctx, func(tx *tx) error {
		var requeued bool
		var err error
		settled, requeued, err = workqueue.ExpireIn(ctx, workRows{tx}, environmentID)
		if err == nil && requeued {
			err = s.b.Notify(ctx, tx, storage.TopicQueue, environmentID)
		}
		return err
	})
	return settled, err
}

// ClaimWork implements storage.WorkQueue.
func (s *Store) ClaimWork(ctx context.Context, c storage.Claim) (storage.Work, error) {
	if s.d.SingleWriter {
		now, err := s.b.Now(ctx, s.db())
		if err != nil {
			return storage.Work{}, err
		}
		candidates, err := s.claimable(ctx, s.db(), c, now, "")
		if err != nil {
			return storage.Work{}, err
		}
		if _, ok := workqueue.Next(candidates, now, c.ReclaimOlderThan); !ok {
			return storage.Work{}, storage.ErrNoWork
		}
	}
	var out storage.Work
	err := s.write(ctx, func(tx *tx) (err error) {
		out, err = workqueue.ClaimIn(ctx, workRows{tx}, c)
		return err
	})
	return out, err
}

// changeWork locks one item and applies a rule of package workqueue to it.
func (s *Store) changeWork(ctx context.Context, environmentID, workID string, rule func(storage.Work, time.Time) (storage.Work, bool, error)) (storage.Work, error) {
	var out storage.Work
	err := s.write(ctx, func(tx *tx) (err error) {
		out, err = workqueue.ChangeIn(ctx, workRows{tx}, environmentID, workID, rule)
		return err
	})
	return out, err
}

// workRows are the work queue's rows in a write transaction
// (workqueue.Rows), locked as they are read.
type workRows struct{ tx *tx }

func (r workRows) Now(ctx context.Context) (time.Time, error) { return r.tx.s.b.Now(ctx, r.tx) }

func (r workRows) Work(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return r.tx.s.getWork(ctx, r.tx, environmentID, workID, true)
}

func (r workRows) Claimable(ctx context.Context, c storage.Claim, now time.Time) ([]storage.Work, error) {
	return r.tx.s.claimable(ctx, r.tx, c, now, r.tx.s.d.SkipLocked)
}

func (r workRows) Leased(ctx context.Context, environmentID string, now time.Time) ([]storage.Work, error) {
	return r.tx.s.leasedWork(ctx, r.tx, environmentID, now, r.tx.s.d.SkipLocked)
}

func (r workRows) SaveWork(ctx context.Context, w storage.Work) error { return saveWork(ctx, r.tx, w) }

// Session takes the session's row lock, which orders EnsureWork with every
// other EnsureWork and append of the session: two servers never both
// queue an item for it.
func (r workRows) Session(ctx context.Context, sessionID string) (api.Session, error) {
	return r.tx.s.getSession(ctx, r.tx, sessionID, true)
}

func (r workRows) SessionWork(ctx context.Context, sessionID string) ([]storage.Work, error) {
	return queryAll(ctx, r.tx, scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = ?`+r.tx.s.d.ForUpdate, sessionID)
}

func (r workRows) InsertWork(ctx context.Context, w storage.Work) error {
	return insertWork(ctx, r.tx, w)
}

func (r workRows) InsertCredential(ctx context.Context, c storage.Credential, hash string) error {
	return insertCredential(ctx, r.tx, c, hash)
}

// AckWork implements storage.WorkQueue.
func (s *Store) AckWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.Ack)
}

// HeartbeatWork implements storage.WorkQueue.
func (s *Store) HeartbeatWork(ctx context.Context, h storage.Heartbeat) (storage.Work, error) {
	return s.changeWork(ctx, h.EnvironmentID, h.WorkID, workqueue.HeartbeatRule(h))
}

// StopWork implements storage.WorkQueue.
func (s *Store) StopWork(ctx context.Context, environmentID, workID string, force bool) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.StopRule(force))
}

// UpdateWork implements storage.WorkQueue.
func (s *Store) UpdateWork(ctx context.Context, environmentID, workID string, fn func(*storage.Work) error) (storage.Work, error) {
	return s.changeWork(ctx, environmentID, workID, workqueue.Update(environmentID, workID, fn))
}

// GetWork implements storage.WorkQueue.
func (s *Store) GetWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return s.getWork(ctx, s.db(), environmentID, workID, false)
}

// ListWork implements storage.WorkQueue.
func (s *Store) ListWork(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Work, error) {
	return queryAll(ctx, s.db(), scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		environmentID, q.After, q.After, limitArg(q.Limit))
}

// WorkStats implements storage.WorkQueue over an environment's queued
// items, oldest first.
func (s *Store) WorkStats(ctx context.Context, environmentID string) (storage.QueueStats, error) {
	queued, err := queryAll(ctx, s.db(), scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND state = 'queued' ORDER BY queued_at, id`, environmentID)
	if err != nil {
		return storage.QueueStats{}, err
	}
	return workqueue.Stats(queued), nil
}

// QueueDepths implements storage.QueueGauges.
func (s *Store) QueueDepths(ctx context.Context) ([]storage.QueueDepth, error) {
	return queryAll(ctx, s.db(), func(r Row) (storage.QueueDepth, error) {
		var q storage.QueueDepth
		err := r.Scan(&q.EnvironmentID, &q.Depth, &q.Pending)
		return q, err
	}, `SELECT e.id, count(w.id) FILTER (WHERE w.claimed_at IS NULL), count(w.id) FILTER (WHERE w.claimed_at IS NOT NULL)
		FROM environments e LEFT JOIN work_items w ON w.environment_id = e.id AND w.state = 'queued'
		WHERE e.archived_at IS NULL GROUP BY e.id ORDER BY e.id`)
}
