package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

const workColumns = `id, environment_id, session_id, state, metadata, created_at, queued_at, claimed_at, worker_id, token_id,
	lease_expires_at, lease_ttl_seconds, acknowledged_at, started_at, latest_heartbeat_at, stop_requested_at, stopped_at`

func scanWork(r rowScanner) (storage.Work, error) {
	var (
		w                                        storage.Work
		meta, created, queued                    string
		claimed, lease, ack, started, hb, sr, st sql.NullString
	)
	err := r.Scan(&w.ID, &w.EnvironmentID, &w.Data.ID, &w.State, &meta, &created, &queued, &claimed, &w.WorkerID, &w.TokenID,
		&lease, &w.LeaseTTLSeconds, &ack, &started, &hb, &sr, &st)
	if err != nil {
		return storage.Work{}, notFound(err)
	}
	w.Type = "work"
	w.Data.Type = "session"
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
	if w.State == "" {
		w.State = api.WorkQueued
	}
	if w.QueuedAt.IsZero() {
		w.QueuedAt = w.CreatedAt
	}
	_, err := q.ExecContext(ctx, `INSERT INTO work_items (`+workColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.EnvironmentID, w.Data.ID, w.State, metadataJSON(w.Metadata), formatTime(w.CreatedAt), formatTime(w.QueuedAt),
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

func ptr(t time.Time) *time.Time { return &t }

// releaseToQueue puts a claimed item back in the queue, keeping its place:
// the claim, the lease and its heartbeat history go, and with them the
// current token's authority.
func releaseToQueue(w *storage.Work) {
	w.State = api.WorkQueued
	w.ClaimedAt, w.WorkerID, w.TokenID = nil, "", ""
	w.LeaseExpiresAt, w.LeaseTTLSeconds = nil, 0
	w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt = nil, nil, nil
}

// EnsureWork implements storage.ControlPlane.
func (s *DB) EnsureWork(ctx context.Context, sessionID string, w storage.Work) (storage.Work, bool, error) {
	var queued bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		sess, err := getSession(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if sess.Status == api.SessionTerminated || sess.ArchivedAt != nil {
			return nil
		}
		live, err := hasLiveWork(ctx, tx, sessionID)
		if err != nil || live {
			return err
		}
		w.EnvironmentID = sess.EnvironmentID
		w.Data = api.WorkData{Type: "session", ID: sessionID}
		w.State = api.WorkQueued
		if w.CreatedAt.IsZero() {
			w.CreatedAt = s.now()
		}
		w.QueuedAt = w.CreatedAt
		queued = true
		return insertWork(ctx, tx, w)
	})
	if err != nil || !queued {
		return storage.Work{}, false, err
	}
	return w, true, nil
}

// ExpireLeases implements storage.ControlPlane.
func (s *DB) ExpireLeases(ctx context.Context, environmentID string) ([]storage.Work, error) {
	// Most calls find nothing lapsed: check with a read before taking the
	// write lock, which every poll would otherwise hold for a moment.
	var lapsedN int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM work_items
		WHERE environment_id = ? AND state != 'stopped' AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?`,
		environmentID, formatTime(s.now())).Scan(&lapsedN); err != nil || lapsedN == 0 {
		return nil, err
	}
	var stopped []storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		lapsed, err := queryAll(ctx, tx, scanWork, `SELECT `+workColumns+` FROM work_items
			WHERE environment_id = ? AND state != 'stopped' AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?`,
			environmentID, formatTime(now))
		if err != nil {
			return err
		}
		for _, w := range lapsed {
			if w.State == api.WorkStopping {
				// Asked to stop and no longer heard from: nothing to hand
				// to another worker.
				w.State = api.WorkStopped
				w.StoppedAt = ptr(now)
				w.LeaseExpiresAt = nil
				stopped = append(stopped, w)
			} else {
				releaseToQueue(&w)
			}
			if err := saveWork(ctx, tx, w); err != nil {
				return err
			}
		}
		return nil
	})
	return stopped, err
}

// ClaimWork implements storage.ControlPlane.
func (s *DB) ClaimWork(ctx context.Context, c storage.Claim) (storage.Work, error) {
	reclaimBefore := func(now time.Time) string {
		if c.ReclaimOlderThan > 0 {
			return formatTime(now.Add(-c.ReclaimOlderThan))
		}
		return "" // no claimed item qualifies
	}
	// An empty queue is the common answer to a poll: find that out with a
	// read, without taking the write lock.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM work_items
		WHERE environment_id = ? AND state = 'queued' AND (claimed_at IS NULL OR claimed_at <= ?)`,
		c.EnvironmentID, reclaimBefore(s.now())).Scan(&n); err != nil {
		return storage.Work{}, err
	}
	if n == 0 {
		return storage.Work{}, storage.ErrNoWork
	}
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		// One write transaction per claim (BEGIN IMMEDIATE): a second
		// poller waits for this one to commit, then sees the item claimed.
		w, err := scanWork(tx.QueryRowContext(ctx, `SELECT `+workColumns+` FROM work_items
			WHERE environment_id = ? AND state = 'queued' AND (claimed_at IS NULL OR claimed_at <= ?)
			ORDER BY queued_at, id LIMIT 1`, c.EnvironmentID, reclaimBefore(now)))
		if errors.Is(err, storage.ErrNotFound) {
			return storage.ErrNoWork
		}
		if err != nil {
			return err
		}
		w.ClaimedAt = ptr(now)
		w.WorkerID = c.WorkerID
		w.TokenID = c.Token.ID
		w.LeaseExpiresAt = ptr(now.Add(c.ClaimTTL))
		w.LeaseTTLSeconds = int64(c.ClaimTTL / time.Second)
		w.LatestHeartbeatAt = nil
		if err := saveWork(ctx, tx, w); err != nil {
			return err
		}
		tok := c.Token
		tok.Kind = storage.SessionsToken
		tok.SessionID, tok.WorkID, tok.EnvironmentID = w.Data.ID, w.ID, w.EnvironmentID
		if _, err := tx.ExecContext(ctx, `INSERT INTO credentials (id, kind, name, hash, environment_id, session_id, work_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			tok.ID, string(tok.Kind), tok.Name, c.TokenHash, tok.EnvironmentID, tok.SessionID, tok.WorkID, formatTime(now)); err != nil {
			return fmt.Errorf("mint sessions token for %s: %w", w.ID, err)
		}
		out = w
		return nil
	})
	return out, err
}

// AckWork implements storage.ControlPlane.
func (s *DB) AckWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		w, err := getWork(ctx, tx, environmentID, workID)
		if err != nil {
			return err
		}
		switch {
		case w.State == api.WorkStopped:
			return storage.ErrWorkStopped
		case w.State == api.WorkQueued && w.ClaimedAt == nil:
			return storage.ErrWorkNotClaimed
		case w.State == api.WorkQueued:
			w.State = api.WorkStarting
			w.AcknowledgedAt = ptr(s.now())
			if err := saveWork(ctx, tx, w); err != nil {
				return err
			}
		}
		out = w
		return nil
	})
	return out, err
}

// HeartbeatWork implements storage.ControlPlane.
func (s *DB) HeartbeatWork(ctx context.Context, h storage.Heartbeat) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		w, err := getWork(ctx, tx, h.EnvironmentID, h.WorkID)
		if err != nil {
			return err
		}
		// A token of an earlier claim never renews, whatever it expects:
		// its lease is gone even if the new holder has not beaten yet.
		if h.TokenID != "" && h.TokenID != w.TokenID {
			return &storage.LeaseMismatchError{Current: w}
		}
		if w.State == api.WorkStopped {
			out = w
			return nil
		}
		if w.ClaimedAt == nil {
			return &storage.LeaseMismatchError{Current: w}
		}
		want := api.NoHeartbeat
		if w.LatestHeartbeatAt != nil {
			want = storage.HeartbeatToken(*w.LatestHeartbeatAt)
		}
		// A stopping item is not compared, as in the hosted API: its worker
		// must learn of the stop on its next beat, not lose the lease to a
		// 412 and leave without its final sync.
		if h.Expected != want && w.State != api.WorkStopping {
			return &storage.LeaseMismatchError{Current: w}
		}
		now := s.now()
		w.LatestHeartbeatAt = ptr(now)
		w.LeaseExpiresAt = ptr(now.Add(h.TTL))
		w.LeaseTTLSeconds = int64(h.TTL / time.Second)
		switch w.State {
		case api.WorkQueued, api.WorkStarting:
			w.State = api.WorkActive
			if w.AcknowledgedAt == nil {
				w.AcknowledgedAt = ptr(now)
			}
			w.StartedAt = ptr(now)
		}
		out = w
		return saveWork(ctx, tx, w)
	})
	return out, err
}

// StopWork implements storage.ControlPlane.
func (s *DB) StopWork(ctx context.Context, environmentID, workID string, force bool) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		w, err := getWork(ctx, tx, environmentID, workID)
		if err != nil {
			return err
		}
		if w.State == api.WorkStopped {
			return storage.ErrWorkStopped
		}
		now := s.now()
		if w.StopRequestedAt == nil {
			w.StopRequestedAt = ptr(now)
		}
		if force || w.ClaimedAt == nil {
			// Forced, or nobody holds it who could be told: stopped now.
			w.State = api.WorkStopped
			w.StoppedAt = ptr(now)
			w.LeaseExpiresAt = nil
		} else {
			w.State = api.WorkStopping
		}
		out = w
		return saveWork(ctx, tx, w)
	})
	return out, err
}

// GetWork implements storage.ControlPlane.
func (s *DB) GetWork(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return getWork(ctx, s.db, environmentID, workID)
}

// ListWork implements storage.ControlPlane.
func (s *DB) ListWork(ctx context.Context, environmentID string, q storage.ListQuery) ([]storage.Work, error) {
	return queryAll(ctx, s.db, scanWork, `SELECT `+workColumns+` FROM work_items
		WHERE environment_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`,
		environmentID, q.After, q.After, limitArg(q.Limit))
}

// UpdateWork implements storage.ControlPlane.
func (s *DB) UpdateWork(ctx context.Context, environmentID, workID string, fn func(*storage.Work) error) (storage.Work, error) {
	var out storage.Work
	err := s.tx(ctx, func(tx *sql.Tx) error {
		w, err := getWork(ctx, tx, environmentID, workID)
		if err != nil {
			return err
		}
		if err := fn(&w); err != nil {
			return err
		}
		w.ID, w.EnvironmentID = workID, environmentID
		out = w
		return saveWork(ctx, tx, w)
	})
	return out, err
}

// WorkStats implements storage.ControlPlane.
func (s *DB) WorkStats(ctx context.Context, environmentID string) (api.WorkQueueStats, error) {
	st := api.WorkQueueStats{Type: "work_queue_stats"}
	var oldest sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT
			count(*) FILTER (WHERE claimed_at IS NULL),
			count(*) FILTER (WHERE claimed_at IS NOT NULL),
			min(queued_at)
		FROM work_items WHERE environment_id = ? AND state = 'queued'`, environmentID).Scan(&st.Depth, &st.Pending, &oldest)
	if err != nil {
		return st, err
	}
	st.OldestQueuedAt, err = nullTime(oldest)
	return st, err
}
