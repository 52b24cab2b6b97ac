package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// Group commit of memory writes. Every write to a store must take the
// store's row lock (it orders the change feed, the preconditions, the path
// checks and the memory limit), and a transaction holds that lock until its
// COMMIT has reached the disk: one transaction per write made a store's
// writers queue, each paying its own BEGIN, lock, counter update, COMMIT
// and flush of the WAL, about eight round trips with the lock held.
//
// Instead the writes waiting for a shard of stores run together in one
// transaction: it locks their stores' rows once, in id order (so two
// batches never deadlock), keeps the stores' sequences and counts in
// memory, writes the changed counters once, and answers each write only
// after the COMMIT returned. A write refused by its own checks changed
// nothing and the others go on; a write that failed after changing
// something rolls the transaction back, gets its error, and the others run
// again in a new one (the same rules as SQLite's committer).
//
// Writes wait on shards (shards.go): the writes to one store batch
// together, and batches of different shards commit in parallel.

// maxBatch bounds the writes of one transaction, so one batch does not
// hold its stores' locks for long.
const maxBatch = 64

type memoryWrite struct {
	ctx     context.Context
	storeID string
	fn      func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error
	done    chan error
}

// writeMemory runs fn as a write transaction of its own, from the caller's
// view, sharing the actual transaction with the writes that wait with it.
// Once queued, the write runs to its end whatever ctx says, so its outcome
// is known when writeMemory returns.
func (s *DB) writeMemory(ctx context.Context, storeID string, fn func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error) error {
	sh := s.commits.join(storeID)
	defer s.commits.leave()
	w := &memoryWrite{ctx: ctx, storeID: storeID, fn: fn, done: make(chan error, 1)}
	if sh.queue(w) {
		sh.lead(batching[*memoryWrite]{take: takeMemoryBatch, size: memoryBatchSize, run: s.commitBatch})
	}
	return <-w.done
}

// takeMemoryBatch takes the first maxBatch writes waiting.
func takeMemoryBatch(pending []*memoryWrite) (batch, rest []*memoryWrite) {
	n := memoryBatchSize(pending)
	return slices.Clone(pending[:n]), slices.Delete(pending, 0, n)
}

func memoryBatchSize(pending []*memoryWrite) int { return min(len(pending), maxBatch) }

// pendingBatch is the writes of one batch and what is known of each.
type pendingBatch struct {
	writes []*memoryWrite
	// own[i] is what writes[i] did on its own when it last ran; settled[i]:
	// that outcome stands whatever the transaction does.
	own     []error
	settled []bool
	// noAhead: a read ahead failed, so the batch reads as its writes run.
	noAhead bool
	// noGuess: a guessed run needed a read or guessed wrong, so the batch
	// reads first (guess.go); noMerge: a merged statement failed, so the
	// batch sends each row's statement (merge.go).
	noGuess, noMerge bool
}

// commitBatch runs the writes to one COMMIT and returns what answers each:
// with its own error, or the transaction's when it has none. A panic of
// the batch's own (a write's is caught by runWrite) is answered as the
// database being away: the transaction was rolled back as it unwound, and
// the writes may be sent again.
func (s *DB) commitBatch(writes []*memoryWrite) (answer func()) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("postgres: a batch of memory writes panicked; its writes are answered unavailable", "panic", p, "stack", string(debug.Stack()))
			err := fmt.Errorf("%w: postgres: the batch of memory writes failed: %v", storage.ErrUnavailable, p)
			answer = func() {
				for _, w := range writes {
					w.done <- err
				}
			}
		}
	}()
	b := &pendingBatch{writes: writes, own: make([]error, len(writes)), settled: make([]bool, len(writes))}
	ctx := context.Background()
	var err error
	for attempt := 1; ; attempt++ {
		var again bool
		again, err = s.runBatch(ctx, b)
		if again {
			attempt--
			continue
		}
		if err == nil || attempt == maxAttempts || !retryable(err) {
			break
		}
	}
	return func() {
		for i, w := range b.writes {
			werr := unavailable(err)
			if b.own[i] != nil {
				werr = b.own[i]
			}
			w.done <- werr
		}
	}
}

// runBatch runs the batch's unsettled writes in one transaction and commits.
// again reports a write that failed halfway: the transaction was rolled
// back, that write settled with its error, and the batch must run again.
func (s *DB) runBatch(ctx context.Context, b *pendingBatch) (again bool, err error) {
	// A refusal stands only from the run that commits: a guessed run's may
	// rest on a guess found wrong, or never checked.
	b.forgetRefusals()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer pc.Release()
	// sent: a transaction was begun on pc, to be rolled back unless
	// committed.
	sent, committed := false, false
	defer func() {
		if sent && !committed {
			if _, rerr := pc.Exec(ctx, "ROLLBACK"); rerr != nil {
				pc.Conn().Close(ctx) // the pool drops it rather than reuse a connection in an unknown state
			}
		}
	}()
	var ids []string
	for i, w := range b.writes {
		if !b.settled[i] {
			ids = append(ids, w.storeID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	c := &batchConn{conn: conn{s, pc}, pc: pc, stores: map[string]*storeRow{}, changes: &sqlstore.Changes{}, noMerge: b.noMerge}
	if b.noGuess || !s.guesses.start(c, ids) {
		if !b.noAhead {
			c.ahead = discover(ctx, b)
		}
		sent = true
		if err := c.begin(ctx, ids); err != nil {
			if errors.Is(err, errAheadFailed) {
				b.noAhead = true
				return true, nil
			}
			return false, err
		}
	}
	if s.clock != nil {
		c.clock = s.clock
	}
	for i, w := range b.writes {
		if b.settled[i] {
			continue
		}
		b.own[i] = nil
		if err := w.ctx.Err(); err != nil {
			b.own[i], b.settled[i] = err, true // given up while waiting: never run
			continue
		}
		c.changed, c.broken, c.write = false, false, i
		b.own[i] = runWrite(ctx, c, w)
		if c.mergedFailed {
			b.noMerge = true // the batch runs again unmerged
			return true, nil
		}
		// A guessed run ends, nothing sent, at a read it cannot guess, an
		// error other than a refusal, or a refusal after the write changed
		// something: reading decides them.
		if c.readsNeeded || (c.guessing && b.own[i] != nil && (c.changed || !storage.IsRefusal(b.own[i]))) {
			b.noGuess = true
			return true, nil
		}
		if c.failed != nil {
			return b.failed(c.failed)
		}
		if b.own[i] != nil && (c.changed || c.broken || !storage.IsRefusal(b.own[i])) {
			if retryable(b.own[i]) {
				return false, b.own[i]
			}
			b.own[i] = unavailable(b.own[i])
			b.settled[i] = true
			return true, nil
		}
		c.settle(b.own[i] == nil)
	}
	commit := c.commit
	if c.guessing {
		commit = c.commitGuessed
	}
	sent = true
	if err := commit(ctx); err != nil {
		if c.mergedFailed {
			b.noMerge = true // the batch runs again unmerged
			return true, nil
		}
		if c.wrongGuess || (c.guessing && c.failed == nil && nothingCommitted(err)) {
			// A guess found wrong, or the guessed transaction refused
			// before its COMMIT: the batch runs again reading.
			if c.wrongGuess {
				s.guesses.guessedWrong(ids)
			}
			b.noGuess = true
			return true, nil
		}
		if c.failed != nil {
			return b.failed(c.failed)
		}
		if c.guessing {
			b.forgetRefusals() // unchecked: the COMMIT's outcome is unknown
		}
		if answerLost(err) {
			// Sent and not answered: running the writes again could
			// apply them twice, and answering them as not applied could
			// be wrong.
			return false, outcomeUnknown("the COMMIT of a batch of memory writes", "read the memory back before writing it again", err)
		}
		return false, err
	}
	committed = true
	if c.guessing {
		s.guesses.batches.Add(1)
	}
	s.guesses.committed(c.stores, c.now())
	return false, nil
}

// forgetRefusals forgets the refusals of the writes not settled.
func (b *pendingBatch) forgetRefusals() {
	for i := range b.own {
		if !b.settled[i] {
			b.own[i] = nil
		}
	}
}

// nothingCommitted reports an error after which the transaction surely did
// not commit: PostgreSQL refused a statement (and skipped the rest of the
// pipeline, the COMMIT with it), or nothing was sent.
func nothingCommitted(err error) bool {
	var ahead aheadOfCommit
	return errors.As(err, &ahead) || refusedCommit(err) || notSent(err)
}

// failed settles the write whose deferred statement failed with its error
// (the transaction is rolled back and the others run again), or fails the
// batch when the error is one to retry.
func (b *pendingBatch) failed(f *deferredFailure) (again bool, err error) {
	if retryable(f.err) {
		return false, f.err
	}
	b.own[f.write], b.settled[f.write] = unavailable(f.err), true
	return true, nil
}

// runWrite runs w, turning a panic into an error so one bad write cannot
// take down the writers that share its batch.
func runWrite(ctx context.Context, c *batchConn, w *memoryWrite) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("postgres: memory write panicked: %v", p)
		}
	}()
	return w.fn(ctx, c, batchCounters{c})
}

// storeRow is what a batch keeps of a locked memory_stores row.
type storeRow struct {
	seq      int64
	count    int
	archived bool
	changed  bool
	// pending is the running write's change, kept if it succeeds.
	pendingSeq   int64
	pendingCount int
	pending      bool
}

// batchConn is the batch's transaction as one write sees it: it notes
// whether the write changed anything or hit a database error (PostgreSQL
// then refuses every later statement of the transaction), and holds the
// stores the batch locked.
type batchConn struct {
	conn
	pc              *pgxpool.Conn
	changed, broken bool
	stores          map[string]*storeRow
	// write is the index in the batch of the running write.
	write int
	// ahead[i] is the first read of write i, fetched with the locks.
	ahead   []*aheadRead
	changes *sqlstore.Changes
	// deferred are the statements not yet sent; failed, the first of
	// them that failed.
	deferred []deferredExec
	failed   *deferredFailure
	// base is the database's clock when the batch locked its stores, at
	// local monotonic time start: the writes of a batch are stamped with
	// base plus the time since, one clock read per batch.
	base, start time.Time
	clock       func() time.Time
	// guessing: the writes run on guesses (guess.go), of the stores'
	// counters guessed; readsNeeded, a write asked for a read it could not
	// guess; wrongGuess, the database found a guess wrong.
	guessing                bool
	guessed                 []guessedStore
	expected                []*aheadRead
	readsNeeded, wrongGuess bool
	// noMerge: send each row's statement; mergedFailed, a merged
	// statement failed (merge.go).
	noMerge, mergedFailed bool
}

// begin opens the transaction, locks the stores' rows in id order, reads
// their counters and the database's clock, and reads ahead the first read
// of each write, in one round trip.
func (c *batchConn) begin(ctx context.Context, ids []string) error {
	var bt pgx.Batch
	bt.Queue("BEGIN")
	bt.Queue(genericPlans)
	bt.Queue(lockStores, ids)
	groups := groupAhead(c.ahead)
	for _, g := range groups {
		if len(g) == 1 {
			bt.Queue(c.s.numbered(g[0].query), g[0].args...)
		} else {
			query, args := c.s.lateral(g)
			bt.Queue(query, args...)
		}
	}
	queueDefaultPlans(&bt)
	br := c.pc.SendBatch(ctx, &bt)
	defer br.Close()
	for range 2 { // BEGIN, the plans' settings
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rs, err := br.Query()
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			id string
			r  storeRow
			at time.Time
		)
		if err := rs.Scan(&id, &r.seq, &r.count, &r.archived, &at); err != nil {
			return err
		}
		c.stores[id] = &r
		c.base = at
	}
	if err := rs.Err(); err != nil {
		return err
	}
	c.start = time.Now()
	if c.base.IsZero() { // no store found: every write will be refused
		c.base = c.start
	} else {
		c.s.guesses.readClock(c.base, c.start)
	}
	for _, g := range groups {
		fetch := g[0].fetch
		if len(g) > 1 {
			fetch = func(br pgx.BatchResults) error { return fetchLateral(br, g) }
		}
		if err := fetch(br); err != nil {
			return fmt.Errorf("%w: %w", errAheadFailed, err)
		}
	}
	for range len(defaultPlans) { // the plans' settings put back
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// A batch's locks and reads run on the plan PostgreSQL keeps for their
// statement (its generic plan) rather than one made for each batch. The
// reads of one batch's arrays are a lateral statement whose plan for the
// arrays at hand looked cheaper to PostgreSQL than its generic plan, so it
// planned the statement anew for every batch, 0.25–0.32 ms of the backend
// that holds the batch's stores; the stores' lock and the guessed stores'
// check were planned anew every time too (0.13 and 0.05 ms a batch,
// pg_stat_statements' plans beside its calls;
// docs/postgresql-performance.md). Their generic plans are point lookups
// on the primary keys and range seeks on the (store_id, path) index
// (TestAPathCheckReadsItsPathsNotItsStore,
// TestGuessChecksReadTheirRowsNotTheTable,
// TestBatchStatementsOnGenericPlansReadOnlyTheirRows). A generic plan is made once
// and kept: one made while the statistics said a table held a few rows
// scanned it, and went on scanning it once it had grown, so the plans are
// made with sequential scans off (enable_seqscan: a scan is then chosen
// only where no index serves, and none of these statements has such a
// table). Only the locks and the reads are affected: the settings are put
// back before the writes run, to the server's own (TO DEFAULT is the value
// the connection started with, from the URL or the role; memstore never
// sets them on a connection).
const genericPlans = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)"

var defaultPlans = [...]string{"SET LOCAL plan_cache_mode TO DEFAULT", "SET LOCAL enable_seqscan TO DEFAULT"}

// queueDefaultPlans queues the statements that put the plans' settings
// back, len(defaultPlans) of them.
func queueDefaultPlans(bt *pgx.Batch) {
	for _, q := range defaultPlans {
		bt.Queue(q)
	}
}

// groupAhead puts together the reads ahead that ask the same query with
// text arguments (the path checks of a batch's creates, the reads of its
// updates): each group is fetched in one statement (DB.lateral). Every
// statement costs the batch's one backend an executor start and a reply;
// one statement for a batch's path checks took back about half of what
// they cost (docs/postgresql-performance.md). The reads are all answered
// before any write runs, so their order does not matter.
func groupAhead(reads []*aheadRead) [][]*aheadRead {
	var (
		groups [][]*aheadRead
		at     = map[string]int{}
	)
	for _, a := range reads {
		if a == nil {
			continue
		}
		if !allText(a.args) {
			groups = append(groups, []*aheadRead{a})
			continue
		}
		if i, ok := at[a.query]; ok {
			groups[i] = append(groups[i], a)
			continue
		}
		at[a.query] = len(groups)
		groups = append(groups, []*aheadRead{a})
	}
	return groups
}

// allText reports whether args are all strings, which DB.lateral can
// send as text arrays.
func allText(args []any) bool {
	for _, a := range args {
		if _, ok := a.(string); !ok {
			return false
		}
	}
	return len(args) > 0
}

// placeholder is a numbered parameter of a query ($1, $2, …).
var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// lateral is one statement asking the query of the reads g, all with text
// arguments, once per read: the arguments travel as one array per
// position, unnested with the read's ordinal, and the query runs on each
// row as a LATERAL subquery, its $n read from column n. It answers
// (ordinal, the query's columns …) for each row the query gives.
func (s *DB) lateral(g []*aheadRead) (string, []any) {
	n := len(g[0].args)
	var (
		q    strings.Builder
		cols = make([]string, n)
		args = make([]any, n)
	)
	q.WriteString("SELECT ahead_args.ord, ahead_row.* FROM unnest(")
	for k := range n {
		values := make([]string, len(g))
		for i, a := range g {
			values[i] = a.args[k].(string)
		}
		args[k] = values
		cols[k] = fmt.Sprintf("c%d", k+1)
		if k > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$%d::text[]", k+1)
	}
	q.WriteString(") WITH ORDINALITY AS ahead_args(" + strings.Join(cols, ", ") + ", ord) CROSS JOIN LATERAL (")
	q.WriteString(placeholder.ReplaceAllString(s.numbered(g[0].query), "ahead_args.c$1"))
	q.WriteString(") AS ahead_row")
	return q.String(), args
}

// fetchLateral reads the answer to a lateral statement from br: each
// read's first row, copied out of pgx's buffers, without the ordinal.
func fetchLateral(br pgx.BatchResults, g []*aheadRead) error {
	rs, err := br.Query()
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		raw := rs.RawValues()
		vals, err := rs.Values()
		if err != nil {
			return err
		}
		ord, ok := vals[0].(int64)
		if !ok || ord < 1 || int(ord) > len(g) {
			return fmt.Errorf("postgres: read ahead answered for read %v of %d", vals[0], len(g))
		}
		a := g[ord-1]
		if a.found {
			continue
		}
		a.found = true
		a.fields = slices.Clone(rs.FieldDescriptions()[1:])
		a.values = cloneValues(raw[1:])
	}
	rs.Close()
	return rs.Err()
}

// now is the time a write of the batch is stamped with.
func (c *batchConn) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return c.base.Add(time.Since(c.start)).UTC().Truncate(time.Microsecond)
}

// commit sends the deferred statements, writes the counters the batch
// moved and commits, in one round trip.
func (c *batchConn) commit(ctx context.Context) error {
	var bt pgx.Batch
	ahead := c.queueCommit(&bt)
	err := c.commitResults(c.pc.SendBatch(ctx, &bt), ahead)
	if err != nil && c.failed == nil {
		err = fmt.Errorf("postgres: commit memory writes: %w", err)
	}
	return err
}

// commitResults reads the answers that end a batch's pipeline: the
// deferred statements', the ahead statements' queued before the COMMIT,
// and the COMMIT's; it closes br.
func (c *batchConn) commitResults(br pgx.BatchResults, ahead int) error {
	err := c.deferredResults(br)
	for i := 0; err == nil && i < ahead; i++ {
		_, err = br.Exec()
		err = markAhead(err)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// aheadOfCommit is PostgreSQL's refusal of a statement queued ahead of
// the COMMIT in the same pipeline, FATAL included: PostgreSQL answers in
// order, so the COMMIT never ran.
type aheadOfCommit struct{ err error }

func (e aheadOfCommit) Error() string { return e.err.Error() }
func (e aheadOfCommit) Unwrap() error { return e.err }

// markAhead marks err, a statement's answer ahead of the COMMIT, when it
// is PostgreSQL's; a connection lost stays what it is (the COMMIT may have
// run, its answer lost with the rest).
func markAhead(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return aheadOfCommit{err}
	}
	return err
}

// send sends bt, whose first statements are the deferred ones, and reads
// their answers (a failure is noted as c.failed) and the rest's.
func (c *batchConn) send(ctx context.Context, bt *pgx.Batch) error {
	br := c.pc.SendBatch(ctx, bt)
	if err := c.deferredResults(br); err != nil {
		br.Close()
		return err
	}
	return br.Close()
}

// queueCommit queues the deferred statements, the counters the batch moved
// and the COMMIT; it returns how many statements it queued between the
// deferred ones and the COMMIT.
func (c *batchConn) queueCommit(bt *pgx.Batch) (ahead int) {
	var (
		ids    []string
		seqs   []int64
		counts []int64
	)
	c.queueDeferred(bt)
	for id, r := range c.stores {
		if r.changed {
			ids, seqs, counts = append(ids, id), append(seqs, r.seq), append(counts, int64(r.count))
		}
	}
	if len(ids) > 0 {
		bt.Queue(genericPlans)
		bt.Queue(updateCounters, ids, seqs, counts)
		ahead += 2
	}
	bt.Queue("COMMIT")
	return ahead
}

// updateCounters writes the counters a batch moved. It runs on its generic
// plan, made with sequential scans off (genericPlans), as the stores' lock
// does: as a join of the stores with the arrays, the plan PostgreSQL kept
// from statistics taken while the table held three stores hashed every
// store's row for each batch, 0.64 ms a batch once it held 3,003
// (TestBatchStatementsOnGenericPlansReadOnlyTheirRows). Only the COMMIT follows
// it, so the settings are not put back.
const updateCounters = `UPDATE memory_stores m SET last_sequence = u.seq, memory_count = u.n FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(id, seq, n) WHERE m.id = u.id`

// deferredExec is a statement of write `write` not yet sent, or, merged,
// the rows of several writes (merge.go).
type deferredExec struct {
	query  string
	args   []any
	write  int
	merged bool
}

// deferredFailure is the first deferred statement that failed, and whose.
type deferredFailure struct {
	write int
	err   error
}

// Defer implements sqlstore.Deferrer: the statement goes with the next
// read or the COMMIT, in the same pipeline.
func (c *batchConn) Defer(_ context.Context, query string, args ...any) {
	c.changed = true
	c.deferred = append(c.deferred, deferredExec{query: c.s.numbered(query), args: args, write: c.write})
}

func (c *batchConn) queueDeferred(bt *pgx.Batch) {
	if !c.noMerge {
		c.deferred = c.s.merge(c.deferred)
	}
	for _, d := range c.deferred {
		bt.Queue(d.query, d.args...)
	}
}

// deferredResults reads the answers to the deferred statements queued
// first in br, noting the first that failed.
func (c *batchConn) deferredResults(br pgx.BatchResults) error {
	deferred := c.deferred
	c.deferred = nil
	for _, d := range deferred {
		if _, err := br.Exec(); err != nil {
			c.broken = true
			// A statement PostgreSQL refused is the write's own failure.
			// A connection lost is the batch's (behind a COMMIT it may
			// have committed, and running the others again could apply
			// them twice), and so is a batch pgx could not send (which
			// write's arguments it could not encode is not known).
			if connectionLost(err) || notSent(err) {
				return err
			}
			if d.merged {
				c.mergedFailed = true
				return unavailable(err)
			}
			c.failed = &deferredFailure{write: d.write, err: err}
			return unavailable(err)
		}
	}
	return nil
}

// flush sends the deferred statements before a statement that must run
// now.
func (c *batchConn) flush(ctx context.Context) error {
	if len(c.deferred) == 0 {
		return nil
	}
	var bt pgx.Batch
	c.queueDeferred(&bt)
	err := c.send(ctx, &bt)
	if err != nil && c.failed == nil {
		err = unavailable(err)
	}
	return err
}

// errAheadFailed: a read ahead failed, and with it the transaction.
var errAheadFailed = errors.New("postgres: read ahead")

// aheadRead is a write's first read, found by running the write without a
// database, and its answer once fetched.
type aheadRead struct {
	query  string
	args   []any
	key    string
	used   bool
	found  bool
	fields []pgconn.FieldDescription
	values [][]byte
}

func readKey(query string, args []any) string { return query + "\x00" + fmt.Sprintf("%#v", args) }

// fetch reads the answer to a from br, copying it out of pgx's buffers.
func (a *aheadRead) fetch(br pgx.BatchResults) error {
	rs, err := br.Query()
	if err != nil {
		return err
	}
	defer rs.Close()
	if rs.Next() {
		a.found = true
		a.fields = slices.Clone(rs.FieldDescriptions())
		a.values = cloneValues(rs.RawValues())
	}
	rs.Close()
	return rs.Err()
}

// cloneValues copies a row's values out of pgx's buffers, which the next
// row reuses; a NULL stays nil.
func cloneValues(raw [][]byte) [][]byte {
	out := make([][]byte, len(raw))
	for i, v := range raw {
		out[i] = bytes.Clone(v)
	}
	return out
}

// Ahead implements sqlstore.ReadAhead.
func (c *batchConn) Ahead(query string, args []any) (sqlstore.Row, bool) {
	if c.write >= len(c.ahead) {
		return nil, false
	}
	a := c.ahead[c.write]
	if a == nil || a.used || a.key != readKey(query, args) {
		return nil, false
	}
	a.used = true
	return aheadRow{c, a}, true
}

// Changes implements sqlstore.ReadAhead.
func (c *batchConn) Changes() *sqlstore.Changes { return c.changes }

type aheadRow struct {
	c *batchConn
	a *aheadRead
}

func (r aheadRow) Scan(dest ...any) error {
	if !r.a.found {
		return storage.ErrNotFound
	}
	return pgx.ScanRow(r.c.pc.Conn().TypeMap(), r.a.fields, r.a.values, dest...)
}

// discover finds the first read of each write of b by running it on a
// Conn that records its first query and fails every statement: the
// writes are functions of what they read, so their real run asks the
// same. A write that reads nothing has none.
func discover(ctx context.Context, b *pendingBatch) []*aheadRead {
	out := make([]*aheadRead, len(b.writes))
	for i, w := range b.writes {
		if b.settled[i] {
			continue
		}
		d := &discoverConn{}
		func() {
			defer func() { _ = recover() }() // the real run reports it
			_ = w.fn(ctx, d, discoverCounters{})
		}()
		if d.read != nil {
			d.read.key = readKey(d.read.query, d.read.args)
			out[i] = d.read
		}
	}
	return out
}

// errDiscovering ends a write's discovery run at its first statement.
var errDiscovering = errors.New("postgres: discovering the write's first read")

type discoverConn struct{ read *aheadRead }

func (d *discoverConn) Exec(context.Context, string, ...any) (int64, error) {
	return 0, errDiscovering
}

func (d *discoverConn) Query(context.Context, string, ...any) (sqlstore.Rows, error) {
	return nil, errDiscovering
}

func (d *discoverConn) QueryRow(_ context.Context, query string, args ...any) sqlstore.Row {
	if d.read == nil {
		d.read = &aheadRead{query: query, args: slices.Clone(args)}
	}
	return errRow{errDiscovering}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// discoverCounters let a discovery run reach its first read: the store's
// state is not known yet, and any is as good for finding the read.
type discoverCounters struct{}

func (discoverCounters) Lock(context.Context, string) (storage.StoreState, error) {
	return storage.StoreState{}, nil
}

func (discoverCounters) Next(context.Context, string, int) (int64, error) {
	return 0, errDiscovering
}

// settle ends the running write: its counter claims are kept when it
// succeeded and forgotten when it was refused.
func (c *batchConn) settle(succeeded bool) {
	for _, r := range c.stores {
		if r.pending && succeeded {
			r.seq, r.count, r.changed = r.pendingSeq, r.pendingCount, true
		}
		r.pending = false
	}
}

func (c *batchConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if c.guessing {
		return 0, c.needsReads()
	}
	c.changed = true
	if err := c.flush(ctx); err != nil {
		return 0, err
	}
	return c.conn.Exec(ctx, query, args...)
}

func (c *batchConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if c.guessing {
		return nil, c.needsReads()
	}
	if err := c.flush(ctx); err != nil {
		return nil, err
	}
	rs, err := c.conn.Query(ctx, query, args...)
	if err != nil {
		c.broken = true
	}
	return rs, err
}

func (c *batchConn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if c.guessing {
		return errRow{c.needsReads()}
	}
	if err := c.flush(ctx); err != nil {
		return errRow{err}
	}
	return batchRow{c, c.conn.QueryRow(ctx, query, args...)}
}

type batchRow struct {
	c *batchConn
	r sqlstore.Row
}

func (r batchRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	var pe *pgconn.PgError
	if err != nil && (errors.As(err, &pe) || errors.Is(err, storage.ErrUnavailable)) {
		r.c.broken = true
	}
	return err
}

// batchCounters are sqlstore.StoreCounters on a batch: the batch locked its
// stores' rows when it began, so a write reads and moves them in memory.
type batchCounters struct{ c *batchConn }

func (bc batchCounters) row(storeID string) (*storeRow, error) {
	r, ok := bc.c.stores[storeID]
	if !ok {
		return nil, storage.ErrNotFound
	}
	return r, nil
}

func (bc batchCounters) Lock(_ context.Context, storeID string) (storage.StoreState, error) {
	r, err := bc.row(storeID)
	if err != nil {
		return storage.StoreState{}, err
	}
	count := r.count
	if r.pending {
		count = r.pendingCount
	}
	return storage.StoreState{Archived: r.archived, Memories: count}, nil
}

func (bc batchCounters) Next(_ context.Context, storeID string, delta int) (int64, error) {
	r, err := bc.row(storeID)
	if err != nil {
		return 0, err
	}
	if !r.pending {
		r.pendingSeq, r.pendingCount, r.pending = r.seq, r.count, true
	}
	r.pendingSeq++
	r.pendingCount += delta
	return r.pendingSeq, nil
}
