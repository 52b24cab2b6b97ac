package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/workqueue"
)

// scanJSON reads a row of one JSON column (the body of a stored object).
func scanJSON[T any](r pgx.Row) (T, error) {
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
		panic(fmt.Sprintf("postgres: marshal %T: %v", v, err))
	}
	return string(b)
}

func metadataJSON(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	return toJSON(m)
}

// args numbers query parameters as they are added, for queries whose
// WHERE clause depends on the request.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// ---- environments ----

const environmentColumns = `id, name, description, config_type, scope, metadata, created_at, updated_at, archived_at`

func scanEnvironment(r pgx.Row) (storage.Environment, error) {
	var (
		e    storage.Environment
		meta string
	)
	if err := r.Scan(&e.ID, &e.Name, &e.Description, &e.ConfigType, &e.Scope, &meta, &e.CreatedAt, &e.UpdatedAt, &e.ArchivedAt); err != nil {
		return storage.Environment{}, notFound(err)
	}
	return e, json.Unmarshal([]byte(meta), &e.Metadata)
}

// CreateEnvironment implements storage.Environments.
func (s *DB) CreateEnvironment(ctx context.Context, e storage.Environment) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO environments (`+environmentColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			e.ID, e.Name, e.Description, e.ConfigType, e.Scope, metadataJSON(e.Metadata), e.CreatedAt, e.UpdatedAt, e.ArchivedAt); err != nil {
			return fmt.Errorf("create environment %s: %w", e.ID, err)
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.EnvironmentCreated, e.ID))
	})
}

func getEnvironment(ctx context.Context, q querier, id string, lock bool) (storage.Environment, error) {
	return scanEnvironment(q.QueryRow(ctx, `SELECT `+environmentColumns+` FROM environments WHERE id = $1`+forUpdate(lock), id))
}

func forUpdate(lock bool) string {
	if lock {
		return ` FOR UPDATE`
	}
	return ``
}

// GetEnvironment implements storage.Environments.
func (s *DB) GetEnvironment(ctx context.Context, id string) (storage.Environment, error) {
	e, err := getEnvironment(ctx, s.pool, id, false)
	return e, unavailable(err)
}

// ListEnvironments implements storage.Environments.
func (s *DB) ListEnvironments(ctx context.Context, q storage.ListQuery) ([]storage.Environment, error) {
	out, err := queryAll(ctx, s.pool, scanEnvironment, `SELECT `+environmentColumns+` FROM environments
		WHERE ($1 = '' OR id < $1) AND ($2 OR archived_at IS NULL) ORDER BY id DESC LIMIT $3`,
		q.After, q.IncludeArchived, limitArg(q.Limit))
	return out, unavailable(err)
}

// UpdateEnvironment implements storage.Environments.
func (s *DB) UpdateEnvironment(ctx context.Context, id string, fn func(*storage.Environment) error) (storage.Environment, error) {
	var out storage.Environment
	err := s.tx(ctx, func(tx pgx.Tx) error {
		e, err := getEnvironment(ctx, tx, id, true)
		if err != nil {
			return err
		}
		wasArchived := e.ArchivedAt != nil
		if err := fn(&e); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `UPDATE environments SET name = $1, description = $2, config_type = $3, scope = $4, metadata = $5, updated_at = $6, archived_at = $7 WHERE id = $8`,
			e.Name, e.Description, e.ConfigType, e.Scope, metadataJSON(e.Metadata), e.UpdatedAt, e.ArchivedAt, id); err != nil {
			return err
		}
		out = e
		return s.emit(ctx, tx, webhooks.ForUpdate(webhooks.EnvironmentUpdated, webhooks.EnvironmentArchived, id, wasArchived, e.ArchivedAt != nil))
	})
	return out, err
}

// DeleteEnvironment implements storage.Environments.
func (s *DB) DeleteEnvironment(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := getEnvironment(ctx, tx, id, true); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE environment_id = $1`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return storage.ErrEnvironmentInUse
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE credentials SET revoked_at = $1 WHERE environment_id = $2 AND revoked_at IS NULL`, now, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM work_items WHERE environment_id = $1`, id); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM environments WHERE id = $1`, id); err != nil {
			return err
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.EnvironmentDeleted, id))
	})
}

// ---- agents ----

// CreateAgent implements storage.Agents.
func (s *DB) CreateAgent(ctx context.Context, a api.Agent) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agents (id, body, created_at, archived_at) VALUES ($1, $2, $3, $4)`,
			a.ID, toJSON(a), a.CreatedAt, a.ArchivedAt); err != nil {
			return fmt.Errorf("create agent %s: %w", a.ID, err)
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.AgentCreated, a.ID))
	})
}

// GetAgent implements storage.Agents.
func (s *DB) GetAgent(ctx context.Context, id string) (api.Agent, error) {
	a, err := scanJSON[api.Agent](s.pool.QueryRow(ctx, `SELECT body FROM agents WHERE id = $1`, id))
	return a, unavailable(err)
}

// ListAgents implements storage.Agents.
func (s *DB) ListAgents(ctx context.Context, q storage.ListQuery) ([]api.Agent, error) {
	out, err := queryAll(ctx, s.pool, scanJSON[api.Agent], `SELECT body FROM agents
		WHERE ($1 = '' OR id < $1) AND ($2 OR archived_at IS NULL) ORDER BY id DESC LIMIT $3`,
		q.After, q.IncludeArchived, limitArg(q.Limit))
	return out, unavailable(err)
}

// UpdateAgent implements storage.Agents.
func (s *DB) UpdateAgent(ctx context.Context, id string, fn func(*api.Agent) error) (api.Agent, error) {
	var out api.Agent
	err := s.tx(ctx, func(tx pgx.Tx) error {
		a, err := scanJSON[api.Agent](tx.QueryRow(ctx, `SELECT body FROM agents WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		wasArchived := a.ArchivedAt != nil
		if err := fn(&a); err != nil {
			return err
		}
		a.ID = id
		if _, err = tx.Exec(ctx, `UPDATE agents SET body = $1, archived_at = $2 WHERE id = $3`, toJSON(a), a.ArchivedAt, id); err != nil {
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
// queries through q (one transaction, so that they agree). lock takes the
// sessions' row locks, which order every change to a session and its log.
func readSessions(ctx context.Context, q querier, lock bool, cond string, args ...any) ([]api.Session, error) {
	out, err := queryAll(ctx, q, scanJSON[api.Session], `SELECT body FROM sessions WHERE `+cond+forUpdate(lock), args...)
	if err != nil || len(out) == 0 {
		return out, err
	}
	ids := make([]string, len(out))
	for i, sess := range out {
		ids[i] = sess.ID
	}
	rows, err := queryAll(ctx, q, scanResource, `SELECT session_id, body FROM session_resources WHERE session_id = ANY($1) ORDER BY position`, ids)
	if err != nil {
		return nil, err
	}
	storage.AttachResources(out, rows)
	return out, nil
}

func scanResource(r pgx.Row) (storage.SessionResourceRow, error) {
	var (
		row  storage.SessionResourceRow
		body string
	)
	if err := r.Scan(&row.SessionID, &body); err != nil {
		return row, err
	}
	return row, json.Unmarshal([]byte(body), &row.Resource)
}

// getSession reads a session with its resources; lock takes its row lock.
func getSession(ctx context.Context, q querier, id string, lock bool) (api.Session, error) {
	list, err := readSessions(ctx, q, lock, `id = $1`, id)
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
func saveSession(ctx context.Context, q querier, sess api.Session) error {
	body := sess
	body.Resources = nil
	_, err := q.Exec(ctx, `UPDATE sessions SET status = $1, body = $2, archived_at = $3 WHERE id = $4`,
		sess.Status, toJSON(body), sess.ArchivedAt, sess.ID)
	return err
}

// CreateSession implements storage.Sessions.
func (s *DB) CreateSession(ctx context.Context, sess api.Session, w storage.Work, initial []api.Event) (api.Session, error) {
	var view storage.SessionView
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		view, err = storage.CreateSessionIn(ctx, sessionRows{s, tx}, sess, workqueue.Queued(w, sess.EnvironmentID, sess.ID), initial)
		return err
	})
	if err != nil {
		return api.Session{}, err
	}
	return view.Session, nil
}

// GetSession implements storage.Sessions.
func (s *DB) GetSession(ctx context.Context, id string) (api.Session, error) {
	sess, err := getSession(ctx, s.pool, id, false)
	return sess, unavailable(err)
}

// ListSessions implements storage.Sessions.
func (s *DB) ListSessions(ctx context.Context, q storage.SessionQuery) (list []api.Session, err error) {
	var a args
	where, order := storage.SessionFilter(q, a.add)
	cond := where + ` ORDER BY id ` + order + ` LIMIT ` + a.add(limitArg(q.Limit))
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		list, err = readSessions(ctx, tx, false, cond, a...)
		return err
	})
	return list, err
}

// UpdateSession implements storage.Sessions.
func (s *DB) UpdateSession(ctx context.Context, id string, fn func(*api.Session) error) (api.Session, error) {
	var out api.Session
	err := s.tx(ctx, func(tx pgx.Tx) error {
		sess, err := getSession(ctx, tx, id, true)
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

// DeleteSession implements storage.Sessions.
func (s *DB) DeleteSession(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := getSession(ctx, tx, id, true); err != nil {
			return err
		}
		if err := workqueue.StopSessionIn(ctx, workRows{s, tx}, id); err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE credentials SET revoked_at = $1 WHERE session_id = $2 AND revoked_at IS NULL`, now, id); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id); err != nil {
			return err
		}
		return s.emit(ctx, tx, webhooks.Of(webhooks.SessionDeleted, id))
	})
}

// ---- events ----

// viewInTx reads a session, its whole log and whether its work is live,
// all through q (one transaction, so they agree). lock takes the session's
// row lock first.
func viewInTx(ctx context.Context, q querier, sessionID string, lock bool) (storage.SessionView, error) {
	sess, err := getSession(ctx, q, sessionID, lock)
	if err != nil {
		return storage.SessionView{}, err
	}
	v := storage.SessionView{Session: sess}
	rows, err := queryAll(ctx, q, scanStoredEvent, `SELECT seq, body FROM session_events WHERE session_id = $1 ORDER BY seq`, sessionID)
	if err != nil {
		return storage.SessionView{}, err
	}
	for _, r := range rows {
		v.Log = append(v.Log, r.Event)
		v.Seq = r.Seq
	}
	v.WorkLive, err = hasLiveWork(ctx, q, sessionID)
	return v, err
}

// sessionRows are a session's rows in a transaction
// (storage.SessionRows). View takes the session's row lock, so that
// appends to one session, from any replica, run one at a time.
type sessionRows struct {
	s  *DB
	tx pgx.Tx
}

func (r sessionRows) View(ctx context.Context, sessionID string) (storage.SessionView, error) {
	return viewInTx(ctx, r.tx, sessionID, true)
}

func (r sessionRows) Now(ctx context.Context) (time.Time, error) { return r.s.now(ctx, r.tx) }

func (r sessionRows) InsertEvent(ctx context.Context, sessionID string, e api.Event) (int64, error) {
	var seq int64
	err := r.tx.QueryRow(ctx, `INSERT INTO session_events (id, session_id, type, body) VALUES ($1, $2, $3, $4) RETURNING seq`,
		e.ID, sessionID, e.Type, toJSON(e)).Scan(&seq)
	return seq, err
}

func (r sessionRows) Emit(ctx context.Context, evs ...webhooks.Event) error {
	return r.s.emit(ctx, r.tx, evs...)
}

// StoreArchived holds the store's row FOR SHARE: a store being deleted or
// archived meanwhile waits for this session, then sees it attached.
func (r sessionRows) StoreArchived(ctx context.Context, storeID string) (bool, error) {
	var archived *time.Time
	err := r.tx.QueryRow(ctx, `SELECT archived_at FROM memory_stores WHERE id = $1 FOR SHARE`, storeID).Scan(&archived)
	return archived != nil, notFound(err)
}

func (r sessionRows) InsertSession(ctx context.Context, sess api.Session) error {
	body := sess
	body.Resources = nil
	if _, err := r.tx.Exec(ctx, `INSERT INTO sessions (id, environment_id, agent_id, status, body, created_at, archived_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		sess.ID, sess.EnvironmentID, sess.Agent.ID, sess.Status, toJSON(body), sess.CreatedAt, sess.ArchivedAt); err != nil {
		return err
	}
	for i, res := range sess.Resources {
		if _, err := r.tx.Exec(ctx, `INSERT INTO session_resources (id, session_id, position, memory_store_id, body) VALUES ($1, $2, $3, $4, $5)`,
			res.ID, sess.ID, i, res.MemoryStoreID, toJSON(res)); err != nil {
			return err
		}
	}
	return nil
}

func (r sessionRows) InsertWork(ctx context.Context, w storage.Work) error {
	return insertWork(ctx, r.tx, w)
}

// SaveSession also wakes the event streams and runners of every replica
// (at commit).
func (r sessionRows) SaveSession(ctx context.Context, sess api.Session) error {
	if err := saveSession(ctx, r.tx, sess); err != nil {
		return err
	}
	return notifyWake(ctx, r.tx, storage.TopicSession, sess.ID)
}

// AppendEvents implements storage.Events.
func (s *DB) AppendEvents(ctx context.Context, sessionID string, events []api.Event, guard storage.AppendGuard) ([]api.Event, error) {
	var stored []api.Event
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		_, stored, err = storage.AppendIn(ctx, sessionRows{s, tx}, sessionID, events, guard)
		return err
	})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// ViewSession implements storage.Events. It reads in one REPEATABLE READ
// transaction, so the log, the session and its work agree.
func (s *DB) ViewSession(ctx context.Context, sessionID string) (storage.SessionView, error) {
	var v storage.SessionView
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		v, err = viewInTx(ctx, tx, sessionID, false)
		return err
	})
	return v, err
}

// ListEvents implements storage.Events.
func (s *DB) ListEvents(ctx context.Context, sessionID string, q storage.EventQuery) ([]storage.StoredEvent, error) {
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, sessionID).Scan(&one); err != nil {
		return nil, unavailable(notFound(err))
	}
	var a args
	where, order := storage.EventFilter(sessionID, q, a.add)
	out, err := queryAll(ctx, s.pool, scanStoredEvent, `SELECT seq, body FROM session_events WHERE `+where+` ORDER BY seq `+order+` LIMIT `+a.add(limitArg(q.Limit)), a...)
	return out, unavailable(err)
}

func scanStoredEvent(r pgx.Row) (storage.StoredEvent, error) {
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

// EventSeq implements storage.Events.
func (s *DB) EventSeq(ctx context.Context, sessionID, eventID string) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM session_events WHERE session_id = $1 AND id = $2`, sessionID, eventID).Scan(&seq)
	return seq, unavailable(notFound(err))
}
