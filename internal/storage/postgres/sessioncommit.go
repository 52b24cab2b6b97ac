package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// Group commit of session appends. An append is short (its session's row
// locked and read with the log's tail, then the events and the row
// written) and most of what PostgreSQL spends on it alone is the
// transaction's: its BEGIN, its COMMIT and the WAL flush that COMMIT waits
// for. Appends to different sessions waiting at the same time run instead
// one after another in one transaction with one COMMIT: a pgbench replay
// of an append's statements ran 3,194 appends/s one transaction each and
// 5,852/s four to a transaction, with 8 and 4 clients on this 2-core
// machine (docs/postgresql-performance.md).
//
// Each append runs as it would alone, on the shared transaction: its reads
// and writes are its own statements, sent with the others'. A batch holds
// one append per session and locks all its sessions' rows first, in one
// statement, in id order, so two batches (of two replicas) never wait for
// each other in a cycle. A lock it waits for longer than
// batchLockTimeout fails the batch rather than hold up the shard. An append
// that gives up before it writes (a refused guard, a session not found)
// keeps its answer and the others go on; one that fails after it wrote, or
// any database error before the COMMIT, rolls the transaction back, and
// every append of the batch runs again alone, in a transaction of its own,
// exactly as without group commit. Once queued, an append runs to its end
// whatever its request's context says, as a memory write does.

// sessionWrite is one append waiting for its batch.
type sessionWrite struct {
	ctx       context.Context
	sessionID string
	first     sqlstore.Statement
	// guess, when not nil, is what first most likely answers
	// (sessionguess.go).
	guess *sqlstore.SessionGuess
	fn    func(sqlstore.Conn) error
	// ahead is the answer to first, fetched with the batch's BEGIN.
	ahead *rowsAhead
	// done answers the write: nil or its error once its batch committed,
	// errRunAlone when it must run in a transaction of its own.
	done chan error
}

// errRunAlone: the batch could not commit the write; it runs alone.
var errRunAlone = errors.New("postgres: run the append alone")

// batchLockTimeout bounds how long a batch waits for its sessions' rows:
// they are held for milliseconds by another replica's batch or a lone
// append, and a batch stuck behind a longer transaction would hold up
// every append of its shard. The batch fails instead, and its appends run
// alone, each waiting as long as its request lets it.
const batchLockTimeout = "SET LOCAL lock_timeout = '2s'"

// sessionCommitter holds the appends waiting for their batch (shards.go).
type sessionCommitter struct {
	shardSet[*sessionWrite]
	// alone counts the batches that fell back to running their appends
	// alone (a lock that timed out, a deadlock, a refused statement).
	alone atomic.Int64
}

func newSessionCommitter() *sessionCommitter {
	return &sessionCommitter{shardSet: newShardSet[*sessionWrite](0)} // spread from the first (shards.go)
}

// writeSession runs fn, an append to session sessionID, in a transaction
// shared with the appends to other sessions that wait with it. Once queued
// it runs to its end whatever ctx says (it is not started if ctx ends
// first), so its outcome is known when writeSession returns.
func (s *DB) writeSession(ctx context.Context, sessionID string, first sqlstore.Statement, guess *sqlstore.SessionGuess, fn func(sqlstore.Conn) error) error {
	sh := s.sessionCommits.join(sessionID)
	defer s.sessionCommits.leave()
	if first.Query != "" {
		first = sqlstore.Statement{Query: s.numbered(first.Query), Args: slices.Clone(first.Args)}
	}
	w := &sessionWrite{ctx: ctx, sessionID: sessionID, first: first, guess: guess, fn: fn, done: make(chan error, 1)}
	if sh.queue(w) {
		sh.lead(batching[*sessionWrite]{take: takeSessionBatch, size: sessionBatchSize, run: s.commitSessions})
	}
	if err := <-w.done; !errors.Is(err, errRunAlone) {
		return err
	}
	return s.tx(ctx, func(tx *lazyTx) error { return fn(txConn{conn{s, tx}, tx}) })
}

// takeSessionBatch takes from pending up to maxBatch appends, the oldest of
// each session (a later append to a session waits for the next batch: a
// batch has one append per session), sorted by session id.
func takeSessionBatch(pending []*sessionWrite) (batch, rest []*sessionWrite) {
	seen := map[string]bool{}
	for _, w := range pending {
		if len(batch) == maxBatch || seen[w.sessionID] {
			rest = append(rest, w)
			continue
		}
		seen[w.sessionID] = true
		batch = append(batch, w)
	}
	slices.SortFunc(batch, func(a, b *sessionWrite) int {
		switch {
		case a.sessionID < b.sessionID:
			return -1
		case a.sessionID > b.sessionID:
			return 1
		}
		return 0
	})
	return batch, rest
}

// sessionBatchSize is how many appends of pending a batch would carry:
// one per session, up to maxBatch.
func sessionBatchSize(pending []*sessionWrite) int {
	seen := make(map[string]bool, len(pending))
	for _, w := range pending {
		seen[w.sessionID] = true
	}
	return min(len(seen), maxBatch)
}

// commitSessions runs the batch in one transaction and returns what
// answers each append. A panic of the batch's own (each append's is caught
// by runShared) sends every append to run alone.
func (s *DB) commitSessions(batch []*sessionWrite) (answer func()) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("postgres: an append batch panicked; its appends run alone", "panic", p, "stack", string(debug.Stack()))
			s.sessionCommits.alone.Add(1)
			answer = func() {
				for _, w := range batch {
					w.done <- errRunAlone
				}
			}
		}
	}()
	answers, err := s.runSessions(batch)
	if errors.Is(err, errRunAlone) {
		s.sessionCommits.alone.Add(1)
	}
	return func() {
		for i, w := range batch {
			if err != nil {
				w.done <- err
			} else {
				w.done <- answers[i]
			}
		}
	}
}

// runSessions runs the appends of batch one after another in one
// transaction and commits it. It returns each append's answer, or
// errRunAlone for all when the transaction could not commit them, or the
// error of a COMMIT whose outcome is unknown. A batch whose reads this
// server can guess runs on its guesses first (sessionguess.go), and again
// reading where they were wrong.
func (s *DB) runSessions(batch []*sessionWrite) ([]error, error) {
	ctx := context.Background()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, errRunAlone
	}
	defer pc.Release()
	answers := make([]error, len(batch))
	var live []*sessionWrite
	for i, w := range batch {
		if err := w.ctx.Err(); err != nil {
			answers[i] = err // given up while waiting: never run
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return answers, nil
	}
	if clock, ok := s.guessSessions(live); ok {
		t := &lazyTx{c: pc, begin: "BEGIN"}
		guessAhead(t, live, clock, s.numbered)
		guessed, err := s.commitAppends(ctx, t, batch, slices.Clone(answers), true)
		if !errors.Is(err, errReadFirst) {
			if err == nil {
				s.sessionGuesses.batches.Add(1)
			}
			return guessed, err
		}
	}
	t := &lazyTx{c: pc, begin: "BEGIN"}
	clock, err := readAhead(ctx, t, live)
	if err != nil {
		t.rollback(ctx)
		return nil, errRunAlone
	}
	if !clock.IsZero() {
		s.guesses.readClock(clock, time.Now())
	}
	return s.commitAppends(ctx, t, batch, answers, false)
}

// commitAppends runs the appends of batch (those answers leaves nil) on
// t, their first statements answered from what was read or guessed ahead,
// and commits. guessing says nothing has been sent yet: an append that
// asks for a statement of its own, refuses or writes nothing, or a guess
// found wrong, ends the run with errReadFirst, having committed nothing.
func (s *DB) commitAppends(ctx context.Context, t *lazyTx, batch []*sessionWrite, answers []error, guessing bool) ([]error, error) {
	wrote := make([]bool, len(batch))
	for i, w := range batch {
		if answers[i] != nil {
			continue
		}
		st := &sharedTx{t: t, ctx: ctx, guessing: guessing}
		err := runShared(w.fn, sharedConn{conn{s, st}, st, w.ahead})
		if guessing && (err != nil || !st.wrote) {
			// It asked for a statement of its own (errNeedsReads), or
			// refused what it saw, or found nothing to write: a guess is
			// checked only beside writes, so that decision is made again
			// on what is read. Nothing was sent.
			return nil, errReadFirst
		}
		if err != nil && (st.wrote || st.failed) {
			t.rollback(ctx)
			return nil, errRunAlone
		}
		answers[i], wrote[i] = err, st.wrote
	}
	if !slices.Contains(wrote, true) {
		t.rollback(ctx)
		return answers, nil
	}
	// The appends' own statements go with the COMMIT, in one round trip:
	// each takes its events' sequences in the log's order itself
	// (sqlstore.Dialect.NextEventSeq), so nothing read from its rows has
	// to come before the COMMIT; one that fails aborts the transaction and
	// PostgreSQL skips the COMMIT. Their rows are read once it is sent.
	br, err := t.pipeline(ctx, "COMMIT", nil)
	if err != nil {
		if nothingCommitted(markAhead(err)) {
			t.rollback(ctx)
			if guessing && isGuessedWrong(err) {
				s.guessedWrong(batch)
				return nil, errReadFirst
			}
			return nil, errRunAlone
		}
		// The answers ahead of the COMMIT were lost (or one could not be
		// read): it went out, and may have committed.
		for i := range batch {
			if wrote[i] {
				answers[i] = outcomeUnknown("the COMMIT of a batch of appends", "list the session's events to see", err)
			}
		}
		return answers, nil
	}
	tag, err := br.Exec()
	cerr := br.Close()
	switch {
	case err == nil && tag.String() == "COMMIT":
		return answers, nil // committed, whatever the connection did next
	case err == nil && tag.String() == "ROLLBACK":
		return nil, errRunAlone // a statement nobody read failed
	case err == nil && cerr == nil:
		err = fmt.Errorf("COMMIT answered %q", tag.String())
	case err == nil:
		err = cerr
	}
	if !answerLost(err) {
		return nil, errRunAlone // nothing committed: refused, or never sent
	}
	// The COMMIT's answer was lost: whether it committed is unknown, so
	// running the appends again could store them twice. Those that wrote
	// are told so (the outcome unknown); the others' answers stand.
	for i := range batch {
		if wrote[i] {
			answers[i] = outcomeUnknown("the COMMIT of a batch of appends", "list the session's events to see", err)
		}
	}
	return answers, nil
}

// runShared runs fn, turning a panic into an error so one bad append
// cannot take down the appends that share its transaction.
func runShared(fn func(sqlstore.Conn) error, c sharedConn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.st.failed = true
			err = fmt.Errorf("postgres: session append panicked: %v", p)
		}
	}()
	return fn(c)
}

// sharedTx is the batch's transaction as one append sees it: its
// statements run on the batch's context (the append's request may end, the
// batch's transaction must not be cancelled under the others), and it
// notes whether the append wrote anything or met a database error, after
// which PostgreSQL refuses the transaction's every statement.
type sharedTx struct {
	t             *lazyTx
	ctx           context.Context
	wrote, failed bool
	// guessing: the batch runs on guesses and sends nothing before its
	// COMMIT; a statement of the append's own asks it to read first.
	guessing bool
}

func (st *sharedTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if st.guessing {
		return pgconn.CommandTag{}, errNeedsReads
	}
	st.wrote = true
	tag, err := st.t.Exec(st.ctx, sql, args...)
	if err != nil {
		st.failed = true
	}
	return tag, err
}

func (st *sharedTx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if st.guessing {
		return nil, errNeedsReads
	}
	rs, err := st.t.Query(st.ctx, sql, args...)
	if err != nil {
		st.failed = true
		return nil, err
	}
	return sharedRows{rs, st}, nil
}

func (st *sharedTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if st.guessing {
		return failedRow{errNeedsReads}
	}
	return sharedRow{st.t.QueryRow(st.ctx, sql, args...), st}
}

type sharedRow struct {
	r  pgx.Row
	st *sharedTx
}

func (r sharedRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		r.st.failed = true
	}
	return err
}

type sharedRows struct {
	pgx.Rows
	st *sharedTx
}

func (r sharedRows) Err() error {
	err := r.Rows.Err()
	if err != nil {
		r.st.failed = true
	}
	return err
}

// sharedConn is sqlstore.Conn on the batch's transaction, deferring
// statements to its next pipeline (sqlstore.Deferrer) as txConn does, and
// answering the append's first statement from what was read ahead.
type sharedConn struct {
	conn
	st    *sharedTx
	ahead *rowsAhead
}

// Query answers the statement read ahead with its rows, once: it ran in
// this transaction, which has held the session's row lock since, and no
// other append of the batch is to that session, so it reads now what it
// read then.
func (c sharedConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if a := c.ahead; a != nil && !a.used && c.s.numbered(query) == a.query && reflect.DeepEqual(args, a.args) {
		a.used = true
		return &bufferedRows{rowsAhead: a}, nil
	}
	return c.conn.Query(ctx, query, args...)
}

// rowsAhead is the answer to a statement sent ahead: its columns and the
// values of its rows, copied out of pgx's buffers.
type rowsAhead struct {
	query  string
	args   []any
	used   bool
	types  *pgtype.Map
	fields []pgconn.FieldDescription
	rows   [][][]byte
	// guessed, in a batch that guesses, are the rows in place of rows:
	// the values the statement would most likely answer.
	guessed [][]any
}

// lockSessions locks the rows of the sessions ids in id order (two
// batches never deadlock). It runs on its generic plan made with
// sequential scans off (genericPlans), as the stores' lock does: the plan
// PostgreSQL kept from statistics taken while the table held three
// sessions read every session's row for each batch, all 3,003 once the
// table had grown (TestBatchStatementsOnGenericPlansReadOnlyTheirRows).
// It reads the database's clock too, for the batches that guess
// (sessionguess.go).
const lockSessions = `SELECT id, clock_timestamp() FROM sessions WHERE id = ANY($1) ORDER BY id FOR UPDATE`

// readAhead opens the batch's transaction and sends, in one pipeline with
// its BEGIN, the lock of every session of the batch, in id order, then
// the first statement of every append that named one. It returns the
// database's clock as the lock read it (zero when no session was found).
func readAhead(ctx context.Context, t *lazyTx, batch []*sessionWrite) (clock time.Time, err error) {
	var bt pgx.Batch
	bt.Queue(t.begin)
	bt.Queue(batchLockTimeout)
	ids := make([]string, len(batch))
	var firsts []*sessionWrite
	for i, w := range batch {
		ids[i] = w.sessionID
		if w.first.Query != "" {
			firsts = append(firsts, w)
		}
	}
	bt.Queue(genericPlans)
	bt.Queue(lockSessions, ids)
	queueDefaultPlans(&bt)
	for _, w := range firsts {
		bt.Queue(w.first.Query, w.first.Args...)
	}
	br := t.c.SendBatch(ctx, &bt)
	defer br.Close()
	t.begun = true
	for range 3 { // BEGIN, the timeout, the plans' settings
		if _, err := br.Exec(); err != nil {
			return time.Time{}, err
		}
	}
	locked, err := br.Query()
	if err != nil {
		return time.Time{}, err
	}
	for locked.Next() {
		var id string
		if err := locked.Scan(&id, &clock); err != nil {
			locked.Close()
			return time.Time{}, err
		}
	}
	if locked.Close(); locked.Err() != nil {
		return time.Time{}, locked.Err()
	}
	for range defaultPlans {
		if _, err := br.Exec(); err != nil {
			return time.Time{}, err
		}
	}
	for _, w := range firsts {
		rs, err := br.Query()
		if err != nil {
			return time.Time{}, err
		}
		a := &rowsAhead{query: w.first.Query, args: w.first.Args, types: t.c.Conn().TypeMap(), fields: slices.Clone(rs.FieldDescriptions())}
		for rs.Next() {
			a.rows = append(a.rows, cloneValues(rs.RawValues()))
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return time.Time{}, err
		}
		w.ahead = a
	}
	return clock, br.Close()
}

// bufferedRows are sqlstore.Rows over a statement's rows read ahead.
type bufferedRows struct {
	*rowsAhead
	next int
}

func (r *bufferedRows) Next() bool {
	r.next++
	if r.guessed != nil {
		return r.next <= len(r.guessed)
	}
	return r.next <= len(r.rows)
}

func (r *bufferedRows) Scan(dest ...any) error {
	if r.guessed != nil {
		return scanGuessed(r.guessed[r.next-1], dest)
	}
	return pgx.ScanRow(r.types, r.fields, r.rows[r.next-1], dest...)
}

func (r *bufferedRows) Err() error { return nil }
func (r *bufferedRows) Close()     {}

func (c sharedConn) Defer(_ context.Context, query string, args ...any) {
	c.st.wrote = true
	c.st.t.Defer(c.s.numbered(query), args...)
}

// DeferQuery implements sqlstore.QueryDeferrer: the statement is sent with
// the batch's other statements, and its rows read before the COMMIT.
func (c sharedConn) DeferQuery(_ context.Context, query string, args []any, read func(sqlstore.Rows) error) {
	c.st.wrote = true
	c.st.t.DeferRead(c.s.numbered(query), args, func(rs pgx.Rows) error { return read(rows{rs}) })
}
