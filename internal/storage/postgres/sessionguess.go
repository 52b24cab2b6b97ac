package postgres

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Append batches that guess their reads. An append batch reads first
// (BEGIN, the sessions' locks, each append's lock-and-read), then sends
// its writes with the COMMIT: two round trips, the batch every append of
// its shard waits for. When this server made each session's last append,
// what the read answers is nearly always known (sqlstore.SessionGuess):
// the row as it wrote it, no event since, the work item still live, no
// webhook endpoint. Such a batch runs its appends on those guesses, with
// the database's clock as a batch read it lately (guesses.clockNow), and
// sends, in one round trip, BEGIN, the sessions' locks, each append's
// check of its guess, the writes and the COMMIT. A check that finds the
// guess wrong (another replica appended, the session was changed, its
// work stopped, an endpoint enabled) fails the transaction before its
// COMMIT; the batch then runs again reading, and its sessions' batches
// read first for guessPause. An append that asks for a statement of its
// own, or refuses, or writes nothing, makes the batch read first too,
// having sent nothing: a guess is checked only beside writes.
// TestAGuessedAppendSeesWorkStoppedAndEndpointsEnabledMeanwhile and
// TestAnAppendGuessedWrongRunsAgainReading fail if any of the checks that
// can go wrong alone is left out; the one for events after the cached one
// backs up the row's, which every append rewrites.

// errReadFirst ends a guessed run that committed nothing: the batch runs
// again reading.
var errReadFirst = errors.New("postgres: an append batch runs again reading")

// sessionGuesses are the sessions whose batches read first for a while
// after a wrong guess, and the counts of guessed and wrong batches.
type sessionGuesses struct {
	mu  sync.Mutex
	off map[string]time.Time
	// batches counts the batches committed on guesses; wrong, those whose
	// guess was wrong.
	batches, wrong atomic.Int64
}

// start reports whether the batch of live appends may run on guesses,
// and at what clock: every append has a guess, none of its sessions'
// was wrong lately, and the database's clock was read lately.
func (g *sessionGuesses) start(clocks *guesses, live []*sessionWrite) (time.Time, bool) {
	for _, w := range live {
		if w.guess == nil {
			return time.Time{}, false
		}
	}
	now := time.Now()
	g.mu.Lock()
	for _, w := range live {
		if now.Before(g.off[w.sessionID]) {
			g.mu.Unlock()
			return time.Time{}, false
		}
	}
	g.mu.Unlock()
	return clocks.clockNow(now)
}

// guessedWrong counts a batch whose guess was wrong; its sessions'
// batches read first for guessPause.
func (g *sessionGuesses) guessedWrong(batch []*sessionWrite) {
	g.wrong.Add(1)
	until := time.Now().Add(guessPause)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.off == nil || len(g.off) > maxGuessedStores {
		g.off = make(map[string]time.Time)
	}
	for _, w := range batch {
		g.off[w.sessionID] = until
	}
}

// guessAhead queues on t, to go with the COMMIT, what a guessed batch of
// live sends before its appends' writes — the lock timeout, the sessions'
// locks (as readAhead takes them) and each append's check of its guess —
// and answers each append's first statement with its guess at clock.
func guessAhead(t *lazyTx, live []*sessionWrite, clock time.Time, numbered func(string) string) {
	ids := make([]string, len(live))
	for i, w := range live {
		ids[i] = w.sessionID
	}
	t.Defer(batchLockTimeout)
	t.Defer(genericPlans)
	t.Defer(lockSessions, ids)
	for _, p := range defaultPlans {
		t.Defer(p)
	}
	for _, w := range live {
		t.Defer(numbered(w.guess.Check.Query), w.guess.Check.Args...)
		w.ahead = &rowsAhead{query: w.first.Query, args: w.first.Args, guessed: w.guess.Rows(clock)}
	}
}

// clockReadAhead is the database's clock as the batch's reads ahead read
// it (the column the lock-and-read statement reads it in, on the row of
// what it read beside the log), and the local time now; zero times where
// none read it.
func clockReadAhead(live []*sessionWrite) (base, at time.Time) {
	for _, w := range live {
		a := w.ahead
		if a == nil || len(a.fields) != 4 {
			continue
		}
		for _, row := range a.rows {
			var (
				body, flags string
				seq         int64
				clock       *time.Time
			)
			if err := pgx.ScanRow(a.types, a.fields, row, &body, &seq, &flags, &clock); err == nil && seq == 0 && clock != nil {
				return *clock, time.Now()
			}
		}
	}
	return time.Time{}, time.Time{}
}

// scanGuessed assigns a guessed row's values to dest, as Scan would.
func scanGuessed(row []any, dest []any) error {
	if len(row) != len(dest) {
		return fmt.Errorf("postgres: a guessed row of %d values scanned into %d", len(row), len(dest))
	}
	for i, v := range row {
		d := reflect.ValueOf(dest[i])
		if d.Kind() != reflect.Pointer || !reflect.TypeOf(v).AssignableTo(d.Elem().Type()) {
			return fmt.Errorf("postgres: a guessed %T scanned into %T", v, dest[i])
		}
		d.Elem().Set(reflect.ValueOf(v))
	}
	return nil
}
