package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
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
func saveWork(ctx context.Context, t *tx, w storage.Work) error {
	return t.execLater(ctx, `UPDATE work_items SET state = ?, metadata = ?, queued_at = ?, claimed_at = ?, worker_id = ?, token_id = ?,
		lease_expires_at = ?, lease_ttl_seconds = ?, acknowledged_at = ?, started_at = ?, latest_heartbeat_at = ?, stop_requested_at = ?, stopped_at = ?
		WHERE id = ?`,
		w.State, metadataJSON(w.Metadata), w.QueuedAt, w.ClaimedAt, w.WorkerID, w.TokenID,
		w.LeaseExpiresAt, w.LeaseTTLSeconds, w.AcknowledgedAt, w.StartedAt,
		w.LatestHeartbeatAt, w.StopRequestedAt, w.StoppedAt, w.ID)
}

func (s *Store) getWork(ctx context.Context, q Conn, environmentID, workID string, lock bool) (storage.Work, error) {
	return scanWork(q.QueryRow(ctx, `SELECT `+workColumns+` FROM work_items WHERE id = ? AND environment_id = ?`+s.lock(lock), workID, environmentID))
}

// SessionWork implements storage.WorkQueue.
func (s *Store) SessionWork(ctx context.Context, sessionID string) ([]storage.Work, error) {
	return queryAll(ctx, s.db(), scanWork, `SELECT `+workColumns+` FROM work_items WHERE session_id = ? ORDER BY id`, sessionID)
}

// leasedQuery reads an environment's live items whose lease lapsed by a
// time, the rows workqueue.Lapsed is asked about; the bound on
// lease_expires_at spares reading leases that are plainly current.
// leasedBy is it without the time, for a statement that gives it as an
// expression.
const (
	leasedBy = `SELECT ` + workColumns + ` FROM work_items
	WHERE environment_id = ? AND state != 'stopped' AND lease_expires_at IS NOT NULL AND lease_expires_at <= `
	leasedQuery = leasedBy + `?`
)

// leasedWork reads leasedQuery; locking skips the items another server is
// settling or changing: it decides them.
func (s *Store) leasedWork(ctx context.Context, q Conn, environmentID string, now time.Time, lock string) ([]storage.Work, error) {
	return queryAll(ctx, q, scanWork, leasedQuery+lock, environmentID, now)
}

// due reads, in one statement, the environment's live items whose lease
// lapsed by now (locking skips the items another server is settling or
// changing: it decides them) and the items a claim may take at now: the
// oldest queued item nobody claimed and, when c reclaims, the oldest
// claimed long enough ago; workqueue.ClaimIn decides. The unclaimed item
// is one LIMIT 1 step into work_items_claimable (environment_id, state,
// claimed_at, queued_at, id): its ORDER BY names the index's columns, as
// PostgreSQL walks an index in order for IS NULL only when told so (with
// ORDER BY queued_at, id it read and sorted every unclaimed item). The
// reclaimable one walks work_items_reclaimable, the claimed items in queue
// order, to the first claimed before the cutoff; the leases,
// work_items_leases. Locking skips the items other pollers hold, so
// concurrent claims neither wait for each other nor get the same item.
// With clockKept, the statement compares with the clock the claim's
// first statement kept (Dialect.ClaimClock) rather than with now.
func (s *Store) due(ctx context.Context, q Conn, c storage.Claim, now time.Time, clockKept bool, lock string) (leased, claimable []storage.Work, err error) {
	at, args := "?", []any{c.EnvironmentID, now, c.EnvironmentID}
	if clockKept {
		at, args = s.d.ClaimClock.Kept, []any{c.EnvironmentID, c.EnvironmentID}
	}
	query := `WITH leased AS (` + leasedBy + at + lock + `),
		unclaimed AS (SELECT ` + workColumns + ` FROM work_items
			WHERE environment_id = ? AND state = 'queued' AND claimed_at IS NULL
			ORDER BY environment_id, state, claimed_at, queued_at, id LIMIT 1` + lock + `)`
	parts := `SELECT 0, * FROM leased UNION ALL SELECT 1, * FROM unclaimed`
	if c.ReclaimOlderThan > 0 {
		cutoff := "?"
		if clockKept {
			cutoff = s.d.ClaimClock.KeptBefore
			args = append(args, c.EnvironmentID, c.ReclaimOlderThan.Seconds())
		} else {
			args = append(args, c.EnvironmentID, now.Add(-c.ReclaimOlderThan))
		}
		query += `, old AS (SELECT ` + workColumns + ` FROM work_items
			WHERE environment_id = ? AND state = 'queued' AND claimed_at IS NOT NULL AND claimed_at <= ` + cutoff + `
			ORDER BY queued_at, id LIMIT 1` + lock + `)`
		parts += ` UNION ALL SELECT 1, * FROM old`
	}
	rows, err := q.Query(ctx, query+" "+parts, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind int
		w, err := scanWork(taggedRow{rows, &kind})
		if err != nil {
			return nil, nil, err
		}
		if kind == 0 {
			leased = append(leased, w)
		} else {
			claimable = append(claimable, w)
		}
	}
	return leased, claimable, rows.Err()
}

// taggedRow scans a row whose first column, tag, precedes what Row's
// reader scans.
type taggedRow struct {
	Row
	tag any
}

func (r taggedRow) Scan(dest ...any) error { return r.Row.Scan(append([]any{r.tag}, dest...)...) }

// EnsureWork implements storage.WorkQueue.
func (s *Store) EnsureWork(ctx context.Context, sessionID string, w storage.Work) (out storage.Work, queued bool, err error) {
	err = s.write(ctx, func(tx *tx) error {
		out, queued, err = workqueue.EnsureIn(ctx, workRows{tx: tx}, sessionID, w)
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
		if lapsed, err := s.anyLapsed(ctx, environmentID, now); err != nil || !lapsed {
			return nil, err
		}
	}
	var settled []storage.Work
	err := s.write(ctx, func(tx *tx) (err error) {
		if settled, err = workqueue.ExpireIn(ctx, workRows{tx: tx}, environmentID); err == nil && workqueue.Requeued(settled) {
			err = s.b.Notify(ctx, tx, storage.TopicQueue, environmentID)
		}
		return err
	})
	return settled, err
}

// anyLapsed reports, outside a transaction, whether a lease of the
// environment lapsed by now.
func (s *Store) anyLapsed(ctx context.Context, environmentID string, now time.Time) (bool, error) {
	leased, err := s.leasedWork(ctx, s.db(), environmentID, now, "")
	return slices.ContainsFunc(leased, func(w storage.Work) bool { return workqueue.Lapsed(w, now) }), err
}

// ClaimWork implements storage.WorkQueue. When nothing is claimable the
// transaction still commits what the expiry settled (and the poll noted).
func (s *Store) ClaimWork(ctx context.Context, c storage.Claim) (claimed storage.Work, settled []storage.Work, err error) {
	if s.d.SingleWriter {
		open := s.openQueue(ctx, s.db(), c)
		if open.err != nil {
			return storage.Work{}, nil, open.err
		}
		now := open.now
		leased, candidates, err := s.due(ctx, s.db(), c, now, false, "")
		if err != nil {
			return storage.Work{}, nil, err
		}
		lapsed := slices.ContainsFunc(leased, func(w storage.Work) bool { return workqueue.Lapsed(w, now) })
		if _, ok := workqueue.Next(candidates, now, c.ReclaimOlderThan); !ok && !lapsed {
			return storage.Work{}, nil, storage.ErrNoWork
		}
	}
	var noWork bool
	err = s.write(ctx, func(tx *tx) (err error) {
		open := s.openQueue(ctx, tx, c)
		if !open.sent && open.err != nil {
			return open.err
		}
		claimed, settled, err = workqueue.ClaimIn(ctx, workRows{tx: tx, open: open}, c)
		if noWork = errors.Is(err, storage.ErrNoWork); noWork {
			err = nil
		}
		if err == nil && workqueue.Requeued(settled) {
			err = s.b.Notify(ctx, tx, storage.TopicQueue, c.EnvironmentID)
		}
		return err
	})
	if err != nil {
		// Nothing of the transaction stayed: no lease was settled.
		return storage.Work{}, nil, err
	}
	if noWork {
		return storage.Work{}, settled, storage.ErrNoWork
	}
	return claimed, settled, nil
}

// queueOpen is what a claim's first statement finds: the clock to claim
// at, or why the claim may not go on (storage.ErrNotFound,
// storage.ErrEnvironmentArchived, or the database's error).
type queueOpen struct {
	now time.Time
	err error
	// sent: the statement waits to go with the claim's query, which reads
	// the clock it keeps (Dialect.ClaimClock); now and err are set once
	// that query is sent.
	sent bool
}

// openQueue reads, through q, whether c's environment is open, and the
// clock to claim at: in one statement where the clock is the database's,
// which also notes c's poll where the backend keeps polls
// (Dialect.NotePoll). A poll is then one transaction, not one to note it
// and one to claim. Where the clock is kept for the transaction
// (Dialect.ClaimClock) and q can send a read with the next statement
// (ReadDeferrer), the statement goes with the claim's query, in one round
// trip.
func (s *Store) openQueue(ctx context.Context, q Conn, c storage.Claim) *queueOpen {
	open := &queueOpen{}
	clock := s.d.Clock
	var deferrer ReadDeferrer
	if t, ok := q.(*tx); ok {
		deferrer, _ = t.Conn.(ReadDeferrer)
	}
	if s.d.ClaimClock.Keep != "" && deferrer != nil {
		clock, open.sent = s.d.ClaimClock.Keep, true
	}
	query, args := `SELECT archived_at`, []any{}
	if clock != "" {
		query += ", " + clock
	}
	query += ` FROM environments WHERE id = ?`
	if s.d.NotePoll != "" && !c.PolledAt.IsZero() {
		query = s.d.NotePoll + " " + query
		args = append(args, c.EnvironmentID, c.WorkerID, c.PolledAt)
	}
	args = append(args, c.EnvironmentID)
	if open.sent {
		deferrer.DeferRead(ctx, query, args, func(rows Rows) { open.read(rows, true) })
		return open
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		open.err = err
		return open
	}
	open.read(rows, clock != "")
	if open.err == nil && clock == "" {
		open.now, open.err = s.b.Now(ctx, q)
	}
	return open
}

// read reads openQueue's row, and the clock with it when withClock.
func (o *queueOpen) read(rows Rows, withClock bool) {
	defer rows.Close()
	if !rows.Next() {
		if o.err = rows.Err(); o.err == nil {
			o.err = storage.ErrNotFound
		}
		return
	}
	var archivedAt *time.Time
	dest := []any{&archivedAt}
	if withClock {
		dest = append(dest, &o.now)
	}
	if o.err = rows.Scan(dest...); o.err != nil {
		return
	}
	if archivedAt != nil {
		o.err = storage.ErrEnvironmentArchived
	}
	o.now = o.now.UTC().Truncate(time.Microsecond)
}

// changeWork locks one item and applies a rule of package workqueue to it.
func (s *Store) changeWork(ctx context.Context, environmentID, workID string, rule func(storage.Work, time.Time) (storage.Work, bool, error)) (storage.Work, error) {
	var out storage.Work
	err := s.write(ctx, func(tx *tx) (err error) {
		out, err = workqueue.ChangeIn(ctx, workRows{tx: tx}, environmentID, workID, rule)
		return err
	})
	return out, err
}

// workRows are the work queue's rows in a write transaction
// (workqueue.Rows), locked as they are read.
type workRows struct {
	tx *tx
	// open, for a claim, is its first statement's reading of the clock.
	open *queueOpen
}

func (r workRows) Now(ctx context.Context) (time.Time, error) {
	if r.open != nil && !r.open.sent {
		return r.open.now, nil
	}
	return r.tx.s.b.Now(ctx, r.tx)
}

func (r workRows) Work(ctx context.Context, environmentID, workID string) (storage.Work, error) {
	return r.tx.s.getWork(ctx, r.tx, environmentID, workID, true)
}

// Due reads the items at the clock the claim's first statement read, sent
// with it where it waits to be (queueOpen.sent).
func (r workRows) Due(ctx context.Context, c storage.Claim) (now time.Time, leased, claimable []storage.Work, err error) {
	if r.open == nil || !r.open.sent {
		if now, err = r.Now(ctx); err != nil {
			return time.Time{}, nil, nil, err
		}
		leased, claimable, err = r.tx.s.due(ctx, r.tx, c, now, false, r.tx.s.d.SkipLocked)
		return now, leased, claimable, err
	}
	leased, claimable, err = r.tx.s.due(ctx, r.tx, c, time.Time{}, true, r.tx.s.d.SkipLocked)
	if err == nil {
		err = r.open.err
	}
	return r.open.now, leased, claimable, err
}

func (r workRows) Leased(ctx context.Context, environmentID string, now time.Time) ([]storage.Work, error) {
	return r.tx.s.leasedWork(ctx, r.tx, environmentID, now, r.tx.s.d.SkipLocked)
}

// SaveWork's and InsertCredential's statements are deferred where the
// backend can (to the COMMIT's pipeline on PostgreSQL): nothing reads
// their row counts, and their errors fail the transaction.
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
	return r.tx.execLater(ctx, insertCredentialSQL, credentialArgs(c, hash)...)
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
