package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/workqueue"
)

// queryer is what both *sql.DB and *sql.Tx offer, so that one scan helper
// serves reads inside and outside transactions.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type rowScanner interface{ Scan(dest ...any) error }

// queryAll runs a query and scans every row with scan; the rows are closed
// when it returns, so the caller may write in the same transaction.
func queryAll[T any](ctx context.Context, q queryer, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// scanJSON reads a row of one JSON column (the body of a stored object).
func scanJSON[T any](r rowScanner) (T, error) {
	var (
		body string
		v    T
	)
	if err := r.Scan(&body); err != nil {
		return v, notFound(err)
	}
	err := json.Unmarshal([]byte(body), &v)
	return v, err
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only documents and metadata maps reach here; they always marshal.
		panic(fmt.Sprintf("sqlite: marshal %T: %v", v, err))
	}
	return string(b)
}

func nullTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return formatTime(*t)
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ErrNotFound
	}
	return err
}

// inList is the "(?, ?, …)" of an IN with one placeholder per value, and
// the values as query arguments: how this package writes every IN list.
func inList[T any](vals []T) (marks string, args []any) {
	args = make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ") + ")", args
}

// limitArg turns a page size into a LIMIT, where 0 means no limit.
func limitArg(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// ---- environments ----

const environmentColumns = `id, name, description, config_type, scope, metadata, created_at, updated_at, archived_at`

func scanEnvironment(r rowScanner) (storage.Environment, error) {
	var (
		e              storage.Environment
		desc, archived sql.NullString
		meta, ca, ua   string
	)
	if err := r.Scan(&e.ID, &e.Name, &desc, &e.ConfigType, &e.Scope, &meta, &ca, &ua, &archived); err != nil {
		return storage.Environment{}, notFound(err)
	}
	if desc.Valid {
		e.Description = &desc.String
	}
	if err := json.Unmarshal([]byte(meta), &e.Metadata); err != nil {
		return storage.Environment{}, err
	}
	var err error
	if e.CreatedAt, err = parseTime(ca); err != nil {
		return storage.Environment{}, err
	}
	if e.UpdatedAt, err = parseTime(ua); err != nil {
		return storage.Environment{}, err
	}
	if e.ArchivedAt, err = nullTime(archived); err != nil {
		return storage.Environment{}, err
	}
	return e, nil
}

func metadataJSON(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	return toJSON(m)
}

// CreateEnvironment implements storage.ControlPlane.
func (s *DB) CreateEnvironment(ctx context.Context, e storage.Environment) error {
	var desc any
	if e.Description != nil {
		desc = *e.Description
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO environments (`+environmentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.Name, desc, e.ConfigType, e.Scope, metadataJSON(e.Metadata), formatTime(e.CreatedAt), formatTime(e.UpdatedAt), nullTimeArg(e.ArchivedAt)); err != nil {
			return fmt.Errorf("create environment %s: %w", e.ID, err)
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.EnvironmentCreated, e.ID))
	})
}

// GetEnvironment implements storage.ControlPlane.
func (s *DB) GetEnvironment(ctx context.Context, id string) (storage.Environment, error) {
	return getEnvironment(ctx, s.db, id)
}

func getEnvironment(ctx context.Context, q queryer, id string) (storage.Environment, error) {
	return scanEnvironment(q.QueryRowContext(ctx, `SELECT `+environmentColumns+` FROM environments WHERE id = ?`, id))
}

// ListEnvironments implements storage.ControlPlane.
func (s *DB) ListEnvironments(ctx context.Context, q storage.ListQuery) ([]storage.Environment, error) {
	return queryAll(ctx, s.db, scanEnvironment, `SELECT `+environmentColumns+` FROM environments
		WHERE (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
}

// UpdateEnvironment implements storage.ControlPlane.
func (s *DB) UpdateEnvironment(ctx context.Context, id string, fn func(*storage.Environment) error) (storage.Environment, error) {
	var out storage.Environment
	err := s.tx(ctx, func(tx *sql.Tx) error {
		e, err := getEnvironment(ctx, tx, id)
		if err != nil {
			return err
		}
		wasArchived := e.ArchivedAt != nil
		if err := fn(&e); err != nil {
			return err
		}
		var desc any
		if e.Description != nil {
			desc = *e.Description
		}
		if _, err = tx.ExecContext(ctx, `UPDATE environments SET name = ?, description = ?, config_type = ?, scope = ?, metadata = ?, updated_at = ?, archived_at = ? WHERE id = ?`,
			e.Name, desc, e.ConfigType, e.Scope, metadataJSON(e.Metadata), formatTime(e.UpdatedAt), nullTimeArg(e.ArchivedAt), id); err != nil {
			return err
		}
		out = e
		return s.emit(ctx, tx, webhooks.ForUpdate(webhooks.EnvironmentUpdated, webhooks.EnvironmentArchived, id, wasArchived, e.ArchivedAt != nil))
	})
	return out, err
}

// DeleteEnvironment implements storage.ControlPlane.
func (s *DB) DeleteEnvironment(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := getEnvironment(ctx, tx, id); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE environment_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return storage.ErrEnvironmentInUse
		}
		now := formatTime(s.now())
		if _, err := tx.ExecContext(ctx, `UPDATE credentials SET revoked_at = ? WHERE environment_id = ? AND revoked_at IS NULL`, now, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM work_items WHERE environment_id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM environments WHERE id = ?`, id); err != nil {
			return err
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.EnvironmentDeleted, id))
	})
}

// ---- agents ----

// CreateAgent implements storage.ControlPlane.
func (s *DB) CreateAgent(ctx context.Context, a api.Agent) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO agents (id, body, created_at, archived_at) VALUES (?, ?, ?, ?)`,
			a.ID, toJSON(a), formatTime(a.CreatedAt), nullTimeArg(a.ArchivedAt)); err != nil {
			return fmt.Errorf("create agent %s: %w", a.ID, err)
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.AgentCreated, a.ID))
	})
}

// GetAgent implements storage.ControlPlane.
func (s *DB) GetAgent(ctx context.Context, id string) (api.Agent, error) {
	return scanJSON[api.Agent](s.db.QueryRowContext(ctx, `SELECT body FROM agents WHERE id = ?`, id))
}

// ListAgents implements storage.ControlPlane.
func (s *DB) ListAgents(ctx context.Context, q storage.ListQuery) ([]api.Agent, error) {
	return queryAll(ctx, s.db, scanJSON[api.Agent], `SELECT body FROM agents
		WHERE (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
}

// UpdateAgent implements storage.ControlPlane.
func (s *DB) UpdateAgent(ctx context.Context, id string, fn func(*api.Agent) error) (api.Agent, error) {
	var out api.Agent
	err := s.tx(ctx, func(tx *sql.Tx) error {
		a, err := scanJSON[api.Agent](tx.QueryRowContext(ctx, `SELECT body FROM agents WHERE id = ?`, id))
		if err != nil {
			return err
		}
		wasArchived := a.ArchivedAt != nil
		if err := fn(&a); err != nil {
			return err
		}
		a.ID = id
		if _, err = tx.ExecContext(ctx, `UPDATE agents SET body = ?, archived_at = ? WHERE id = ?`, toJSON(a), nullTimeArg(a.ArchivedAt), id); err != nil {
			return err
		}
		out = a
		return s.emit(ctx, tx, webhooks.ForUpdate(webhooks.AgentUpdated, webhooks.AgentArchived, id, wasArchived, a.ArchivedAt != nil))
	})
	return out, err
}

// ---- sessions ----

// readSessions reads the sessions the query's condition (over the
// sessions table, with args) selects, each with its resources, in two
// queries. Run it in a transaction, so that both queries agree.
func readSessions(ctx context.Context, q queryer, cond string, args ...any) ([]api.Session, error) {
	out, err := queryAll(ctx, q, scanJSON[api.Session], `SELECT body FROM sessions WHERE `+cond, args...)
	if err != nil || len(out) == 0 {
		return out, err
	}
	ids := make([]string, len(out))
	for i, sess := range out {
		ids[i] = sess.ID
	}
	marks, idArgs := inList(ids)
	rows, err := queryAll(ctx, q, scanResource, `SELECT session_id, body FROM session_resources WHERE session_id IN `+marks+` ORDER BY position`, idArgs...)
	if err != nil {
		return nil, err
	}
	storage.AttachResources(out, rows)
	return out, nil
}

func scanResource(r rowScanner) (storage.SessionResourceRow, error) {
	var (
		row  storage.SessionResourceRow
		body string
	)
	if err := r.Scan(&row.SessionID, &body); err != nil {
		return row, err
	}
	return row, json.Unmarshal([]byte(body), &row.Resource)
}

// getSession reads a session with its resources.
func getSession(ctx context.Context, q queryer, id string) (api.Session, error) {
	list, err := readSessions(ctx, q, `id = ?`, id)
	if err != nil {
		return api.Session{}, err
	}
	if len(list) == 0 {
		return api.Session{}, storage.ErrNotFound
	}
	return list[0], nil
}

// saveSession writes the session row (not its resources, which never
// change after creation).
func saveSession(ctx context.Context, q queryer, sess api.Session) error {
	body := sess
	body.Resources = nil
	_, err := q.ExecContext(ctx, `UPDATE sessions SET status = ?, body = ?, archived_at = ? WHERE id = ?`,
		sess.Status, toJSON(body), nullTimeArg(sess.ArchivedAt), sess.ID)
	return err
}

// CreateSession implements storage.ControlPlane.
func (s *DB) CreateSession(ctx context.Context, sess api.Session, w storage.Work, initial []api.Event) (api.Session, error) {
	var view storage.SessionView
	err := s.tx(ctx, func(tx *sql.Tx) (err error) {
		view, err = storage.CreateSessionIn(ctx, sessionRows{s, tx}, sess, workqueue.Queued(w, sess.EnvironmentID, sess.ID), initial)
		return err
	})
	if err != nil {
		return api.Session{}, err
	}
	s.keepLog(view)
	return view.Session, nil
}

// GetSession implements storage.ControlPlane. Its two reads need no
// transaction: a session's resources never change, and a session deleted
// between them is gone by the next request anyway.
func (s *DB) GetSession(ctx context.Context, id string) (api.Session, error) {
	return getSession(ctx, s.db, id)
}

// ListSessions implements storage.ControlPlane.
func (s *DB) ListSessions(ctx context.Context, q storage.SessionQuery) (list []api.Session, err error) {
	var args []any
	where, order := storage.SessionFilter(q, func(v any) string { args = append(args, v); return "?" })
	args = append(args, limitArg(q.Limit))
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		list, err = readSessions(ctx, tx, where+` ORDER BY id `+order+` LIMIT ?`, args...)
		return err
	})
	return list, err
}

// UpdateSession implements storage.ControlPlane.
func (s *DB) UpdateSession(ctx context.Context, id string, fn func(*api.Session) error) (api.Session, error) {
	var out api.Session
	err := s.tx(ctx, func(tx *sql.Tx) error {
		sess, err := getSession(ctx, tx, id)
		if err != nil {
			return err
		}
		wasArchived := sess.ArchivedAt != nil
		if err := fn(&sess); err != nil {
			return err
		}
		sess.ID = id
		out = sess
		if err := saveSession(ctx, tx, sess); err != nil {
			return err
		}
		return s.emit(ctx, tx, webhooks.ForUpdate(webhooks.SessionUpdated, webhooks.SessionArchived, id, wasArchived, sess.ArchivedAt != nil))
	})
	return out, err
}

// DeleteSession implements storage.ControlPlane.
func (s *DB) DeleteSession(ctx context.Context, id string) error {
	defer s.logs.drop(id)
	return s.tx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one); err != nil {
			return notFound(err)
		}
		if err := workqueue.StopSessionIn(ctx, workRows{s, tx}, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE credentials SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL`, formatTime(s.now()), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return err
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.SessionDeleted, id))
	})
}

// ---- events ----

// viewInTx reads a session with its whole log (see sessionLog) and whether
// a live work item serves it.
func (s *DB) viewInTx(ctx context.Context, q queryer, sessionID string) (storage.SessionView, error) {
	sess, err := getSession(ctx, q, sessionID)
	if err != nil {
		return storage.SessionView{}, err
	}
	log, err := s.sessionLog(ctx, q, sessionID)
	if err != nil {
		return storage.SessionView{}, err
	}
	v := storage.SessionView{Session: sess, Log: log.events, Seq: log.seq}
	v.WorkLive, err = hasLiveWork(ctx, q, sessionID)
	return v, err
}

// sessionRows are a session's rows in a write transaction
// (storage.SessionRows); SQLite's single writer needs no row locks.
type sessionRows struct {
	s  *DB
	tx *sql.Tx
}

func (r sessionRows) View(ctx context.Context, sessionID string) (storage.SessionView, error) {
	return r.s.viewInTx(ctx, r.tx, sessionID)
}

func (r sessionRows) Now(context.Context) (time.Time, error) { return r.s.now(), nil }

func (r sessionRows) InsertEvent(ctx context.Context, sessionID string, e api.Event) (int64, error) {
	res, err := r.tx.ExecContext(ctx, `INSERT INTO session_events (id, session_id, type, body) VALUES (?, ?, ?, ?)`,
		e.ID, sessionID, e.Type, toJSON(e))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId() // seq is the rowid
}

func (r sessionRows) Emit(ctx context.Context, evs ...webhooks.Event) error {
	return r.s.emit(ctx, r.tx, evs...)
}

func (r sessionRows) StoreArchived(ctx context.Context, storeID string) (bool, error) {
	var archived sql.NullString
	err := r.tx.QueryRowContext(ctx, `SELECT archived_at FROM memory_stores WHERE id = ?`, storeID).Scan(&archived)
	return archived.Valid, notFound(err)
}

func (r sessionRows) InsertSession(ctx context.Context, sess api.Session) error {
	body := sess
	body.Resources = nil
	if _, err := r.tx.ExecContext(ctx, `INSERT INTO sessions (id, environment_id, agent_id, status, body, created_at, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.EnvironmentID, sess.Agent.ID, sess.Status, toJSON(body), formatTime(sess.CreatedAt), nullTimeArg(sess.ArchivedAt)); err != nil {
		return err
	}
	for i, res := range sess.Resources {
		if _, err := r.tx.ExecContext(ctx, `INSERT INTO session_resources (id, session_id, position, memory_store_id, body) VALUES (?, ?, ?, ?, ?)`,
			res.ID, sess.ID, i, res.MemoryStoreID, toJSON(res)); err != nil {
			return err
		}
	}
	return nil
}

func (r sessionRows) InsertWork(ctx context.Context, w storage.Work) error {
	return insertWork(ctx, r.tx, w)
}

func (r sessionRows) SaveSession(ctx context.Context, sess api.Session) error {
	return saveSession(ctx, r.tx, sess)
}

// keepLog caches the log of a session whose transaction has committed,
// unless the session ended: nothing reacts to it any more.
func (s *DB) keepLog(v storage.SessionView) {
	if storage.Ended(v.Session) {
		s.logs.drop(v.Session.ID)
		return
	}
	s.logs.put(v.Session.ID, eventLog{seq: v.Seq, events: v.Log})
}

// AppendEvents implements storage.ControlPlane.
func (s *DB) AppendEvents(ctx context.Context, sessionID string, events []api.Event, guard storage.AppendGuard) ([]api.Event, error) {
	var (
		stored []api.Event
		view   storage.SessionView
	)
	err := s.tx(ctx, func(tx *sql.Tx) (err error) {
		view, stored, err = storage.AppendIn(ctx, sessionRows{s, tx}, sessionID, events, guard)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.keepLog(view)
	return stored, nil
}

// ViewSession implements storage.ControlPlane. It reads in one
// transaction, so the log, the session and its work agree.
func (s *DB) ViewSession(ctx context.Context, sessionID string) (storage.SessionView, error) {
	var v storage.SessionView
	err := s.readTx(ctx, func(tx *sql.Tx) (err error) {
		v, err = s.viewInTx(ctx, tx, sessionID)
		return err
	})
	if err != nil {
		return storage.SessionView{}, err
	}
	s.keepLog(v)
	return v, nil
}

// ListEvents implements storage.ControlPlane.
func (s *DB) ListEvents(ctx context.Context, sessionID string, q storage.EventQuery) ([]storage.StoredEvent, error) {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, sessionID).Scan(&one); err != nil {
		return nil, notFound(err)
	}
	var args []any
	where, order := storage.EventFilter(sessionID, q, func(v any) string { args = append(args, v); return "?" })
	args = append(args, limitArg(q.Limit))
	return queryAll(ctx, s.db, scanStoredEvent, `SELECT seq, body FROM session_events WHERE `+where+` ORDER BY seq `+order+` LIMIT ?`, args...)
}

func scanStoredEvent(r rowScanner) (storage.StoredEvent, error) {
	var (
		se   storage.StoredEvent
		body string
	)
	if err := r.Scan(&se.Seq, &body); err != nil {
		return se, err
	}
	err := json.Unmarshal([]byte(body), &se.Event)
	return se, err
}

// EventSeq implements storage.ControlPlane.
func (s *DB) EventSeq(ctx context.Context, sessionID, eventID string) (int64, error) {
	var seq int64
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM session_events WHERE session_id = ? AND id = ?`, sessionID, eventID).Scan(&seq)
	return seq, notFound(err)
}
