package postgres

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"
)

// Append batches that guess their reads. An append batch reads first
// (BEGIN, the sessions' locks, each append's lock-and-read), then sends
// its writes with the COMMIT: two round trips, the batch every append of
// its shard waits for. When this server made each session's last append,
// what the read answers is nearly always known (sqlstore.SessionGuess):
// the row as it wrote it, no event since, the work item still live, no
// webhook endpoint. Such a batch runs its appends on those guesses, with
// the database's clock as a batch read it lately (guesses.startSessions), and
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

// sessionGuesses count the append batches committed on guesses, and
// those whose guess was wrong. Which sessions' batches read first after a
// wrong guess, and the database's clock, are the memory batches' guesses'.
type sessionGuesses struct {
	batches, wrong atomic.Int64
}

// guessSessions reports whether the batch of live appends may run on
// guesses, and at what clock: every append has a guess, none of its
// sessions' was wrong lately, and the database's clock was read lately.
func (s *DB) guessSessions(live []*sessionWrite) (time.Time, bool) {
	ids := make([]string, len(live))
	for i, w := range live {
		if w.guess == nil {
			return time.Time{}, false
		}
		ids[i] = w.sessionID
	}
	return s.guesses.startSessions(ids)
}

// guessedWrong counts a batch of appends whose guess was wrong; its
// sessions' batches read first for guessPause.
func (s *DB) guessedWrong(batch []*sessionWrite) {
	s.sessionGuesses.wrong.Add(1)
	ids := make([]string, len(batch))
	for i, w := range batch {
		ids[i] = w.sessionID
	}
	s.guesses.pause(ids)
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
