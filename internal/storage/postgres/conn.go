package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// conn is sqlstore.Conn on PostgreSQL: placeholders are numbered, a query
// that finds no row is storage.ErrNotFound, and an error that means the
// database cannot be reached is storage.ErrUnavailable.
type conn struct {
	s *DB
	q querier
}

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	pool, autocommit := c.q.(*pgxpool.Pool)
	if !autocommit {
		tag, err := c.q.Exec(ctx, c.s.numbered(query), args...)
		return tag.RowsAffected(), unavailable(err)
	}
	// A statement on the pool is its own transaction: sent and not
	// answered, it may have committed. No connection to send it on is
	// only the database away.
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return 0, unavailable(err)
	}
	defer pc.Release()
	tag, err := pc.Exec(ctx, c.s.numbered(query), args...)
	if answerLost(err) {
		return 0, outcomeUnknown("a statement committed on its own", readBackWrites, err)
	}
	return tag.RowsAffected(), unavailable(err)
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rs, err := c.q.Query(ctx, c.s.numbered(query), args...)
	if err != nil {
		return nil, unavailable(err)
	}
	return rows{rs}, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return row{c.q.QueryRow(ctx, c.s.numbered(query), args...)}
}

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error { return unavailable(notFound(r.r.Scan(dest...))) }

type rows struct{ pgx.Rows }

func (r rows) Scan(dest ...any) error { return unavailable(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return unavailable(r.Rows.Err()) }

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.ErrNotFound
	}
	return err
}

// numbered rewrites the "?" placeholders of query as $1, $2, … once per
// query text. No query of the store has a "?" inside a string literal.
func (s *DB) numbered(query string) string {
	if q, ok := s.queries.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	s.queries.Store(query, b.String())
	return b.String()
}

// backend is sqlstore.Backend on PostgreSQL.
type backend struct{ s *DB }

func (b backend) DB() sqlstore.Conn { return conn{b.s, b.s.pool} }

func (b backend) Write(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return b.s.tx(ctx, func(tx *lazyTx) error { return fn(txConn{conn{b.s, tx}, tx}) })
}

// txConn is a write transaction's conn: it can also defer a statement to
// the pipeline of the next one or of the COMMIT (sqlstore.Deferrer).
type txConn struct {
	conn
	t *lazyTx
}

func (c txConn) Defer(_ context.Context, query string, args ...any) {
	c.t.Defer(c.s.numbered(query), args...)
}

// DeferRead implements sqlstore.ReadDeferrer.
func (c txConn) DeferRead(_ context.Context, query string, args []any, read func(sqlstore.Rows)) {
	c.t.DeferRead(c.s.numbered(query), args, func(rs pgx.Rows) error {
		read(rows{rs})
		return nil
	})
}

func (b backend) Read(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return b.s.readTx(ctx, func(tx *lazyTx) error { return fn(conn{b.s, tx}) })
}

// WriteMemory implements sqlstore.MemoryWriter with group commit.
func (b backend) WriteMemory(ctx context.Context, storeID string, fn func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error) error {
	return b.s.writeMemory(ctx, storeID, fn)
}

// WriteSession implements sqlstore.SessionWriter with group commit.
func (b backend) WriteSession(ctx context.Context, sessionID string, first sqlstore.Statement, guess *sqlstore.SessionGuess, fn func(sqlstore.Conn) error) error {
	return b.s.writeSession(ctx, sessionID, first, guess, fn)
}

// Now returns the injected clock, or the database's, which every replica
// shares; a memory write's, the clock of its batch.
func (b backend) Now(ctx context.Context, q sqlstore.Conn) (time.Time, error) {
	if c, ok := q.(*batchConn); ok {
		return c.now(), nil
	}
	if b.s.clock != nil {
		return b.s.clock(), nil
	}
	var t time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, err
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// A claim's clock, kept in a setting of the transaction (set_config's
// third argument) between its first statement and its query of the queue.
// Once a transaction that set it ends, the setting reads as an empty
// string on that connection rather than NULL, hence the NULLIF.
const (
	claimClockKeep   = `set_config('memstore.claim_clock', clock_timestamp()::text, true)::timestamptz`
	claimClockKept   = `NULLIF(current_setting('memstore.claim_clock', true), '')::timestamptz`
	claimClockBefore = claimClockKept + ` - make_interval(secs => ?)`
)

// Notify wakes the event streams and long polls of every replica when q
// commits.
func (b backend) Notify(ctx context.Context, q sqlstore.Conn, topic, key string) error {
	return notifyWake(ctx, q, topic, key)
}

func (b backend) Duplicate(err error, table, column string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == table+"_"+column+"_key"
}

// Dialect: a memory write locks its store's row, an append its session's;
// a claim skips the items other pollers hold.
func (b backend) Dialect() sqlstore.Dialect {
	d := sqlstore.Dialect{ForUpdate: " FOR UPDATE", ForShare: " FOR SHARE", SkipLocked: " FOR UPDATE SKIP LOCKED", AttemptOrder: "id", Search: tsIndex{}}
	if b.s.clock == nil {
		d.Clock = "clock_timestamp()"
		d.ClaimClock.Keep, d.ClaimClock.Kept, d.ClaimClock.KeptBefore = claimClockKeep, claimClockKept, claimClockBefore
	}
	d.Notify, d.NotePoll, d.NextEventSeq = wakeExpr, notePoll, "nextval('session_events_seq_seq')"
	return d
}
