// Package sqlite is the embedded storage backend: one SQLite file in WAL
// mode, opened through a pure-Go driver (no cgo), so `memstore serve` needs
// no setup at all.
//
// The store's rules and SQL are package sqlstore's; this package is what
// is SQLite's own: the file's settings and migrations, times kept as text,
// one writer at a time (a Go mutex in front of the file lock), prepared
// statements kept per connection, and the group commit that runs the
// memory writes waiting at one moment in one transaction.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configures Open.
type Options struct {
	// Now stamps rows; nil means time.Now. Tests inject a clock here.
	Now func() time.Time
	// MaxConnections bounds the connection pool (default maxOpenConns).
	MaxConnections int
}

// DB is the SQLite implementation of storage.Store.
type DB struct {
	*sqlstore.Store
	db  *sql.DB
	now func() time.Time
	// stmts caches prepared statements by query text (see cachedQ);
	// preparing holds the queries being prepared in the background.
	stmts, preparing sync.Map
	// background tracks those preparations so that Close waits for them.
	background background
	// commits runs memory writes with group commit (groupcommit.go).
	commits committer
	// turns are the sessions' turns taken: one process owns the file, so
	// the turns it holds are all there are.
	turns storage.TurnSet
	// writer queues this process's write transactions (tx and the group
	// committer's). Left to SQLite, waiting writers poll the file lock
	// from its busy handler, and with 32 of them claiming at once some
	// lost every round until busy_timeout failed them with SQLITE_BUSY; a
	// Go mutex turns fair once a waiter has waited a millisecond.
	writer sync.Mutex
}

var _ storage.Store = (*DB)(nil)

// Open opens (creating if needed) the database file at path and applies any
// migration it has not seen yet.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %s: %w", path, err)
	}
	// Keep the connections that concurrent readers open: database/sql
	// keeps 2 idle by default, and every connection it closes must be
	// opened again and its prepared statements prepared again, which was
	// a third of the CPU of a write under 8 concurrent clients.
	db.SetMaxIdleConns(maxIdleConns)
	db.SetMaxOpenConns(cmp.Or(opts.MaxConnections, maxOpenConns))
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &DB{db: db, now: func() time.Time { return now().UTC() }}
	s.background.ctx, s.background.cancel = context.WithCancel(context.Background())
	s.Store = sqlstore.New(backend{s})
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate sqlite database %s: %w", path, err)
	}
	s.startCommitter()
	return s, nil
}

// maxIdleConns is how many open connections the pool keeps between
// requests: enough for the readers of a busy server.
const maxIdleConns = 16

// maxOpenConns bounds the pool. Unbounded, a thousand concurrent readers
// opened a thousand connections, each with its own descriptor and page
// cache (about 200 kB of a stream's cost), and SQLite keeps a closed
// connection's descriptor while others hold locks on the file. Readers
// beyond it wait for a connection; WAL reads are short, so the wait is too.
const maxOpenConns = 64

// DSN is the driver's data source name for the database file at path, with
// the settings memstore runs SQLite with. Benchmarks open raw SQLite with it
// so that both sides of a comparison run on the same settings.
func DSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	// The statement journal, which undoes one failed statement inside
	// an open transaction, lives in memory instead of a temporary file:
	// it never serves recovery, so writing it to disk bought nothing.
	q.Add("_pragma", "temp_store(MEMORY)")
	// FULL: every commit fsyncs the WAL before it returns, so a write the
	// API acknowledged survives a power cut too; NORMAL (the usual WAL
	// choice) survives only a crash of the process. See docs/configuration.md.
	q.Add("_pragma", "synchronous(FULL)")
	// After a long reader ends, the next checkpoint can copy the whole
	// WAL back, but SQLite reuses the file at its largest size unless
	// told otherwise: this truncates it back to 16 MiB once it restarts.
	q.Add("_pragma", "journal_size_limit(16777216)")
	q.Add("_pragma", "mmap_size(1073741824)")
	// Write transactions take the write lock at BEGIN, so two writers queue
	// on busy_timeout instead of failing to upgrade a read lock.
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Close closes the database.
func (s *DB) Close() error {
	s.stopCommitter()
	s.background.stop()
	s.closeStatements()
	return s.db.Close()
}

// migrate applies migrations/NNNN_*.sql in order, each in its own
// transaction, recording the applied numbers in schema_migrations.
func (s *DB) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	return storage.Migrate(ctx, migrations, func(fn func(storage.MigrationTx) error) error {
		return s.tx(ctx, func(tx *sql.Tx) error { return fn(migrationTx{s, tx}) })
	})
}

// migrationTx records applied migrations in schema_migrations.
type migrationTx struct {
	s  *DB
	tx *sql.Tx
}

func (m migrationTx) Applied(ctx context.Context, version int) (bool, error) {
	var n int
	err := m.tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n)
	return n > 0, err
}

func (m migrationTx) Apply(ctx context.Context, mig storage.Migration) error {
	if _, err := m.tx.ExecContext(ctx, mig.SQL); err != nil {
		return err
	}
	_, err := m.tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, mig.Version, formatTime(m.s.now()))
	return err
}

// tx runs fn in one write transaction, committing when fn returns nil.
func (s *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	s.writer.Lock()
	defer s.writer.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// readTx runs fn in a read-only transaction: one consistent snapshot for a
// listing that takes several queries, without taking the write lock (WAL
// readers never block the writer).
func (s *DB) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// backend is sqlstore.Backend on SQLite.
type backend struct{ s *DB }

func (b backend) DB() sqlstore.Conn { return conn{b.s.cached(nil)} }

// Write runs its statements unprepared: preparing one on the transaction's
// connection costs more than parsing it for the control plane's writes,
// each of which runs a statement once or twice. The hot reads and the
// memory writes run prepared.
func (b backend) Write(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return b.s.tx(ctx, func(tx *sql.Tx) error { return fn(conn{tx}) })
}

func (b backend) Read(ctx context.Context, fn func(sqlstore.Conn) error) error {
	return b.s.readTx(ctx, func(tx *sql.Tx) error { return fn(conn{b.s.cached(tx)}) })
}

// WriteMemory implements sqlstore.MemoryWriter with group commit.
func (b backend) WriteMemory(ctx context.Context, _ string, fn func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error) error {
	return b.s.batch(ctx, func(ctx context.Context, tx *batchTx) error {
		return fn(ctx, conn{tx}, batchCounters{tx})
	})
}

func (b backend) Now(context.Context, sqlstore.Conn) (time.Time, error) { return b.s.now(), nil }

// Notify does nothing: one process owns the file.
func (b backend) Notify(context.Context, sqlstore.Conn, string, string) error { return nil }

func (b backend) Duplicate(err error, table, column string) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: "+table+"."+column)
}

func (b backend) Dialect() sqlstore.Dialect {
	// No row locks: the transaction holds the file's write lock. Webhook
	// attempts have no id of their own; the rowid is their order.
	return sqlstore.Dialect{SingleWriter: true, AttemptOrder: "rowid", Search: ftsIndex{}}
}

// Timestamps are stored as fixed-width RFC 3339 text with nanoseconds, so
// that text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }
