// Package postgres is the storage backend for running memstore as several
// replicas: every replica opens the same PostgreSQL database, and nothing
// a request depends on stays in one process.
//
// The store's rules and SQL are package sqlstore's; this package is what
// is PostgreSQL's own: the pool and its migrations, numbered placeholders,
// row locks, retries, the errors that mean the database is away, wake-ups
// through NOTIFY, and turns held as advisory locks.
//
// Concurrency is handled with row locks under READ COMMITTED rather than
// SERIALIZABLE: a memory write locks its store's row (FOR UPDATE), which
// orders every write to one store — preconditions, path uniqueness, the
// memory limit and version numbering then hold as they do on SQLite's
// single writer — while writes to different stores run in parallel. An
// event append locks its session's row; a claim takes the oldest queued
// item with FOR UPDATE SKIP LOCKED, so concurrent pollers never wait on
// each other. A serialization failure or deadlock still possible between
// those locks is retried here, never shown to a client.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configures Open.
type Options struct {
	// Now stamps rows and decides leases; nil means the database's clock
	// (clock_timestamp()), which every replica shares. Tests inject a clock
	// here.
	Now func() time.Time
}

// DB is the PostgreSQL implementation of storage.Store.
type DB struct {
	*sqlstore.Store
	pool  *pgxpool.Pool
	clock func() time.Time
	turns turnLocks
	// commits batches memory writes (groupcommit.go).
	commits shardSet[*memoryWrite]
	// guesses let memory write batches guess their reads (guess.go).
	guesses guesses
	// sessionGuesses let append batches guess their reads
	// (sessionguess.go).
	sessionGuesses sessionGuesses
	// sessionCommits batches session appends (sessioncommit.go).
	sessionCommits *sessionCommitter
	// queries holds each query's text with numbered placeholders, by its
	// text with "?" (see numbered).
	queries sync.Map
	// columnTypes are the types of mergedTables' columns, by table and
	// column; rowStatements, each deferred statement's rowStatement
	// (merge.go).
	columnTypes   map[string]map[string]string
	rowStatements sync.Map
	// merges counts the merged statements sent.
	merges atomic.Int64
}

var _ storage.Store = (*DB)(nil)

// registerTypes sets how a connection's values travel: times come back in
// UTC, as the SQLite backend returns them, and search entries go in
// tsvector's binary form (searchEntry).
func registerTypes(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	tsvector := &pgtype.Type{Name: "tsvector", OID: pgtype.TSVectorOID, Codec: tsvectorCodec{}}
	m.RegisterType(tsvector)
	m.RegisterType(&pgtype.Type{Name: "_tsvector", OID: pgtype.TSVectorArrayOID, Codec: &pgtype.ArrayCodec{ElementType: tsvector}})
}

// Open connects to the database at url (a postgres:// URL or key=value
// string; pool_max_conns, sslmode and run-time parameters such as
// statement_timeout come from it) and applies any migration it has not
// seen yet. An unreachable database is one error saying where it looked.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w (expected postgres://user:password@host:5432/dbname?sslmode=disable)", err)
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		registerTypes(c.TypeMap())
		return nil
	}
	where := fmt.Sprintf("%s:%d/%s as %s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout+10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		// One line for the operator: pgconn lists each address tried on
		// its own line.
		reason := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %s; check that the server is running and the URL's host, user, password and sslmode", where, reason)
	}
	s := &DB{pool: pool, turns: turnLocks{cfg: pool.Config().ConnConfig.Copy()}, commits: newShardSet[*memoryWrite](spreadAbove), sessionCommits: newSessionCommitter()}
	if opts.Now != nil {
		s.clock = func() time.Time { return opts.Now().UTC().Truncate(time.Microsecond) }
	}
	s.Store = sqlstore.New(backend{s})
	if err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate PostgreSQL database at %s: %w", where, err)
	}
	if err := s.loadColumnTypes(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL database at %s: %w", where, err)
	}
	return s, nil
}

// Close closes the pool and the connection that holds sessions' turns.
func (s *DB) Close() error {
	s.turns.close()
	s.pool.Close()
	return nil
}

// migrationLock is the advisory lock key that makes replicas starting
// together migrate one at a time.
const migrationLock = 0x6d656d73746f7265 // "memstore"

// Migrate applies migrations/NNNN_*.sql in order, each in its own
// transaction, under an advisory lock: replicas starting together migrate
// once, the others wait and find nothing left to do. Open calls it;
// `memstore migrate` runs it ahead of a deploy.
func (s *DB) Migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	err = s.applyMigrations(ctx, conn.Conn())
	// The lock belongs to the session: release it on the same connection.
	if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock)); err == nil && uerr != nil {
		err = uerr
	}
	return err
}

func (s *DB) applyMigrations(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	return storage.Migrate(ctx, migrations, func(fn func(storage.MigrationTx) error) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return fn(migrationTx{tx}) })
	})
}

// migrationTx records applied migrations in schema_migrations.
type migrationTx struct{ tx pgx.Tx }

func (m migrationTx) Applied(ctx context.Context, version int) (bool, error) {
	var n int
	err := m.tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, version).Scan(&n)
	return n > 0, err
}

func (m migrationTx) Apply(ctx context.Context, mig storage.Migration) error {
	if _, err := m.tx.Exec(ctx, mig.SQL); err != nil {
		return err
	}
	_, err := m.tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, mig.Version)
	return err
}

// maxAttempts bounds the retries of a transaction that lost a
// serialization race or a deadlock.
const maxAttempts = 10

// tx runs fn in one transaction, committing when fn returns nil, and runs
// it again when PostgreSQL aborted it for a serialization failure or a
// deadlock: fn must therefore only touch the database and its own
// results.
func (s *DB) tx(ctx context.Context, fn func(*lazyTx) error) error {
	return s.txWith(ctx, "BEGIN", true, fn)
}

// readTx runs fn in a read-only REPEATABLE READ transaction: one snapshot
// for a listing that takes several queries.
func (s *DB) readTx(ctx context.Context, fn func(*lazyTx) error) error {
	return s.txWith(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", false, fn)
}

func (s *DB) txWith(ctx context.Context, begin string, writes bool, fn func(*lazyTx) error) error {
	for attempt := 1; ; attempt++ {
		err := runLazyTx(ctx, s.pool, begin, writes, fn)
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return unavailable(err)
		}
	}
}

// retryable reports an abort that running the transaction again resolves.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// unavailable marks errors that mean the database cannot be reached (as
// opposed to a refused statement) with storage.ErrUnavailable, so the
// server answers 503 and clients retry.
func unavailable(err error) error {
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08 is a connection exception; 57P01-57P03 an administrator
		// shutdown, a crash shutdown, or a server not yet accepting.
		if strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" {
			return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
		}
		return err
	}
	// The connection failing under a statement, its COMMIT included, is
	// the database away too (its outcome unknown): closed (EOF), reset or
	// timed out (a net.Error).
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	if errors.As(err, &ce) || (errors.As(err, &ne) && !errors.Is(err, context.DeadlineExceeded)) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) || strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF") {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
	}
	return err
}

// refusedCommit reports a COMMIT that PostgreSQL refused, leaving nothing
// committed: any error of severity ERROR (a constraint checked at commit,
// a serialization failure, a full NOTIFY queue) but 40003, whose outcome
// is by definition unknown. FATAL and PANIC end the connection: whether the
// COMMIT got through before is not known. The severity is read unlocalized,
// as a server with lc_messages in another language translates the other.
func refusedCommit(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && cmp.Or(pe.SeverityUnlocalized, pe.Severity) == "ERROR" && pe.Code != "40003"
}

// notSent reports an error after which PostgreSQL surely received nothing
// of what was to run: pgx says so, or it failed before sending a batch
// (preparing its statements, encoding its arguments).
func notSent(err error) bool {
	var pre pgx.ErrPreprocessingBatch
	return pgconn.SafeToRetry(err) || errors.As(err, &pre)
}

// connectionLost reports the connection failing after what was to run had
// gone out: not a statement refused, not nothing sent, not the caller
// giving up (a context ending).
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	return err != nil && !errors.As(err, &pe) && !notSent(err) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// answerLost reports an error in place of a COMMIT's answer (or of an
// autocommitted statement's) after which whether it committed is unknown:
// the connection lost, or ended by a FATAL error.
func answerLost(err error) bool {
	var (
		pe    *pgconn.PgError
		ahead aheadOfCommit
	)
	if notSent(err) || errors.As(err, &ahead) {
		return false
	}
	return connectionLost(err) || (errors.As(err, &pe) && !refusedCommit(err))
}

// readBackWrites is outcomeUnknown's advice for a write of any kind.
const readBackWrites = "read back what it wrote before writing it again"

// outcomeUnknown marks the error of a COMMIT (or of a statement that is
// its own transaction) sent whose answer was lost: storage.ErrOutcomeUnknown
// joined with storage.ErrUnavailable, saying what went unanswered and how
// to learn whether it landed.
func outcomeUnknown(what, readBack string, err error) error {
	return fmt.Errorf("%w: %w: postgres: %s got no answer, so whether it landed is unknown (%s): %w",
		storage.ErrUnavailable, storage.ErrOutcomeUnknown, what, readBack, err)
}

// Redact returns url with its password removed, for logs and messages.
func Redact(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "postgres (unparsable URL)"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
