package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Batches that guess their reads. A batch that reads first takes two round
// trips: BEGIN, its stores' locks and its writes' first reads, then the
// writes and the COMMIT; with few writers every batch waits for both, one
// after the other (8 clients on one store: the first 0.5–1 ms of a batch of
// 3–4 ms). When this server committed the batch's stores last, what the
// reads answer is nearly always known: the stores' counters are what its
// last batch left, a create's path is free, and an update's memory is as
// this server wrote it. Such a batch runs its writes on those guesses and
// sends, in one round trip, BEGIN, the locks, a statement that fails the
// transaction unless the counters are what it guessed, statements that
// fail it unless the guessed reads answer what was guessed
// (sqlstore.Guesser), its writes, and the COMMIT. A wrong guess (another
// replica wrote the store, the path was taken, the memory changed) aborts
// the transaction before its COMMIT; the batch then runs again reading, and
// its stores' batches read first for guessPause. Every write is still
// answered after its COMMIT, its checks made on what the locked rows held.

// guessedWrongCode is the SQLSTATE of memstore_guessed_wrong()
// (migrations/0014_guessed_reads.sql).
const guessedWrongCode = "MSG01"

// guessPause is how long a store's batches read first after a wrong guess:
// a store that another replica writes too, or a client that keeps creating
// a taken path, costs one wasted round trip per pause at most.
const guessPause = time.Second

// clockFresh is how long the database's clock, read by a batch that read
// first, stamps guessed batches by the local clock since.
const clockFresh = time.Second

// maxGuessedStores bounds the stores whose counters are remembered; past
// it they are all forgotten, and batches read first until they are known
// again.
const maxGuessedStores = 4096

// errNeedsReads ends a guessed run whose write asked for a read it cannot
// guess: nothing was sent, and the batch runs again reading.
var errNeedsReads = errors.New("postgres: a guessed batch needs a read")

// guesses is what a DB knows for guessing a batch: the stores' counters as
// its batches committed them, the database's clock, and the stores whose
// batches read first for a while after a wrong guess.
type guesses struct {
	mu     sync.Mutex
	stores map[string]storeCounts
	// base is the database's clock as a batch read it, at local time at.
	base, at time.Time
	// fresh is how long that reading lasts (clockFresh unless a test
	// says otherwise).
	fresh time.Duration
	off   map[string]time.Time
	// batches counts the batches committed on guesses; wrong, those whose
	// guess was wrong.
	batches, wrong atomic.Int64
}

// storeCounts are a store's counters as a committed batch left them, and
// a time no earlier than the batch's last stamp.
type storeCounts struct {
	seq      int64
	count    int
	archived bool
	stamped  time.Time
}

// start fills c for a guessed run of a batch on the stores ids and reports
// whether it may guess: every store's counters are known, the clock was
// read lately, and no guess of a store's was wrong lately.
func (g *guesses) start(c *batchConn, ids []string) bool {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	base, ok := g.clockLocked(now)
	if len(ids) == 0 || !ok || g.pausedLocked(ids, now) {
		return false
	}
	for _, id := range ids {
		if _, ok := g.stores[id]; !ok {
			return false
		}
	}
	// The clock read lags the database's by the time its answer took to
	// come back: a batch stamps no earlier than its stores' last stamps,
	// so a store's times never go back.
	c.guessed = make([]guessedStore, len(ids))
	for i, id := range ids {
		k := g.stores[id]
		c.guessed[i] = guessedStore{id, k}
		c.stores[id] = &storeRow{seq: k.seq, count: k.count, archived: k.archived}
		if k.stamped.After(base) {
			base = k.stamped
		}
	}
	c.guessing = true
	c.base, c.start = base, now
	return true
}

// readClock notes the database's clock base, read by a batch that read
// first and received at local time at (nothing where at is zero).
func (g *guesses) readClock(base, at time.Time) {
	if at.IsZero() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.base, g.at = base, at
}

// startSessions reports whether a batch of appends to the sessions ids
// may run on guesses, and at what clock: the database's clock was read
// lately, and no guess of theirs was wrong lately.
func (g *guesses) startSessions(ids []string) (time.Time, bool) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	clock, ok := g.clockLocked(now)
	return clock, ok && !g.pausedLocked(ids, now)
}

// clockLocked is the database's clock at local time now, from its last
// reading, unless that reading is too old (clockFresh); g.mu is held.
func (g *guesses) clockLocked(now time.Time) (time.Time, bool) {
	fresh := g.fresh
	if fresh == 0 {
		fresh = clockFresh
	}
	if g.at.IsZero() || now.Sub(g.at) > fresh {
		return time.Time{}, false
	}
	return g.base.Add(now.Sub(g.at)), true
}

// pausedLocked reports whether a guess of any of ids was wrong lately;
// g.mu is held.
func (g *guesses) pausedLocked(ids []string, now time.Time) bool {
	for _, id := range ids {
		if now.Before(g.off[id]) {
			return true
		}
	}
	return false
}

// committed notes the counters of a committed batch's stores, and stamped,
// a time no earlier than the batch's stamps.
func (g *guesses) committed(stores map[string]*storeRow, stamped time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stores == nil || len(g.stores)+len(stores) > maxGuessedStores {
		g.stores = make(map[string]storeCounts, len(stores))
	}
	for id, r := range stores {
		g.stores[id] = storeCounts{seq: r.seq, count: r.count, archived: r.archived, stamped: stamped}
	}
}

// guessedWrong forgets the stores of a batch that guessed wrong, and their
// batches read first for guessPause.
func (g *guesses) guessedWrong(ids []string) {
	g.wrong.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		delete(g.stores, id)
	}
	g.pauseLocked(ids)
}

// pause makes the batches of ids (stores' or sessions') read first for
// guessPause.
func (g *guesses) pause(ids []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseLocked(ids)
}

func (g *guesses) pauseLocked(ids []string) {
	until := time.Now().Add(guessPause)
	if g.off == nil || len(g.off) > maxGuessedStores {
		g.off = make(map[string]time.Time)
	}
	for _, id := range ids {
		g.off[id] = until
	}
}

// guessedStore is a store's counters as a guessed batch found them.
type guessedStore struct {
	id string
	storeCounts
}

// Guessing implements sqlstore.Guesser.
func (c *batchConn) Guessing() bool { return c.guessing }

// Expect implements sqlstore.Guesser. The guessed reads are checked
// before the writes, not each in its place among them: a read is guessed
// only when no earlier write of the batch may have changed its answer
// (sqlstore.Changes), so it answers the same there, and the reads that
// ask the same query are checked in one statement (DB.lateral), as reads
// ahead are fetched: eight creates' path checks were eight statements of
// the batch's one backend.
func (c *batchConn) Expect(query string, args []any) {
	c.expected = append(c.expected, &aheadRead{query: query, args: args})
}

// checkStatement is the statement that checks the guessed reads g, which
// ask one query and, the guess says, answer no row: the query itself for
// one read, one lateral statement (DB.lateral) for several. It fails on
// the first row it finds.
func (s *DB) checkStatement(g []*aheadRead) (string, []any) {
	query, args := s.numbered(g[0].query), g[0].args
	if len(g) > 1 {
		query, args = s.lateral(g)
	}
	return `SELECT memstore_guessed_wrong() FROM (` + query + `) AS guessed`, args
}

// needsReads ends the guessed run of a write that asked for a read.
func (c *batchConn) needsReads() error {
	c.readsNeeded = true
	return errNeedsReads
}

// lockStores is the statement that locks a batch's stores' rows in the
// order of ids (sorted, so in id order: two batches never deadlock) and
// reads their counters and the database's clock. Each store is looked up
// by its key in a subquery of its own, which the statement's generic plan
// (genericPlans, made with sequential scans off) does by the primary key:
// as `id = ANY($1)`, the generic plan read every store's row
// (TestBatchStatementsOnGenericPlansReadOnlyTheirRows).
const lockStores = `SELECT s.id, s.last_sequence, s.memory_count, s.archived_at IS NOT NULL, clock_timestamp()
	FROM unnest($1::text[]) WITH ORDINALITY AS k(id, ord)
	CROSS JOIN LATERAL (SELECT m.id, m.last_sequence, m.memory_count, m.archived_at FROM memory_stores m WHERE m.id = k.id FOR UPDATE) AS s
	ORDER BY k.ord`

// checkGuessedStores fails the transaction unless every store, locked,
// holds the counters the batch guessed. Each store is looked up by its
// key in a subquery of its own: as a join, PostgreSQL read every store's
// row (a hash join over a scan of the table) to check a few.
const checkGuessedStores = `SELECT memstore_guessed_wrong() FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bool[]) AS g(id, seq, n, archived)
	WHERE (SELECT m.last_sequence = g.seq AND m.memory_count = g.n AND (m.archived_at IS NOT NULL) = g.archived FROM memory_stores m WHERE m.id = g.id) IS NOT TRUE`

// commitGuessed sends a guessed batch in one round trip: BEGIN, the locks,
// the check of the guessed counters, the checks of the guessed reads, the
// writes, the counters the batch moved, and the COMMIT. The locks and the
// checks run on generic plans, as a batch's reads do (genericPlans).
func (c *batchConn) commitGuessed(ctx context.Context) error {
	var (
		bt       pgx.Batch
		ids      = make([]string, len(c.guessed))
		seqs     = make([]int64, len(c.guessed))
		counts   = make([]int64, len(c.guessed))
		archived = make([]bool, len(c.guessed))
	)
	for i, g := range c.guessed {
		ids[i], seqs[i], counts[i], archived[i] = g.id, g.seq, int64(g.count), g.archived
	}
	bt.Queue("BEGIN")
	bt.Queue(genericPlans)
	bt.Queue(lockStores, ids)
	bt.Queue(checkGuessedStores, ids, seqs, counts, archived)
	checks := c.queueChecks(&bt)
	queueDefaultPlans(&bt)
	ahead := c.queueCommit(&bt)
	err := c.guessedResults(c.pc.SendBatch(ctx, &bt), checks, ahead)
	if err != nil && c.failed == nil {
		err = fmt.Errorf("postgres: commit memory writes: %w", err)
	}
	if isGuessedWrong(err) {
		c.wrongGuess = true
	}
	return err
}

// queueChecks queues the statements that check the guessed reads, each
// group of reads asking one query in one statement; it returns how many it
// queued.
func (c *batchConn) queueChecks(bt *pgx.Batch) int {
	groups := groupAhead(c.expected)
	for _, g := range groups {
		query, args := c.s.checkStatement(g)
		bt.Queue(query, args...)
	}
	return len(groups)
}

// guessedResults reads the answers to a guessed batch: BEGIN, the plans'
// settings, the locks, the counters' check, the checks of the reads, the
// settings put back, and then the deferred statements', the counters' and
// the COMMIT's; it closes br.
func (c *batchConn) guessedResults(br pgx.BatchResults, checks, ahead int) error {
	for range 4 + checks + len(defaultPlans) {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return markAhead(err)
		}
	}
	return c.commitResults(br, ahead)
}

// isGuessedWrong reports the error of memstore_guessed_wrong().
func isGuessedWrong(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == guessedWrongCode
}
