// Package sqlstore is storage.Store written once, over any SQL database: every
// rule of the storage layer (memory writes and listings, sessions and their
// logs, the work queue, the webhook outbox and its settling, credentials,
// users) lives here, in SQL both backends run. A backend (package sqlite,
// package postgres) is only what differs between databases: how a
// statement reaches the driver (placeholders, time columns, errors), how a
// transaction begins, retries and commits, which rows it locks, and whom it
// notifies. That is the Backend interface below.
//
// The SQL here is written with "?" placeholders; a backend whose driver
// numbers them rewrites the text. Times are passed and scanned as
// time.Time (and *time.Time for a nullable column); a backend that stores
// them otherwise converts in its Conn.
package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// Row is one result row: Scan reports storage.ErrNotFound when the query
// found none. Scan may replace the elements of dest (with scanners that
// convert a column), so a dest slice is built afresh for each Scan.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set, read with Next and Scan, then closed.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Conn runs statements: on the database itself, or inside one
// transaction. It may replace the elements of args (converting a value to
// the database's form), so an args slice is passed to one call only.
type Conn interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Backend is what a database offers the store: connections, transactions,
// a clock, notifications and the few clauses its SQL spells its own way.
type Backend interface {
	// DB runs statements outside any transaction.
	DB() Conn
	// Write runs fn in one write transaction and commits when fn returns
	// nil. fn may run more than once (a backend retries a transaction the
	// database aborted), so it sets its results on each run.
	Write(ctx context.Context, fn func(tx Conn) error) error
	// Read runs fn in one read-only snapshot: a listing that takes several
	// queries sees one state.
	Read(ctx context.Context, fn func(tx Conn) error) error
	// Now is the time to stamp rows and decide leases with, read through q
	// when it is the database's clock.
	Now(ctx context.Context, q Conn) (time.Time, error)
	// Notify tells the other servers that share the database of a change
	// to topic/key when the transaction q commits (see storage.Waker); a
	// database only one process opens does nothing.
	Notify(ctx context.Context, q Conn, topic, key string) error
	// Duplicate reports err as a violation of the unique index on
	// table.column.
	Duplicate(err error, table, column string) bool
	// Dialect returns the clauses that differ.
	Dialect() Dialect
}

// Dialect is the SQL a database spells its own way.
type Dialect struct {
	// ForUpdate, ForShare and SkipLocked follow a SELECT that locks the
	// rows it reads until commit ("" where the transaction itself orders
	// writers: SQLite has one writer at a time).
	ForUpdate, ForShare, SkipLocked string
	// SingleWriter: write transactions queue on one database-wide lock.
	// A write that will most often change nothing (a poll of an empty
	// queue, an expiry with no lease lapsed, a webhook claim with nothing
	// due) then looks with a read first, so it does not hold every other
	// writer up for nothing.
	SingleWriter bool
	// AttemptOrder is the column webhook attempts are ordered by: the
	// order they were inserted in.
	AttemptOrder string
	// Search is the backend's full-text index of current memories.
	Search SearchIndex
	// Clock is an SQL expression of the backend's clock (what its Now
	// reads), for a statement that reads it beside other things; "" when
	// the clock is not the database's.
	Clock string
	// ClaimClock, where the clock is the database's, lets a claim's first
	// two statements share one reading of it and go in one round trip:
	// Keep is an expression that reads the clock and keeps the reading for
	// the transaction (its value is the reading), Kept an expression of the
	// reading kept (NULL when none was), KeptBefore the reading kept less a
	// number of seconds (one placeholder). All "" where the claim reads
	// the clock on its own.
	ClaimClock struct{ Keep, Kept, KeptBefore string }
	// NotePoll, where the backend keeps the polls of every server
	// (storage.PollLog), is a WITH clause that notes one (placeholders:
	// environment, worker, time), put before the statement a claim reads
	// its environment with; "" where the server counts polls itself.
	NotePoll string
	// Notify, where the backend wakes other servers in SQL (its Notify
	// sends a statement), is that statement's expression for topic and
	// key, with one placeholder, and its argument: a write can then wake
	// them itself, in a WITH (which the backend then supports).
	Notify func(topic, key string) (expr string, arg any)
	// NextEventSeq, where the backend reads a session write's rows only
	// after its COMMIT was sent (QueryDeferrer), is the expression that
	// takes an event's sequence number, put where it is evaluated in the
	// order the events are sent.
	NextEventSeq string
}

// SearchIndex is the full-text index a backend keeps of every live
// memory's path and head content (its migrations create it and their
// triggers write it with each memory write).
type SearchIndex interface {
	// Query returns a statement and its first argument, the match
	// expression for terms. The statement selects memoryColumns, the
	// head content and a score (higher is better) of the memories matching
	// every term, best first, and takes after match: the stores (stores
	// placeholders), the path range [lower, upper) when subtree, then
	// limit and offset.
	Query(terms []string, stores int, subtree bool) (query, match string)
	// Entry is the column of the memories row that carries the memory's
	// index entry and its value for path and content, when the server
	// computes it ("" when the backend's triggers do it all). It is
	// written by the statement that writes the row, so it is as current
	// as the row.
	Entry(path, content string) (column string, value any)
}

// MemoryWriter is offered by a backend that runs memory writes its own way
// (group commit: many in one transaction, sharing one COMMIT). fn makes one
// write to the store storeID in tx, with the store's sequence and count kept
// by counters; the store is named up front so a backend can batch the writes
// of one store together and lock its stores in one order. A backend without
// it runs each memory write in Write, ordered by the store's row lock.
type MemoryWriter interface {
	WriteMemory(ctx context.Context, storeID string, fn func(ctx context.Context, tx Conn, counters StoreCounters) error) error
}

// SessionWriter is offered by a backend that runs appends to session logs
// its own way (group commit: the appends to many sessions in one
// transaction). fn is one append to session sessionID, run as Write would
// run it. first, when its Query is not empty, is the statement fn will
// most likely send first, which locks the session's row and reads it: the
// backend may send it ahead, with the other appends' first statements, and
// answer fn's identical statement with its rows. A backend without it runs
// each append in Write.
type SessionWriter interface {
	WriteSession(ctx context.Context, sessionID string, first Statement, guess *SessionGuess, fn func(Conn) error) error
}

// SessionGuess is what first most likely answers, where this server made
// the session's last append: the session's row as it wrote it, no event
// since, a live work item, no webhook endpoint enabled. A backend may
// answer first with Rows, the database's clock at clock in place of the
// one it would read, without asking, and send Check in the transaction
// before the append's writes, having locked the session's row: Check
// fails the transaction (memstore_guessed_wrong(), migration 0014) unless
// the guess holds, and the backend then runs the append again, reading.
type SessionGuess struct {
	Rows  func(clock time.Time) [][]any
	Check Statement
}

// QueryDeferrer is offered by a Conn that may send a statement with the
// transaction's COMMIT and read its rows after: the statement itself must
// make its rows what the write needs (Dialect.NextEventSeq), since read
// comes too late to undo it. A statement that fails rolls the transaction
// back (the backend then runs the write again, on a Conn without it); an
// error of read's leaves the write's outcome unknown.
type QueryDeferrer interface {
	DeferQuery(ctx context.Context, query string, args []any, read func(Rows) error)
}

// ReadDeferrer is offered by a Conn that can send a read in one round
// trip with the statement after it: read gets the read's rows once that
// statement is sent, before that statement's own. read cannot fail the
// transaction: it keeps what it found, and its error, for the code that
// sent the statement after to look at.
type ReadDeferrer interface {
	DeferRead(ctx context.Context, query string, args []any, read func(Rows))
}

// Statement is a query and its arguments.
type Statement struct {
	Query string
	Args  []any
}

// StoreCounters are the columns of a memory store's row that every memory
// write moves.
type StoreCounters interface {
	// Lock reads what a write needs of the store and orders the write after
	// every earlier write to it; storage.ErrNotFound when there is none.
	Lock(ctx context.Context, storeID string) (storage.StoreState, error)
	// Next takes the store's next change-feed sequence and moves its live
	// memory count by delta.
	Next(ctx context.Context, storeID string, delta int) (int64, error)
}

// Store is storage.Store (less storage.Turns, which a backend adds: who
// holds a turn is a lock of the database's own kind) over a Backend.
type Store struct {
	b Backend
	d Dialect
	// outbox wakes the webhook dispatchers when a transaction that stored
	// deliveries commits (emit marks it).
	outbox storage.Outbox
	// logs caches the decoded logs of the sessions appended to last.
	logs logCache
	// heads are the memories written last (headguess.go), kept when
	// keepHeads: on a backend whose server computes search entries, which
	// is also the one whose batches guess their reads (PostgreSQL).
	heads     headGuesses
	keepHeads bool
}

// New returns the store over b.
func New(b Backend) *Store {
	d := b.Dialect()
	column, _ := d.Search.Entry("", "")
	return &Store{b: b, d: d, keepHeads: column != ""}
}

// tx is one write transaction as the store's rules see it.
type tx struct {
	Conn
	s *Store
	// after is what the transaction's read of a session's log saw beside
	// it (a write transaction reads one session's).
	after logTail
	// laterSeq is the last sequence of the events the transaction stored,
	// when their statement's rows were read after the write returned
	// (QueryDeferrer).
	laterSeq int64
	// savedRow is the session row the transaction wrote, where the
	// backend writes it as one statement with the events (Dialect.Notify).
	savedRow *sessionRow
}

// write runs fn in one write transaction; a transaction that wrote outbox
// rows wakes the dispatchers when it commits.
func (s *Store) write(ctx context.Context, fn func(t *tx) error) error {
	_, err := s.writeWith(ctx, s.b.Write, fn)
	return err
}

// writeSession is write for an append to session sessionID's log, through
// the backend's SessionWriter where it has one. It returns the
// transaction as fn's last attempt left it: what the append wrote that its
// view learns only once the write returns (laterSeq, savedRow).
func (s *Store) writeSession(ctx context.Context, sessionID string, fn func(t *tx) error) (*tx, error) {
	w, ok := s.b.(SessionWriter)
	if !ok {
		return s.writeWith(ctx, s.b.Write, fn)
	}
	var (
		first Statement
		guess *SessionGuess
	)
	if cached := s.logs.get(sessionID, false); cached.resourcesKnown && s.d.ForUpdate != "" {
		first = s.lockStatement(sessionID, cached.seq) // what viewInTx will send, unless the cache moves
		guess = s.sessionGuess(sessionID, cached)
	}
	return s.writeWith(ctx, func(ctx context.Context, fn func(Conn) error) error {
		return w.WriteSession(ctx, sessionID, first, guess, fn)
	}, fn)
}

// sessionGuess is the guess of what lockStatement answers for a session
// whose log is cached as l, or nil where there is none to make: the row
// this server's last append wrote is not known, no live work was seen,
// endpoints were, or the database's clock is not read with the log.
func (s *Store) sessionGuess(sessionID string, l eventLog) *SessionGuess {
	if l.row == nil || !l.seen.workLive || !l.seen.noEndpoints || s.d.Clock == "" {
		return nil
	}
	body := l.row.body
	return &SessionGuess{
		Rows: func(clock time.Time) [][]any {
			return [][]any{{body, int64(0), "w", &clock}} // readLogTail's row of what it read beside the log
		},
		Check: Statement{`SELECT memstore_guessed_wrong() WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ? AND body = ?)
			OR EXISTS (SELECT 1 FROM session_events WHERE session_id = ? AND seq > ?)
			OR NOT EXISTS (SELECT 1 FROM work_items WHERE session_id = ? AND state != ?)
			OR EXISTS (SELECT 1 FROM webhook_endpoints WHERE state = ?)`,
			[]any{sessionID, body, sessionID, l.seq, sessionID, api.WorkStopped, webhooks.StateEnabled}},
	}
}

// writeWith runs fn in the write transaction run opens, and returns the
// transaction as fn's last attempt left it.
func (s *Store) writeWith(ctx context.Context, run func(context.Context, func(Conn) error) error, fn func(t *tx) error) (*tx, error) {
	t := &tx{s: s}
	err := run(ctx, func(c Conn) error {
		// A retried attempt starts afresh: what the last one read beside
		// a session's log (its clock, whether endpoints exist) is stale.
		t.Conn, t.after, t.laterSeq, t.savedRow = c, logTail{}, 0, nil
		return fn(t)
	})
	s.outbox.Ended(t, err == nil)
	return t, err
}

// execLater runs a statement whose row count the caller does not look at:
// deferred to the next statement's or the COMMIT's pipeline where the
// backend's Conn can (Deferrer), at once otherwise.
func (t *tx) execLater(ctx context.Context, query string, args ...any) error {
	if d, ok := t.Conn.(Deferrer); ok {
		d.Defer(ctx, query, args...)
		return nil
	}
	_, err := t.Exec(ctx, query, args...)
	return err
}

// read runs fn in one read snapshot.
func (s *Store) read(ctx context.Context, fn func(q Conn) error) error {
	return s.b.Read(ctx, fn)
}

func (s *Store) db() Conn { return s.b.DB() }

func (s *Store) lock(lock bool) string {
	if lock {
		return s.d.ForUpdate
	}
	return ""
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q Conn, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scan)
}

// scanAll scans every row of rows with scan, and closes them.
func scanAll[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
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

// exists reports whether a query finds a row.
func exists(ctx context.Context, q Conn, query string, args ...any) (bool, error) {
	var one int
	err := q.QueryRow(ctx, query, args...).Scan(&one)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// inList is the "(?, ?, …)" of an IN with one placeholder per value, and
// the values as query arguments.
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
		return math.MaxInt32
	}
	return n
}

// args collects the arguments of a query whose WHERE clause depends on the
// request.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "?"
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only documents and metadata maps reach here; they always marshal.
		panic(fmt.Sprintf("sqlstore: marshal %T: %v", v, err))
	}
	return string(b)
}

func metadataJSON(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	return toJSON(m)
}

// scanJSON reads a row of one JSON column (the body of a stored object).
func scanJSON[T any](r Row) (T, error) {
	var (
		body string
		v    T
	)
	if err := r.Scan(&body); err != nil {
		return v, err
	}
	err := json.Unmarshal([]byte(body), &v)
	return v, err
}

// nullString stores "" as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
