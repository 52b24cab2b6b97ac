package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// appendCrowd is a crowd of appenders on two replicas: writers per session,
// each making rounds appends of one user message to its session. An append
// whose text says "guard" is refused by its guard, one whose text says
// "bad" by the database (a trigger, standing for any check the server does
// not make), and one whose text says "panic" has a guard that panics.
type appendCrowd struct {
	dbs      []*postgres.DB
	sessions []string
	writers  int
	rounds   int
	// refuses: the database refuses the "bad" appends.
	refuses bool
	// panics: the "panic" appends' guards panic.
	panics  bool
	landed  map[string][]string // by session, the texts that landed, in no order
	refused map[string]int      // "guard", "bad", "panic"
}

func newAppendCrowd(t *testing.T, url string, sessions, writers, rounds int) *appendCrowd {
	t.Helper()
	c := &appendCrowd{writers: writers, rounds: rounds, landed: map[string][]string{}, refused: map[string]int{}}
	for range 2 {
		c.dbs = append(c.dbs, openOn(t, url))
	}
	ctx := t.Context()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := c.dbs[0].CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	for range sessions {
		sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
		if _, err := c.dbs[0].CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		c.sessions = append(c.sessions, sess.ID)
	}
	return c
}

// run makes every append, noting what landed and what was refused; any
// other outcome fails the test.
func (c *appendCrowd) run(t *testing.T) {
	ctx := t.Context()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for s, sessionID := range c.sessions {
		for w := range c.writers {
			wg.Go(func() {
				for r := range c.rounds {
					text := fmt.Sprintf("s%d w%d r%d", s, w, r)
					switch (s + w + r) % 7 {
					case 3:
						text += " guard"
					case 5:
						text += " bad"
					case 6:
						if c.panics {
							text += " panic"
						}
					}
					var guard storage.AppendGuard
					switch {
					case strings.HasSuffix(text, " guard"):
						guard = func(storage.SessionView) error { return errors.New("refused by the guard") }
					case strings.HasSuffix(text, " panic"):
						guard = func(storage.SessionView) error { panic("boom") }
					}
					bad := c.refuses && strings.HasSuffix(text, " bad")
					stored, err := appendRecovering(func() ([]api.Event, error) {
						return c.dbs[(s+w)%2].AppendEvents(ctx, sessionID, []api.Event{api.UserMessage(text)}, guard)
					})
					mu.Lock()
					switch {
					case err == nil && guard == nil && !bad && len(stored) == 1 && stored[0].Text() == text:
						c.landed[sessionID] = append(c.landed[sessionID], text)
					case err != nil && strings.HasSuffix(text, " guard") && strings.Contains(err.Error(), "refused by the guard"):
						c.refused["guard"]++
					case err != nil && bad && strings.Contains(err.Error(), "refused by the database"):
						c.refused["bad"]++
					case err != nil && strings.HasSuffix(text, " panic") && errors.Is(err, errPanicked):
						c.refused["panic"]++
					default:
						t.Errorf("append %q: stored %d events, %v", text, len(stored), err)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
}

// appendRecovering runs an append, turning a panic in its caller's
// goroutine into errPanicked, as the HTTP server's recovery answers 500.
func appendRecovering(appendEvents func() ([]api.Event, error)) (stored []api.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return appendEvents()
}

var errPanicked = errors.New("the append panicked in its caller")

// check reads every session's log through the other replica: exactly the
// appends that landed, each once, in strictly increasing sequence.
func (c *appendCrowd) check(t *testing.T) {
	for _, sessionID := range c.sessions {
		evs, err := c.dbs[1].ListEvents(t.Context(), sessionID, storage.EventQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		last := int64(0)
		for _, e := range evs {
			if e.Seq <= last {
				t.Fatalf("session %s: sequence %d after %d", sessionID, e.Seq, last)
			}
			last = e.Seq
			got = append(got, e.Event.Text())
		}
		want := c.landed[sessionID]
		if len(got) != len(want) {
			t.Fatalf("session %s holds %d events, want the %d appends that landed: %q", sessionID, len(got), len(want), got)
		}
		seen := map[string]bool{}
		for _, text := range got {
			seen[text] = true
		}
		for _, text := range want {
			if !seen[text] {
				t.Fatalf("session %s lacks landed append %q", sessionID, text)
			}
		}
	}
}

// Appends to many sessions through two replicas share commits, and each
// is answered on its own: the ones their guard refuses change nothing,
// every other one lands once, and each log reads back in order. That they
// shared commits is read off the rows: an event's xmin is the transaction
// that stored it.
func TestAppendsSharingACommitAnswerEachOnItsOwn(t *testing.T) {
	url := testenv.PostgresSchema(t)
	c := newAppendCrowd(t, url, 16, 3, 6)
	c.run(t)
	if c.refused["guard"] == 0 || c.refused["bad"] != 0 {
		t.Fatalf("refused %v; want some by their guard and none by the database (no trigger here)", c.refused)
	}
	c.check(t)
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	var events, transactions int
	if err := admin.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT xmin::text) FROM session_events`).Scan(&events, &transactions); err != nil {
		t.Fatal(err)
	}
	if transactions >= events {
		t.Fatalf("%d events stored by %d transactions: no append shared a commit", events, transactions)
	}
	t.Logf("%d events stored by %d transactions", events, transactions)
}

// An append whose events the database refuses fails alone: the batch it
// shared is rolled back and each of its other appends runs again in a
// transaction of its own, and lands.
func TestAnAppendTheDatabaseRefusesFailsOnlyItself(t *testing.T) {
	url := testenv.PostgresSchema(t)
	c := newAppendCrowd(t, url, 16, 3, 6)
	c.refuses = true
	refuseRows(t, url, "session_events", `NEW.body LIKE '% bad"%'`, "refused by the database")
	c.run(t)
	if c.refused["guard"] == 0 || c.refused["bad"] == 0 {
		t.Fatalf("refused %v; want some by their guard and some by the database", c.refused)
	}
	c.check(t)
}

// An append whose guard panics inside its batch takes no other append with
// it: the batch is rolled back, its other appends run again alone and
// land, and the one that panicked, run alone, panics in its own caller's
// goroutine (the HTTP server answers that request 500), not in the
// batch's leader, which may be another append's.
func TestAnAppendThatPanicsTakesNoOtherWithIt(t *testing.T) {
	url := testenv.PostgresSchema(t)
	c := newAppendCrowd(t, url, 16, 3, 6)
	c.panics = true
	c.run(t)
	if c.refused["panic"] == 0 || c.refused["guard"] == 0 {
		t.Fatalf("refused %v; want some appends refused by their guards and some that panicked", c.refused)
	}
	c.check(t)
}

// Two replicas' batches of the same two sessions, started together, each
// replica having read a different one of them before: each batch locks
// its sessions in one statement, in id order, so neither waits for the
// other in a cycle. (When only the sessions a replica had read were
// locked up front and the others as their appends ran, replica a locked
// s2 then asked for s1 while b held s1 and asked for s2, and PostgreSQL
// broke the deadlock after a second by failing one batch.) Each replica's
// first batch is an append to a session the test holds locked, so the
// appends to s1 and s2 queue behind it and form the next batch together.
func TestTwoReplicasBatchesOfTheSameSessionsNeverDeadlock(t *testing.T) {
	url := testenv.PostgresSchema(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := a.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	watch, err := pgx.Connect(ctx, url) // outside admin's transaction, which sees pg_stat_activity as it first read it
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	var holder int
	if err := admin.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	// Four sessions whose appends share one shard, on either replica: two
	// blockers, s1 and s2, each created through the replica that is to
	// know it (creating a session caches its log there).
	newSession := func(db *postgres.DB) string {
		for {
			sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
			if a.SessionShard(sess.ID) != a.SessionShard("sesn_0") {
				continue
			}
			if _, err := db.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
				t.Fatal(err)
			}
			return sess.ID
		}
	}
	// The batches race: a few rounds make a wrong lock order show.
	for range 3 {
		a, b := a, b
		blockA, blockB := newSession(a), newSession(b)
		s1, s2 := newSession(b), newSession(a)
		if s1 > s2 {
			s1, s2 = s2, s1
			a, b = b, a // a still knows s2, b s1
		}
		hold, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hold.Exec(ctx, `SELECT 1 FROM sessions WHERE id IN ($1, $2) FOR UPDATE`, blockA, blockB); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		appendTo := func(db *postgres.DB, sessionID string) {
			wg.Go(func() {
				if _, err := db.AppendEvents(ctx, sessionID, []api.Event{api.UserMessage("hi")}, nil); err != nil {
					t.Errorf("append to %s: %v", sessionID, err)
				}
			})
		}
		appendTo(a, blockA)
		appendTo(b, blockB)
		waitForLockWaits(t, watch, holder, 2)
		for _, db := range []*postgres.DB{a, b} {
			appendTo(db, s1)
			appendTo(db, s2)
		}
		time.Sleep(100 * time.Millisecond) // the appends to s1 and s2 queue behind the blocked batches
		if err := hold.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if n := a.SessionBatchesAlone() + b.SessionBatchesAlone(); n != 0 {
			t.Fatalf("%d batches fell back to running their appends alone; want none (no deadlock, no lock timeout)", n)
		}
		for _, id := range []string{s1, s2} {
			evs, err := a.ListEvents(ctx, id, storage.EventQuery{Limit: 10})
			if err != nil || len(evs) != 2 {
				t.Fatalf("session %s holds %d events (%v), want the 2 appends", id, len(evs), err)
			}
		}
	}
}

// waitForLockWaits waits until n backends wait for a lock that backend
// holder holds.
func waitForLockWaits(t *testing.T, watch *pgx.Conn, holder, n int) {
	t.Helper()
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(bound) {
			t.Fatalf("%d backends wait for the test's locks, want %d", waiting, n)
		}
	}
}
