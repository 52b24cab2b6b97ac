package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/workqueue"
)

// ---- environments ----

const environmentColumns = `id, name, description, config_type, scope, metadata, created_at, updated_at, archived_at`

func scanEnvironment(r Row) (storage.Environment, error) {
	var (
		e    storage.Environment
		meta string
	)
	if err := r.Scan(&e.ID, &e.Name, &e.Description, &e.ConfigType, &e.Scope, &meta, &e.CreatedAt, &e.UpdatedAt, &e.ArchivedAt); err != nil {
		return storage.Environment{}, err
	}
	return e, json.Unmarshal([]byte(meta), &e.Metadata)
}

// CreateEnvironment implements storage.Environments.
func (s *Store) CreateEnvironment(ctx context.Context, e storage.Environment) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO environments (`+environmentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.Name, e.Description, e.ConfigType, e.Scope, metadataJSON(e.Metadata), e.CreatedAt, e.UpdatedAt, e.ArchivedAt); err != nil {
			return fmt.Errorf("create environment %s: %w", e.ID, err)
		}
		return tx.emit(ctx, webhooks.Of(webhooks.EnvironmentCreated, e.ID))
	})
}

func (s *Store) getEnvironment(ctx context.Context, q Conn, id string, lock bool) (storage.Environment, error) {
	return scanEnvironment(q.QueryRow(ctx, `SELECT `+environmentColumns+` FROM environments WHERE id = ?`+s.lock(lock), id))
}

// GetEnvironment implements storage.Environments.
func (s *Store) GetEnvironment(ctx context.Context, id string) (storage.Environment, error) {
	return s.getEnvironment(ctx, s.db(), id, false)
}

// ListEnvironments implements storage.Environments.
func (s *Store) ListEnvironments(ctx context.Context, q storage.ListQuery) ([]storage.Environment, error) {
	return queryAll(ctx, s.db(), scanEnvironment, `SELECT `+environmentColumns+` FROM environments
		WHERE (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
}

// UpdateEnvironment implements storage.Environments.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, fn func(*storage.Environment) error) (storage.Environment, error) {
	var out storage.Environment
	err := s.write(ctx, func(tx *tx) error {
		e, err := s.getEnvironment(ctx, tx, id, true)
		if err != nil {
			return err
		}
		wasArchived := e.ArchivedAt != nil
		if err := fn(&e); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `UPDATE environments SET name = ?, description = ?, config_type = ?, scope = ?, metadata = ?, updated_at = ?, archived_at = ? WHERE id = ?`,
			e.Name, e.Description, e.ConfigType, e.Scope, metadataJSON(e.Metadata), e.UpdatedAt, e.ArchivedAt, id); err != nil {
			return err
		}
		out = e
		return tx.emit(ctx, webhooks.ForUpdate(webhooks.EnvironmentUpdated, webhooks.EnvironmentArchived, id, wasArchived, e.ArchivedAt != nil))
	})
	return out, err
}

// DeleteEnvironment implements storage.Environments.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := s.getEnvironment(ctx, tx, id, true); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE environment_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return storage.ErrEnvironmentInUse
		}
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		// Its sessions are deleted, and their tokens revoked with them:
		// its keys are what is left to revoke.
		if _, err := tx.Exec(ctx, `UPDATE credentials SET revoked_at = ? WHERE kind = 'environment_key' AND environment_id = ? AND revoked_at IS NULL`, now, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM work_items WHERE environment_id = ?`, id); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM environments WHERE id = ?`, id); err != nil {
			return err
		}
		return tx.emit(ctx, webhooks.Of(webhooks.EnvironmentDeleted, id))
	})
}

// ---- agents ----

// CreateAgent implements storage.Agents.
func (s *Store) CreateAgent(ctx context.Context, a api.Agent) error {
	return s.write(ctx, func(tx *tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO agents (id, body, created_at, archived_at) VALUES (?, ?, ?, ?)`,
			a.ID, toJSON(a), a.CreatedAt, a.ArchivedAt); err != nil {
			return fmt.Errorf("create agent %s: %w", a.ID, err)
		}
		return tx.emit(ctx, webhooks.Of(webhooks.AgentCreated, a.ID))
	})
}

// GetAgent implements storage.Agents.
func (s *Store) GetAgent(ctx context.Context, id string) (api.Agent, error) {
	return scanJSON[api.Agent](s.db().QueryRow(ctx, `SELECT body FROM agents WHERE id = ?`, id))
}

// ListAgents implements storage.Agents.
func (s *Store) ListAgents(ctx context.Context, q storage.ListQuery) ([]api.Agent, error) {
	return queryAll(ctx, s.db(), scanJSON[api.Agent], `SELECT body FROM agents
		WHERE (? = '' OR id < ?) AND (? OR archived_at IS NULL) ORDER BY id DESC LIMIT ?`,
		q.After, q.After, q.IncludeArchived, limitArg(q.Limit))
}

// UpdateAgent implements storage.Agents.
func (s *Store) UpdateAgent(ctx context.Context, id string, fn func(*api.Agent) error) (api.Agent, error) {
	var out api.Agent
	err := s.write(ctx, func(tx *tx) error {
		a, err := scanJSON[api.Agent](tx.QueryRow(ctx, `SELECT body FROM agents WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return err
		}
		wasArchived := a.ArchivedAt != nil
		if err := fn(&a); err != nil {
			return err
		}
		a.ID = id
		if _, err = tx.Exec(ctx, `UPDATE agents SET body = ?, archived_at = ? WHERE id = ?`, toJSON(a), a.ArchivedAt, id); err != nil {
			return err
		}
		out = a
		return tx.emit(ctx, webhooks.ForUpdate(webhooks.AgentUpdated, webhooks.AgentArchived, id, wasArchived, a.ArchivedAt != nil))
	})
	return out, err
}

// ---- sessions ----

// readSessions reads the sessions the query's condition (over the
// sessions table, with args) selects, each with its resources, in two
// queries through q (one transaction, so that they agree). lock takes the
// sessions' row locks, which order every change to a session and its log.
func (s *Store) readSessions(ctx context.Context, q Conn, lock bool, cond string, args ...any) ([]api.Session, error) {
	out, err := queryAll(ctx, q, scanJSON[api.Session], `SELECT body FROM sessions WHERE `+cond+s.lock(lock), args...)
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

func scanResource(r Row) (storage.SessionResourceRow, error) {
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
func (s *Store) getSession(ctx context.Context, q Conn, id string, lock bool) (api.Session, error) {
	list, err := s.readSessions(ctx, q, lock, `id = ?`, id)
	if err != nil {
		return api.Session{}, err
	}
	if len(list) == 0 {
		return api.Session{}, storage.ErrNotFound
	}
	return list[0], nil
}

// getSessionRow reads a session without its resources; lock takes its row
// lock.
func (s *Store) getSessionRow(ctx context.Context, q Conn, id string, lock bool) (api.Session, error) {
	list, err := queryAll(ctx, q, scanJSON[api.Session], `SELECT body FROM sessions WHERE id = ?`+s.lock(lock), id)
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
func saveSession(ctx context.Context, q Conn, sess api.Session) error {
	body := sess
	body.Resources = nil
	_, err := q.Exec(ctx, `UPDATE sessions SET status = ?, body = ?, archived_at = ? WHERE id = ?`,
		sess.Status, toJSON(body), sess.ArchivedAt, sess.ID)
	return err
}

// CreateSession implements storage.Sessions.
func (s *Store) CreateSession(ctx context.Context, sess api.Session, w storage.Work, initial []api.Event) (api.Session, error) {
	var view storage.SessionView
	err := s.write(ctx, func(tx *tx) (err error) {
		view, err = storage.CreateSessionIn(ctx, sessionRows{tx}, sess, workqueue.Queued(w, sess.EnvironmentID, sess.ID), initial)
		return err
	})
	if err != nil {
		return api.Session{}, err
	}
	s.keepLog(view, nil, logTail{})
	return view.Session, nil
}

// GetSession implements storage.Sessions. Its two reads need no
// transaction: a session's resources never change, and a session deleted
// between them is gone by the next request anyway.
func (s *Store) GetSession(ctx context.Context, id string) (api.Session, error) {
	return s.getSession(ctx, s.db(), id, false)
}

// ListSessions implements storage.Sessions.
func (s *Store) ListSessions(ctx context.Context, q storage.SessionQuery) (list []api.Session, err error) {
	var a args
	where, order := storage.SessionFilter(q, a.add)
	cond := where + ` ORDER BY id ` + order + ` LIMIT ` + a.add(limitArg(q.Limit))
	err = s.read(ctx, func(tx Conn) error {
		list, err = s.readSessions(ctx, tx, false, cond, a...)
		return err
	})
	return list, err
}

// UpdateSession implements storage.Sessions.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*api.Session) error) (api.Session, error) {
	var out api.Session
	err := s.write(ctx, func(tx *tx) error {
		sess, err := s.getSession(ctx, tx, id, true)
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
		return tx.emit(ctx, webhooks.ForUpdate(webhooks.SessionUpdated, webhooks.SessionArchived, id, wasArchived, sess.ArchivedAt != nil))
	})
	return out, err
}

// DeleteSession implements storage.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	defer s.logs.drop(id)
	return s.write(ctx, func(tx *tx) error {
		if err := tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = ?`+s.d.ForUpdate, id).Scan(new(int)); err != nil {
			return err
		}
		if err := workqueue.StopSessionIn(ctx, workRows{tx: tx}, id); err != nil {
			return err
		}
		now, err := s.b.Now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE credentials SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL`, now, id); err != nil {
			return err
		}
		// The events are deleted here, not by a cascade: PostgreSQL's have
		// no foreign key to the session (its migration 0016).
		if _, err = tx.Exec(ctx, `DELETE FROM session_events WHERE session_id = ?`, id); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return err
		}
		return tx.emit(ctx, webhooks.Of(webhooks.SessionDeleted, id))
	})
}

// ---- events ----

// viewInTx reads a session with its whole log (see sessionLog) and whether
// a live work item serves it, all through q (one transaction, so they
// agree). lock takes the session's row lock first.
// A session whose log is cached has its resources cached with it (they
// never change after creation), so only its row is read.
func (s *Store) viewInTx(ctx context.Context, q Conn, sessionID string, lock bool) (storage.SessionView, error) {
	cached := s.logs.get(sessionID, lock)
	if lock && cached.resourcesKnown && s.d.ForUpdate != "" {
		return s.lockedView(ctx, q, sessionID, cached)
	}
	var (
		sess api.Session
		err  error
	)
	if cached.resourcesKnown {
		sess, err = s.getSessionRow(ctx, q, sessionID, lock)
		sess.Resources = cached.resources
	} else {
		sess, err = s.getSession(ctx, q, sessionID, lock)
	}
	if err != nil {
		return storage.SessionView{}, err
	}
	log, after, err := s.sessionLog(ctx, q, sessionID, cached)
	if err != nil {
		return storage.SessionView{}, err
	}
	if t, ok := q.(*tx); ok {
		t.after = after
	}
	return storage.SessionView{Session: sess, Log: log.events, Seq: log.seq, WorkLive: after.workLive}, nil
}

// lockedView is viewInTx with the lock, for a session whose resources
// are cached, where rows are locked: the session's row is locked and read
// with the rest of the view in one statement. That statement's snapshot is
// taken before it waits for the lock, so it misses what the lock's holder
// committed; only the row it locks is read as it is once the lock is had
// (PostgreSQL rereads a locked row that changed). Every append sets the
// row's updated_at to its last event's processed_at, which grows along
// the log: unless the row is as the append of the last event read left it,
// it was written since — by an append that went on with the log, or an
// update — and the rest is read again, in the lock's time. It is read
// again too when no live work was seen: EnsureWork queues an item under
// the same lock without writing the row, and the runtime's step depends
// on it (a session left waiting for a worker, or resumed by one).
func (s *Store) lockedView(ctx context.Context, q Conn, sessionID string, cached eventLog) (storage.SessionView, error) {
	first := s.lockStatement(sessionID, cached.seq)
	rows, err := q.Query(ctx, first.Query, first.Args...)
	if err != nil {
		return storage.SessionView{}, err
	}
	var body string
	log, after, err := readLogTail(rows, cached, &body)
	if err != nil {
		return storage.SessionView{}, err
	}
	if body == "" {
		return storage.SessionView{}, storage.ErrNotFound
	}
	var sess api.Session
	if row := cached.row; row != nil && row.body == body {
		sess = row.session // as this server's last append wrote it
	} else if err := json.Unmarshal([]byte(body), &sess); err != nil {
		return storage.SessionView{}, err
	}
	sess.Resources = cached.resources
	if n := len(log.events); n == 0 || log.events[n-1].ProcessedAt == nil || !sess.UpdatedAt.Equal(*log.events[n-1].ProcessedAt) || !after.workLive {
		if log, after, err = s.sessionLog(ctx, q, sessionID, log); err != nil {
			return storage.SessionView{}, err
		}
	}
	if t, ok := q.(*tx); ok {
		t.after = after
	}
	return storage.SessionView{Session: sess, Log: log.events, Seq: log.seq, WorkLive: after.workLive}, nil
}

// lockStatement is lockedView's statement, for a session whose log is
// cached up to seq: the session's row locked and read with the log's tail.
func (s *Store) lockStatement(sessionID string, seq int64) Statement {
	tail, args := logTailQuery(sessionID, seq, s.d.Clock)
	return Statement{`SELECT s.body, t.seq, t.body, t.at FROM sessions s, (` + tail + `) t WHERE s.id = ? ORDER BY t.seq` + s.d.ForUpdate + ` OF s`, append(args, sessionID)}
}

// sessionRows are a session's rows in a write transaction
// (storage.SessionRows). View takes the session's row lock, so that
// appends to one session, from any server, run one at a time.
type sessionRows struct{ tx *tx }

func (r sessionRows) View(ctx context.Context, sessionID string) (storage.SessionView, error) {
	return r.tx.s.viewInTx(ctx, r.tx, sessionID, true)
}

// Now is the clock read with the view (Dialect.Clock), or the backend's.
func (r sessionRows) Now(ctx context.Context) (time.Time, error) {
	if at := r.tx.after.clock; at != nil {
		return at.UTC().Truncate(time.Microsecond), nil
	}
	return r.tx.s.b.Now(ctx, r.tx)
}

// StoreEvents stores events in one statement. Sequence numbers are taken
// in the order of its rows; that order is checked, not assumed, since SQL
// does not promise the order RETURNING gives them back in. Where the
// statement's rows are read only after the COMMIT was sent (QueryDeferrer)
// the check comes too late to undo it, so the statement takes the numbers
// in the events' order itself (Dialect.NextEventSeq). Where the
// backend notifies in SQL (Dialect.Notify), the session row's update and
// the wake ride in the same statement, in a WITH; elsewhere they are
// statements of their own.
func (r sessionRows) StoreEvents(ctx context.Context, sess api.Session, events []api.Event) (int64, error) {
	sessionID := sess.ID
	var (
		a    args
		rows strings.Builder
		ctes []string
	)
	if notify := r.tx.s.d.Notify; notify != nil {
		expr, arg := notify(storage.TopicSession, sessionID)
		body := sess
		body.Resources = nil
		row := &sessionRow{body: toJSON(body), session: body}
		r.tx.savedRow = row
		ctes = append(ctes, `saved AS (UPDATE sessions SET status = `+a.add(sess.Status)+`, body = `+a.add(row.body)+`, archived_at = `+a.add(sess.ArchivedAt)+
			` WHERE id = `+a.add(sessionID)+` RETURNING `+strings.Replace(expr, "?", a.add(arg), 1)+`)`)
	} else if err := r.saveSession(ctx, sess); err != nil {
		return 0, err
	}
	next := r.tx.s.d.NextEventSeq
	for i, e := range events {
		if i > 0 {
			rows.WriteString(", ")
		}
		fmt.Fprintf(&rows, "(%s, %s, %s, %s", a.add(e.ID), a.add(sessionID), a.add(e.Type), a.add(eventJSON(e)))
		if next != "" {
			fmt.Fprintf(&rows, ", %d", i)
		}
		rows.WriteString(")")
	}
	query := `INSERT INTO session_events (id, session_id, type, body) VALUES ` + rows.String() + ` RETURNING id, seq`
	if next != "" {
		// The sequence is taken above the sort, row by row in the
		// events' order: PostgreSQL evaluates a SELECT's output after
		// its ORDER BY (the SELECT reference, "the output list").
		query = `INSERT INTO session_events (seq, id, session_id, type, body) SELECT ` + next + `, id, session_id, type, body FROM (VALUES ` + rows.String() + `) v (id, session_id, type, body, n) ORDER BY n RETURNING id, seq`
	}
	if len(ctes) > 0 {
		query = `WITH ` + strings.Join(ctes, ", ") + ` ` + query
	}
	if d, ok := r.tx.Conn.(QueryDeferrer); ok && next != "" {
		// Read with the others' once the batch's COMMIT is sent; the
		// caller takes the sequence from the tx (laterSeq).
		d.DeferQuery(ctx, query, a, func(rs Rows) (err error) {
			r.tx.laterSeq, err = lastEventSeq(sessionID, events, rs)
			return err
		})
		return 0, nil
	}
	rs, err := r.tx.Query(ctx, query, a...)
	if err != nil {
		return 0, err
	}
	return lastEventSeq(sessionID, events, rs)
}

// eventJSON is an event's stored body, as toJSON writes it. An event
// without extra fields encodes to compact, escaped JSON already, which
// json.Marshal would scan and copy once more, in the batch that holds the
// session's lock; extra fields are the client's raw JSON, which it
// compacts.
func eventJSON(e api.Event) string {
	if len(e.Extra) > 0 {
		return toJSON(e)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		panic(fmt.Sprintf("sqlstore: marshal an event: %v", err)) // as toJSON's: typed fields only
	}
	return string(b)
}

// lastEventSeq reads the sequences stored events were given (rows of id
// and seq, closed here) and returns the last, checking they follow the
// events' order.
func lastEventSeq(sessionID string, events []api.Event, rs Rows) (int64, error) {
	type stored struct {
		id  string
		seq int64
	}
	got, err := scanAll(rs, func(row Row) (stored, error) {
		var x stored
		return x, row.Scan(&x.id, &x.seq)
	})
	if err != nil {
		return 0, err
	}
	seqs := make(map[string]int64, len(events))
	for _, x := range got {
		seqs[x.id] = x.seq
	}
	var last int64
	for _, e := range events {
		seq, ok := seqs[e.ID]
		if !ok || seq <= last {
			return 0, fmt.Errorf("session %s: event %s was stored at sequence %d, after %d: the log would be out of order", sessionID, e.ID, seq, last)
		}
		last = seq
	}
	return last, nil
}

func (r sessionRows) Emit(ctx context.Context, evs ...webhooks.Event) error {
	return r.tx.emit(ctx, evs...)
}

// StoreArchived holds the store's row shared: a store being deleted or
// archived meanwhile waits for this session, then sees it attached.
func (r sessionRows) StoreArchived(ctx context.Context, storeID string) (bool, error) {
	var archived *time.Time
	err := r.tx.QueryRow(ctx, `SELECT archived_at FROM memory_stores WHERE id = ?`+r.tx.s.d.ForShare, storeID).Scan(&archived)
	return archived != nil, err
}

func (r sessionRows) InsertSession(ctx context.Context, sess api.Session) error {
	body := sess
	body.Resources = nil
	if _, err := r.tx.Exec(ctx, `INSERT INTO sessions (id, environment_id, agent_id, status, body, created_at, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sess.ID, sess.EnvironmentID, sess.Agent.ID, sess.Status, toJSON(body), sess.CreatedAt, sess.ArchivedAt); err != nil {
		return err
	}
	for i, res := range sess.Resources {
		if _, err := r.tx.Exec(ctx, `INSERT INTO session_resources (id, session_id, position, memory_store_id, body) VALUES (?, ?, ?, ?, ?)`,
			res.ID, sess.ID, i, res.MemoryStoreID, toJSON(res)); err != nil {
			return err
		}
	}
	return nil
}

func (r sessionRows) InsertWork(ctx context.Context, w storage.Work) error {
	return insertWork(ctx, r.tx, w)
}

// saveSession writes the session row back and wakes the event streams and
// runners of every server (at commit).
func (r sessionRows) saveSession(ctx context.Context, sess api.Session) error {
	if err := saveSession(ctx, r.tx, sess); err != nil {
		return err
	}
	return r.tx.s.b.Notify(ctx, r.tx, storage.TopicSession, sess.ID)
}

// keepLog caches the log of a session whose transaction has committed,
// with the session row that transaction wrote (nil when not known),
// unless the session ended: nothing reacts to it any more. The cache takes
// over the room after v.Log: the caller hands on v.Log clipped.
func (s *Store) keepLog(v storage.SessionView, row *sessionRow, seen logTail) {
	if storage.Ended(v.Session) {
		s.logs.drop(v.Session.ID)
		return
	}
	seen.clock = nil
	s.logs.put(v.Session.ID, eventLog{seq: v.Seq, events: v.Log, resources: v.Session.Resources, resourcesKnown: true, row: row, seen: seen})
}

// appended completes the view of an append whose transaction t committed:
// the last sequence, when read after the write returned, and the cache.
func (s *Store) appended(t *tx, view *storage.SessionView) {
	if t.laterSeq != 0 {
		view.Seq = t.laterSeq
	}
	s.keepLog(*view, t.savedRow, t.after)
}

// AppendEvents implements storage.Events.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, events []api.Event, guard storage.AppendGuard) ([]api.Event, error) {
	var (
		stored []api.Event
		view   storage.SessionView
	)
	t, err := s.writeSession(ctx, sessionID, func(tx *tx) (err error) {
		view, stored, err = storage.AppendIn(ctx, sessionRows{tx}, sessionID, events, guard)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.appended(t, &view)
	return stored, nil
}

// AppendSteps implements storage.Events.
func (s *Store) AppendSteps(ctx context.Context, sessionID string, step storage.AppendStep) (storage.SessionView, error) {
	var view storage.SessionView
	t, err := s.writeSession(ctx, sessionID, func(tx *tx) (err error) {
		view, _, err = storage.AppendStepsIn(ctx, sessionRows{tx}, sessionID, step)
		return err
	})
	if err != nil {
		return storage.SessionView{}, err
	}
	s.appended(t, &view)
	view.Log = slices.Clip(view.Log)
	return view, nil
}

// ViewSession implements storage.Events. It reads in one snapshot, so the
// log, the session and its work agree.
func (s *Store) ViewSession(ctx context.Context, sessionID string) (storage.SessionView, error) {
	var v storage.SessionView
	err := s.read(ctx, func(tx Conn) (err error) {
		v, err = s.viewInTx(ctx, tx, sessionID, false)
		return err
	})
	if err != nil {
		return storage.SessionView{}, err
	}
	s.keepLog(v, nil, logTail{})
	v.Log = slices.Clip(v.Log)
	return v, nil
}

// ListEvents implements storage.Events.
func (s *Store) ListEvents(ctx context.Context, sessionID string, q storage.EventQuery) ([]storage.StoredEvent, error) {
	if err := s.db().QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = ?`, sessionID).Scan(new(int)); err != nil {
		return nil, err
	}
	var a args
	where, order := storage.EventFilter(sessionID, q, a.add)
	return queryAll(ctx, s.db(), scanStoredEvent, `SELECT seq, body FROM session_events WHERE `+where+` ORDER BY seq `+order+` LIMIT `+a.add(limitArg(q.Limit)), a...)
}

func scanStoredEvent(r Row) (storage.StoredEvent, error) {
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
func (s *Store) EventSeq(ctx context.Context, sessionID, eventID string) (int64, error) {
	var seq int64
	err := s.db().QueryRow(ctx, `SELECT seq FROM session_events WHERE session_id = ? AND id = ?`, sessionID, eventID).Scan(&seq)
	return seq, err
}
