package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testenv"
)

// A batch whose COMMIT committed but whose reply was lost (the connection
// cut, closed or reset, after the COMMIT ran) answers each of its writes
// that the database is unavailable and the outcome unknown, never success
// and never a refusal, and runs none of them again (which would apply them
// twice, or refuse a write that landed); the writes of other batches
// answer as usual. Each write of the cut batch did land: retried, it is
// told its path is taken; the replica's next writes land after them, on a
// batch that reads first or on a guess alike, and the feed stays gap-free.
func TestACommitWhoseReplyIsLostIsAnsweredOutcomeUnknown(t *testing.T) {
	for _, reset := range []bool{false, true} {
		for _, known := range []bool{false, true} {
			t.Run(fmt.Sprintf("reset=%v/guessed=%v", reset, known), func(t *testing.T) {
				cut, through := testenv.NewCommitCutter(t, testenv.PostgresSchema(t))
				cut.Reset = reset
				db := openOn(t, through)
				db.KeepClockFor(time.Hour)
				ctx := t.Context()
				st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "lost reply"})
				if err != nil {
					t.Fatal(err)
				}
				create := func(path string) (storage.MemoryRow, error) {
					return db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: path, Content: path, By: benchBy})
				}
				base := 0
				if known {
					// The first create reads the store; the second commits
					// on its guess, so the cut batch guesses too.
					for _, p := range []string{"/a.md", "/b.md"} {
						if _, err := create(p); err != nil {
							t.Fatal(err)
						}
					}
					if db.GuessedBatches() == 0 {
						t.Fatal("no batch guessed: the cut batch would not be a guessed one")
					}
					base = 2
				}

				const writers = 4
				errs := make([]error, writers)
				var wg sync.WaitGroup
				cut.Arm("/lost/")
				for i := range writers {
					wg.Go(func() { _, errs[i] = create(fmt.Sprintf("/lost/%d.md", i)) })
				}
				wg.Wait()
				if cut.Cuts() != 1 {
					t.Fatalf("the proxy cut %d COMMITs, want 1 (the creates answered %v)", cut.Cuts(), errs)
				}
				unknown := 0
				for i, err := range errs {
					switch {
					case err == nil:
					case errors.Is(err, storage.ErrUnavailable) && errors.Is(err, storage.ErrOutcomeUnknown):
						unknown++
						var conflict *storage.PathConflictError
						path := fmt.Sprintf("/lost/%d.md", i)
						if _, err := create(path); !errors.As(err, &conflict) || conflict.Path != path {
							t.Errorf("create %s, its outcome unknown, retried: %v, want the path taken (it landed)", path, err)
						}
					default:
						t.Errorf("create /lost/%d.md answered %v, want success or the outcome unknown", i, err)
					}
				}
				if unknown == 0 {
					t.Fatalf("no create answered the outcome unknown: %v", errs)
				}
				for i := range 3 {
					if _, err := create(fmt.Sprintf("/after/%d.md", i)); err != nil {
						t.Fatalf("a create after the lost reply: %v", err)
					}
				}
				if n, err := db.CountMemories(ctx, st.ID); err != nil || n != base+writers+3 {
					t.Fatalf("count %d (%v), want %d", n, err, base+writers+3)
				}
				feedIsGapFree(t, db, st.ID, base+writers+3)
			})
		}
	}
}

// A guessed batch sent on a connection PostgreSQL ended while it sat idle
// (a restart, a failover, an administrator) reads the connection's FATAL
// error in place of its first answer: nothing of it ran, so it runs again
// and lands, rather than being answered with an unknown outcome.
func TestAGuessedBatchOnAConnectionEndedWhileIdleRunsAgain(t *testing.T) {
	app := fmt.Sprintf("memstore_idle_end_%d", time.Now().UnixNano())
	db := openOn(t, testenv.PostgresSchema(t)+"&pool_max_conns=1&application_name="+app)
	db.KeepClockFor(time.Hour)
	ctx := t.Context()
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "ended while idle"})
	if err != nil {
		t.Fatal(err)
	}
	create := func(path string) error {
		_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: path, Content: path, By: benchBy})
		return err
	}
	for _, p := range []string{"/a.md", "/b.md"} {
		if err := create(p); err != nil {
			t.Fatal(err)
		}
	}
	guessed := db.GuessedBatches()
	if guessed == 0 {
		t.Fatal("no batch guessed: the next one would not be a guessed one")
	}
	admin, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var ended int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t`, app).Scan(&ended); err != nil || ended != 1 {
		t.Fatalf("ended %d of the replica's connections (%v), want its one", ended, err)
	}
	if err := create("/c.md"); err != nil {
		t.Fatalf("the create sent on the ended connection: %v, want it run again and landed", err)
	}
	if n, err := db.CountMemories(ctx, st.ID); err != nil || n != 3 {
		t.Fatalf("count %d (%v), want 3", n, err)
	}
	feedIsGapFree(t, db, st.ID, 3)
}

// A statement that commits on its own (a vault's create) with the database
// gone is the database unavailable, to retry: it never had a connection to
// go out on, so its outcome is known. (Only an answer lost after it went
// out is an unknown outcome.)
func TestAWriteOnThePoolWithTheDatabaseGoneIsUnavailable(t *testing.T) {
	cut, through := testenv.NewCommitCutter(t, testenv.PostgresSchema(t))
	db := openOn(t, through)
	ctx := t.Context()
	if _, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	cut.Down()
	// The pool checks a connection idle for over a second before handing
	// it out, and drops it when dead: the write then meets the refused
	// connect, not a connection already gone.
	time.Sleep(1500 * time.Millisecond)
	now := time.Now().UTC()
	err := db.CreateVault(ctx, api.Vault{ID: "vlt_gone", Type: "vault", DisplayName: "gone", CreatedAt: now, UpdatedAt: now})
	if !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrOutcomeUnknown) {
		t.Fatalf("a vault's create with the database gone: %v, want the database unavailable and the outcome known", err)
	}
}

// An append batch sends its appends' writes with its COMMIT and reads
// their rows after it: a connection cut once the COMMIT ran, whether it
// loses the COMMIT's answer or the rows ahead of it (the sequences the
// events were given), answers each append of the batch that the database
// is unavailable and the outcome unknown, and runs none again. Each did
// land, once; the sessions' next appends land after them, in order.
func TestAnAppendBatchWhoseAnswersAreLostIsAnsweredOutcomeUnknown(t *testing.T) {
	// "INSERT 0 1" ends the answer to an append's write of one event,
	// whose rows are the event's sequence; it comes ahead of the
	// COMMIT's.
	for _, tag := range []string{"COMMIT", "INSERT 0 1"} {
		t.Run(tag, func(t *testing.T) {
			url := testenv.PostgresSchema(t)
			cut, through := testenv.NewCommitCutter(t, url)
			db, direct := openOn(t, through), openOn(t, url)
			ctx := t.Context()
			const sessions = 4
			var sessionIDs []string
			for range sessions {
				sessionIDs = append(sessionIDs, idleSession(t, db).ID)
			}

			cut.ArmAt("lost append", tag)
			errs := make([]error, sessions)
			var wg sync.WaitGroup
			for i, id := range sessionIDs {
				wg.Go(func() {
					_, errs[i] = db.AppendEvents(ctx, id, []api.Event{api.UserMessage(fmt.Sprint("lost append ", i))}, nil)
				})
			}
			wg.Wait()
			if cut.Cuts() != 1 {
				t.Fatalf("the proxy cut %d answers, want 1 (the appends answered %v)", cut.Cuts(), errs)
			}
			unknown := 0
			for i, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, storage.ErrUnavailable) && errors.Is(err, storage.ErrOutcomeUnknown):
					unknown++
				default:
					t.Errorf("append %d answered %v, want success or the outcome unknown", i, err)
				}
			}
			if unknown == 0 {
				t.Fatalf("no append answered the outcome unknown: %v", errs)
			}
			for i, id := range sessionIDs {
				if _, err := db.AppendEvents(ctx, id, []api.Event{api.UserMessage(fmt.Sprint("after ", i))}, nil); err != nil {
					t.Fatalf("an append after the lost answers: %v", err)
				}
				evs, err := direct.ListEvents(ctx, id, storage.EventQuery{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var texts []string
				for _, e := range evs {
					texts = append(texts, e.Event.Text())
				}
				if want := []string{fmt.Sprint("lost append ", i), fmt.Sprint("after ", i)}; !slices.Equal(texts, want) {
					t.Errorf("session %d's log holds %q, want %q: each append once, in order", i, texts, want)
				}
			}
		})
	}
}
