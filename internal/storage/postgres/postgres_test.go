package postgres_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/storagetest"
	"github.com/memstore/memstore/internal/testenv"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, now func() time.Time) storage.Store {
		db, err := postgres.Open(t.Context(), testenv.PostgresSchema(t), postgres.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// An unreachable database at start-up is one line saying where memstore
// looked and what to check; it needs no running server.
func TestOpenUnreachableIsOneClearLine(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://memstore:secret@127.0.0.1:1/memstore?connect_timeout=2", postgres.Options{})
	if err == nil {
		t.Fatal("opened a database that is not there")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, "secret") || !strings.Contains(msg, "127.0.0.1:1/memstore") || !strings.Contains(msg, "check that the server is running") {
		t.Fatalf("error = %q", msg)
	}
}

// Two servers on one database: an event appended or an item queued through
// one wakes the waiters of the other (LISTEN/NOTIFY, delivered at commit).
func TestAWriteOnOneReplicaWakesAnother(t *testing.T) {
	a, b := twoReplicas(t)
	wakes := make(chan storage.Wake, 16)
	if err := b.Listen(t.Context(), func(w storage.Wake) { wakes <- w }); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := a.CreateEnvironment(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	if _, err := a.CreateSession(t.Context(), sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	// The channel is the database's: tests of other packages running at
	// the same time wake it too.
	next := func() storage.Wake {
		for {
			if w := <-wakes; w.Key == env.ID || w.Key == sess.ID {
				return w
			}
		}
	}
	if w := next(); w != (storage.Wake{Topic: storage.TopicQueue, Key: env.ID}) {
		t.Fatalf("first wake = %+v, want the queue of %s", w, env.ID)
	}
	if _, err := a.AppendEvents(t.Context(), sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil); err != nil {
		t.Fatal(err)
	}
	if w := next(); w != (storage.Wake{Topic: storage.TopicSession, Key: sess.ID}) {
		t.Fatalf("second wake = %+v, want session %s", w, sess.ID)
	}
}

// A connection the database drops (a restart, a failover, an
// administrator) fails the request in flight with storage.ErrUnavailable,
// which the server answers 503 x-should-retry: true, and the next request
// runs on a new connection without anyone restarting anything.
func TestALostConnectionIsUnavailableThenRecovers(t *testing.T) {
	app := fmt.Sprintf("memstore_lost_%d", time.Now().UnixNano())
	url := testenv.PostgresSchema(t) + "&pool_max_conns=1&application_name=" + app
	db, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := pgx.Connect(t.Context(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	// The pool may notice a dead idle connection before using it and
	// replace it silently; try until a request meets the loss head on.
	for attempt := 0; attempt < 20; attempt++ {
		if _, err := db.CountCredentials(t.Context(), storage.APIKey); err != nil {
			t.Fatalf("before the loss: %v", err)
		}
		if _, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
			t.Fatal(err)
		}
		_, err := db.CountCredentials(t.Context(), storage.APIKey)
		if err == nil {
			continue
		}
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("a lost connection gave %v, want storage.ErrUnavailable", err)
		}
		if _, err := db.CountCredentials(t.Context(), storage.APIKey); err != nil {
			t.Fatalf("the next request did not recover: %v", err)
		}
		return
	}
	t.Fatal("no request met the lost connection in 20 attempts")
}

// replicas opens n backends on one database, as n servers would.
func replicas(t *testing.T, n int) []*postgres.DB {
	url := testenv.PostgresSchema(t)
	out := make([]*postgres.DB, n)
	for i := range out {
		out[i] = openOn(t, url)
	}
	return out
}

// openOn opens a server's store on the database at url, closed when the
// test ends.
func openOn(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// 16 writers on one memory, through 4 replicas, each guarding its update
// with the hash it read: every round exactly one wins, and the memory
// ends with exactly one version per win.
func TestGuardedWritersAcrossReplicas(t *testing.T) {
	const writers, rounds = 16, 5
	dbs := replicas(t, 4)
	ctx := t.Context()
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_1"}
	st, err := dbs[0].CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := dbs[0].CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/m.md", Content: "v0", By: by})
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= rounds; round++ {
		cur, err := dbs[1].GetMemory(ctx, st.ID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				content := fmt.Sprintf("round %d writer %d", round, i)
				_, _, err := dbs[i%len(dbs)].UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &content, IfSHA256: cur.ContentSHA256, By: by})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		won := 0
		for err := range errs {
			var stale *storage.PreconditionFailedError
			switch {
			case err == nil:
				won++
			case !errors.As(err, &stale):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers won, want exactly 1", round, won)
		}
	}
	page, err := dbs[2].ListMemoryVersions(ctx, storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID, Limit: 100})
	if err != nil || len(page.Items) != rounds+1 {
		t.Fatalf("versions = %d (%v), want %d", len(page.Items), err, rounds+1)
	}
}

// 32 workers polling one queue through 4 replicas: every item is claimed
// exactly once.
func TestClaimsAcrossReplicas(t *testing.T) {
	const workers, items = 32, 64
	dbs := replicas(t, 4)
	ctx := t.Context()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := dbs[0].CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	for range items {
		sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
		if _, err := dbs[0].CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	for i := range workers {
		wg.Go(func() {
			for {
				tok := ids.New(ids.SessionsToken)
				w, _, err := dbs[i%len(dbs)].ClaimWork(ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: fmt.Sprint("worker-", i), ClaimTTL: time.Minute, Token: storage.Credential{ID: tok}, TokenHash: "h-" + tok})
				if errors.Is(err, storage.ErrNoWork) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				claimed[w.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != items {
		t.Fatalf("%d items claimed, want %d", len(claimed), items)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("%s claimed %d times", id, n)
		}
	}
}

// On the database's clock (no clock injected), a claim reads the clock in
// its first statement and queries the queue at that reading in the same
// round trip: an item claimed and never acknowledged is offered again once
// reclaim_older_than has passed, and a lease that lapsed is settled (the
// item put back) by the next claim, which takes it.
func TestClaimsOnTheDatabasesClockReclaimAndSettle(t *testing.T) {
	db := replicas(t, 1)[0]
	ctx := t.Context()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	if _, err := db.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	claim := func(worker string, reclaim, ttl time.Duration) (storage.Work, []storage.Work, error) {
		tok := ids.New(ids.SessionsToken)
		return db.ClaimWork(ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: worker, ReclaimOlderThan: reclaim, ClaimTTL: ttl,
			Token: storage.Credential{ID: tok}, TokenHash: "h-" + tok, PolledAt: time.Now()})
	}
	first, _, err := claim("w1", time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if w, _, err := claim("w2", 200*time.Millisecond, time.Hour); !errors.Is(err, storage.ErrNoWork) {
		t.Fatalf("claim at once = %+v, %v; want storage.ErrNoWork (the item was claimed just now)", w, err)
	}
	time.Sleep(300 * time.Millisecond)
	second, settled, err := claim("w2", 200*time.Millisecond, 200*time.Millisecond)
	if err != nil || second.ID != first.ID || second.WorkerID != "w2" || len(settled) != 0 {
		t.Fatalf("claim 300 ms later = %+v (settled %v), %v; want %s reclaimed by w2", second, settled, err, first.ID)
	}
	if !second.ClaimedAt.After(*first.ClaimedAt) {
		t.Fatalf("reclaimed at %v, first claimed at %v: want the database's clock to have moved on", second.ClaimedAt, first.ClaimedAt)
	}
	time.Sleep(300 * time.Millisecond) // w2's 200 ms lease lapses
	third, settled, err := claim("w3", 0, time.Hour)
	if err != nil || third.ID != first.ID || third.WorkerID != "w3" || len(settled) != 1 || settled[0].ID != first.ID {
		t.Fatalf("claim once the lease lapsed = %+v (settled %v), %v; want %s settled and claimed by w3", third, settled, err, first.ID)
	}
}

// workers_polling counts the polls every replica saw, within the window:
// each claim notes its worker's poll, also when it finds no work, and a
// poll of an archived environment is refused, not counted, and claims
// nothing (on the database's clock: the refusal is read with the queue).
func TestPollersAreCountedAcrossReplicas(t *testing.T) {
	dbs := replicas(t, 2)
	ctx := t.Context()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"env_1", "env_2", "env_3"} {
		if err := dbs[0].CreateEnvironment(ctx, storage.Environment{ID: id, Name: id, ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	poll := func(db *postgres.DB, env, worker string, at time.Time) error {
		_, _, err := db.ClaimWork(ctx, storage.Claim{EnvironmentID: env, WorkerID: worker, ClaimTTL: time.Minute,
			Token: storage.Credential{ID: ids.New(ids.SessionsToken)}, TokenHash: worker, PolledAt: at})
		return err
	}
	for i, p := range []struct {
		worker string
		at     time.Time
	}{{"w1", t0}, {"w2", t0.Add(10 * time.Second)}, {"w1", t0.Add(20 * time.Second)}, {"w3", t0.Add(-time.Minute)}} {
		if err := poll(dbs[i%2], "env_1", p.worker, p.at); !errors.Is(err, storage.ErrNoWork) {
			t.Fatalf("poll of an empty queue: %v, want storage.ErrNoWork", err)
		}
	}
	if err := poll(dbs[0], "env_2", "w9", t0); !errors.Is(err, storage.ErrNoWork) {
		t.Fatal(err)
	}
	queued := ids.New(ids.Work)
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: "env_3", Status: api.SessionIdle, CreatedAt: t0, UpdatedAt: t0}
	if _, err := dbs[0].CreateSession(ctx, sess, storage.Work{ID: queued, CreatedAt: t0}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dbs[1].UpdateEnvironment(ctx, "env_3", func(e *storage.Environment) error { e.ArchivedAt = &t0; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := poll(dbs[0], "env_3", "w1", t0); !errors.Is(err, storage.ErrEnvironmentArchived) {
		t.Fatalf("poll of an archived environment: %v, want storage.ErrEnvironmentArchived", err)
	}
	if w, err := dbs[1].GetWork(ctx, "env_3", queued); err != nil || w.ClaimedAt != nil {
		t.Fatalf("the archived environment's item = %+v, %v; want it unclaimed", w, err)
	}
	if err := poll(dbs[0], "env_4", "w1", t0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("poll of a missing environment: %v, want storage.ErrNotFound", err)
	}
	for env, want := range map[string]int64{"env_1": 2, "env_3": 0, "env_4": 0} {
		n, err := dbs[1].CountPollers(ctx, env, t0)
		if err != nil || n != want {
			t.Fatalf("pollers of %s since t0 = %d (%v), want %d (env_1: w1 and w2; w3 is older, w9 elsewhere)", env, n, err, want)
		}
	}
}

// Two servers on one database: a session's turn held by one is refused to
// the other, and a server that goes away (its connections end, as when its
// process is killed) hands the turn over at once.
func TestATurnHasOneHolderAcrossReplicas(t *testing.T) {
	a, b := twoReplicas(t)
	if _, ok, err := a.TryTurn(t.Context(), "sesn_x"); err != nil || !ok {
		t.Fatalf("a.TryTurn = %v, %v; want the turn", ok, err)
	}
	if _, ok, err := b.TryTurn(t.Context(), "sesn_x"); err != nil || ok {
		t.Fatalf("b.TryTurn while a holds it = %v, %v; want refused", ok, err)
	}
	a.Close()
	// PostgreSQL releases a's locks once its backend has seen the
	// connection end, a moment after Close returns: b tries until then.
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		release, ok, err := b.TryTurn(t.Context(), "sesn_x")
		if err != nil || (!ok && time.Now().After(bound)) {
			t.Fatalf("b.TryTurn after a closed = %v, %v; want the turn", ok, err)
		}
		if ok {
			release()
			return
		}
	}
}

// twoReplicas opens two handles of one fresh database, as two servers do.
func twoReplicas(t *testing.T) (a, b *postgres.DB) {
	rs := replicas(t, 2)
	return rs[0], rs[1]
}

// idleSession makes an idle session of a self-hosted environment in db.
func idleSession(t *testing.T, db *postgres.DB) api.Session {
	t.Helper()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateEnvironment(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	if _, err := db.CreateSession(t.Context(), sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	return sess
}

// Two replicas appending to one session in turn: each keeps the decoded
// log of the sessions it appended to (package sqlstore's log cache) and
// still hands the runtime every event the other replica appended since.
func TestCachedLogsSeeAppendsFromAnotherReplica(t *testing.T) {
	a, b := twoReplicas(t)
	sess := idleSession(t, a)
	var (
		seen []api.Event
		want []string
	)
	record := func(v storage.SessionView) error {
		seen = v.Log
		return nil
	}
	for i, r := range []*postgres.DB{a, a, b, a, b, b, a} {
		text := fmt.Sprintf("message %d", i)
		if _, err := r.AppendEvents(t.Context(), sess.ID, []api.Event{api.UserMessage(text)}, record); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range seen {
			got = append(got, e.Text())
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("append %d saw the log %q, want %q", i, got, want)
		}
		want = append(want, text)
	}
}

// An append writes its session's row back from what it read under the
// lock. A replica reads a row its own last append wrote without decoding it
// again (package sqlstore's sessionRow), so a rename by another replica in
// between must still be what it reads, and what the append writes back.
func TestAnAppendKeepsARenameFromAnotherReplica(t *testing.T) {
	a, b := twoReplicas(t)
	sess := idleSession(t, a)
	send := func(r *postgres.DB, text string, guard storage.AppendGuard) {
		t.Helper()
		if _, err := r.AppendEvents(t.Context(), sess.ID, []api.Event{api.UserMessage(text)}, guard); err != nil {
			t.Fatal(err)
		}
	}
	send(a, "first", nil)
	send(a, "second", nil) // a's view of the row is its own last write
	title := "renamed on b"
	if _, err := b.UpdateSession(t.Context(), sess.ID, func(x *api.Session) error { x.Title = &title; return nil }); err != nil {
		t.Fatal(err)
	}
	send(a, "third", func(v storage.SessionView) error {
		if v.Session.Title == nil || *v.Session.Title != title {
			return fmt.Errorf("the append saw title %v, want %q", v.Session.Title, title)
		}
		return nil
	})
	for _, r := range []*postgres.DB{a, b} {
		if got, err := r.GetSession(t.Context(), sess.ID); err != nil || got.Title == nil || *got.Title != title {
			t.Fatalf("after the append the session is %+v, %v; want the title %q", got, err, title)
		}
	}
}

// Appends to one session from two replicas at once: each waits for the
// session's lock while the other appends, and must then see what the other
// committed, so every event records how many it saw before it and the log
// reads 0, 1, 2, … A view read in the snapshot taken before the lock wait
// would miss the events committed meanwhile.
func TestConcurrentAppendsSeeTheWholeLog(t *testing.T) {
	a, b := twoReplicas(t)
	sess := idleSession(t, a)
	const writers, appends = 6, 15
	errs := make(chan error, writers)
	for w := range writers {
		r := []*postgres.DB{a, b}[w%2]
		go func() {
			for range appends {
				events := []api.Event{{}}
				_, err := r.AppendEvents(t.Context(), sess.ID, events, func(v storage.SessionView) error {
					events[0] = api.UserMessage(strconv.Itoa(len(v.Log)))
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	log, err := a.ListEvents(t.Context(), sess.ID, storage.EventQuery{Limit: writers * appends})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != writers*appends {
		t.Fatalf("the log holds %d events, want %d", len(log), writers*appends)
	}
	for i, e := range log {
		if got := e.Event.Text(); got != strconv.Itoa(i) {
			t.Fatalf("event %d saw %s events before it, want %d: its view missed what another replica committed while it waited", i, got, i)
		}
	}
}

// An append that waits for the session's lock while another transaction
// queues the session's work under that lock (as EnsureWork does, without
// writing the session's row) sees the work live once it has the lock: the
// runtime's next step depends on it.
func TestAnAppendThatWaitedSeesWorkQueuedMeanwhile(t *testing.T) {
	url := testenv.PostgresSchema(t)
	db := openOn(t, url)
	ctx := t.Context()
	sess := idleSession(t, db)
	work, err := db.SessionWork(ctx, sess.ID)
	if err != nil || len(work) != 1 {
		t.Fatalf("the session's work: %v, %v", work, err)
	}
	if _, err := db.StopWork(ctx, sess.EnvironmentID, work[0].ID, true); err != nil {
		t.Fatal(err)
	}
	live := func(v storage.SessionView) bool { return v.WorkLive }
	var sawLive bool
	if _, err := db.AppendEvents(ctx, sess.ID, []api.Event{api.UserMessage("cached")}, func(v storage.SessionView) error {
		sawLive = live(v)
		return nil
	}); err != nil || sawLive {
		t.Fatalf("first append: %v, work live %v; want no error and no live work", err, sawLive)
	}

	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO work_items (id, environment_id, session_id, state, created_at, queued_at) VALUES ($1, $2, $3, 'queued', now(), now())`,
		ids.New(ids.Work), sess.EnvironmentID, sess.ID); err != nil {
		t.Fatal(err)
	}
	seen := make(chan bool, 1)
	appended := make(chan error, 1)
	go func() {
		_, err := db.AppendEvents(ctx, sess.ID, []api.Event{api.UserMessage("waited")}, func(v storage.SessionView) error {
			seen <- live(v)
			return nil
		})
		appended <- err
	}()
	// Commit once the append waits for the lock.
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%FROM sessions s, (%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the append never waited for the session's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if !<-seen {
		t.Fatal("the append that waited for the lock saw no live work, though work was queued before it had the lock")
	}
}

// An update that keeps its memory's path has its search entry made before
// it queues, with the path this server last wrote the memory at. When
// another replica has moved the memory since, the guess is wrong: the
// entry must still be the memory's real path's.
func TestAStalePathGuessStillIndexesTheMemorysPath(t *testing.T) {
	url := testenv.PostgresSchema(t)
	one, other := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	st, err := one.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "moves"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := one.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/drafts/alpha.md", Content: "first words", By: benchBy})
	if err != nil {
		t.Fatal(err)
	}
	moved := "/final/omega.md"
	if _, _, err := other.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Path: &moved, By: benchBy}); err != nil {
		t.Fatal(err)
	}
	content := "second words"
	if _, _, err := one.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &content, By: benchBy}); err != nil {
		t.Fatal(err)
	}
	for term, want := range map[string]int{"omega": 1, "second": 1, "alpha": 0, "drafts": 0, "first": 0} {
		page, err := one.SearchMemories(ctx, storage.SearchQuery{StoreIDs: []string{st.ID}, Terms: []string{term}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != want {
			t.Errorf("search %q: %d hits, want %d", term, len(page.Items), want)
		}
	}
}
