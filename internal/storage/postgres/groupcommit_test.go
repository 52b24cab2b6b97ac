package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlstore"
	"github.com/memstore/memstore/internal/testenv"
)

// Writes that share a commit answer each on its own: in a crowd of writers
// on two replicas, the ones refused (a taken path, a stale hash) change
// nothing, every other one lands, and the store's feed and count come out
// exact and gap-free.
func TestRefusedWritesInABatchLoseNothingElse(t *testing.T) {
	rs := replicas(t, 2)
	ctx := t.Context()
	st, err := rs[0].CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "crowd"})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 32
	var (
		wg                     sync.WaitGroup
		mu                     sync.Mutex
		won, conflicts, stales int
		others                 []error
	)
	for w := range writers {
		wg.Go(func() {
			db := rs[w%2]
			note := func(err error) {
				var (
					conflict *storage.PathConflictError
					stale    *storage.PreconditionFailedError
				)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
				case errors.As(err, &conflict):
					conflicts++
				case errors.As(err, &stale):
					stales++
				default:
					others = append(others, err)
				}
			}
			_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/same.md", Content: fmt.Sprint("writer ", w), By: benchBy})
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
			note(err)
			m, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/own/%d.md", w), Content: "v1", By: benchBy})
			note(err)
			if err != nil {
				return
			}
			v2 := "v2"
			_, _, err = db.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &v2, IfSHA256: "0000000000000000000000000000000000000000000000000000000000000000", By: benchBy})
			note(err)
			_, _, err = db.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &v2, IfSHA256: m.ContentSHA256, By: benchBy})
			note(err)
		})
	}
	wg.Wait()
	if len(others) > 0 || won != 1 || conflicts != writers-1 || stales != writers {
		t.Fatalf("won %d, conflicts %d, stale %d, other errors %v; want 1, %d, %d, none", won, conflicts, stales, others, writers-1, writers)
	}
	want := 1 + 2*writers // the one /same.md, and each writer's create and update
	n, err := rs[1].CountMemories(ctx, st.ID)
	if err != nil || n != 1+writers {
		t.Fatalf("count = %d, %v; want %d", n, err, 1+writers)
	}
	feedIsGapFree(t, rs[1], st.ID, want)
}

// feedIsGapFree fails t unless the store's change feed holds want changes,
// numbered 1 to want.
func feedIsGapFree(t *testing.T, db *postgres.DB, storeID string, want int) {
	t.Helper()
	page, err := db.ListChanges(t.Context(), storeID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if page.Latest != int64(want) || len(page.Changes) != want {
		t.Fatalf("%d changes up to %d, want %d", len(page.Changes), page.Latest, want)
	}
	for i, c := range page.Changes {
		if c.Sequence != int64(i+1) {
			t.Fatalf("change %d has sequence %d: the feed has a gap", i, c.Sequence)
		}
	}
}

// Writes in one batch see the writes before them even though their path
// checks were read ahead of the batch: writers racing to make /d/k a file
// and /d/k/leaf (which makes /d/k a directory) end with exactly one of the
// two for each k, and each create either landed or was told of the
// conflict.
func TestReadAheadPathChecksSeeTheBatchsEarlierWrites(t *testing.T) {
	db := replicas(t, 1)[0]
	ctx := t.Context()
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "tree"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, dirs = 32, 4
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		landed, conflicts int
	)
	for w := range writers {
		wg.Go(func() {
			p := fmt.Sprintf("/d/%d", w%dirs)
			if w%2 == 1 {
				p += fmt.Sprintf("/leaf%d.md", w)
			}
			_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: p, Content: "x", By: benchBy})
			var conflict *storage.PathConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				landed++
			case errors.As(err, &conflict):
				conflicts++
			default:
				t.Errorf("create %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	files, leaves := map[string]int{}, map[string]int{}
	err = db.Snapshot(ctx, st.ID, "/", func(int64) error { return nil }, func(m storage.MemoryRow) error {
		parts := strings.Split(m.Path, "/") // "", "d", k[, leaf]
		if len(parts) == 3 {
			files[parts[2]]++
		} else {
			leaves[parts[2]]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range dirs {
		d := fmt.Sprint(k)
		if files[d] > 1 || (files[d] == 1) == (leaves[d] > 0) {
			t.Errorf("/d/%s: %d files and %d memories under it; want one file or only memories under it", d, files[d], leaves[d])
		}
	}
	if n, err := db.CountMemories(ctx, st.ID); err != nil || n != landed || landed+conflicts != writers {
		t.Errorf("count %d (%v), %d landed, %d conflicts; want the count to be what landed, and every create answered", n, err, landed, conflicts)
	}
}

// A batch sends its writes' rows deferred, in its pipeline; when one
// write's row is refused by the database (here a trigger, standing for any
// check the server does not make), that write alone gets the error and the
// others land, with a feed and a count that say exactly what landed.
func TestARowTheDatabaseRefusesFailsOnlyItsWrite(t *testing.T) {
	url := testenv.PostgresSchema(t)
	db := openOn(t, url)
	ctx := t.Context()
	refuseRows(t, url, "memories", `NEW.path LIKE '%/bad.md'`, "refused by the test")
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "refusals"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 16, 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		landed  = map[string]bool{}
		refused int
	)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				p := fmt.Sprintf("/w%d/r%d/ok.md", w, r)
				if w%5 == r {
					p = fmt.Sprintf("/w%d/r%d/bad.md", w, r)
				}
				_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: p, Content: "x", By: benchBy})
				mu.Lock()
				switch {
				case err == nil && !strings.HasSuffix(p, "/bad.md"):
					landed[p] = true
				case err != nil && strings.HasSuffix(p, "/bad.md") && strings.Contains(err.Error(), "refused by the test"):
					refused++
				default:
					t.Errorf("create %s: %v", p, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := writers / 5 * 4; refused < want {
		t.Errorf("%d creates refused, want at least %d", refused, want)
	}
	if n, err := db.CountMemories(ctx, st.ID); err != nil || n != len(landed) {
		t.Errorf("count %d (%v), want the %d creates that landed", n, err, len(landed))
	}
	page, err := db.ListChanges(ctx, st.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Changes) != len(landed) {
		t.Fatalf("%d changes in the feed, want one per landed create (%d)", len(page.Changes), len(landed))
	}
	for i, ch := range page.Changes {
		if ch.Sequence != int64(i+1) || !landed[ch.Path] {
			t.Errorf("change %d: sequence %d, path %q; want sequence %d of a landed create", i, ch.Sequence, ch.Path, i+1)
		}
	}
}

// A memory write that panics in its batch fails alone: the batch takes the
// panic as that write's error, and the writes sharing it land, with a feed
// and a count that say exactly what landed. (Were the panic the batch's
// own, every write of the batch would be answered that the database is
// away.)
func TestAWriteThatPanicsFailsOnlyItself(t *testing.T) {
	db := openOn(t, testenv.PostgresSchema(t))
	ctx := t.Context()
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "panics"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 6
	for r := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, writers)
		for w := range writers {
			wg.Go(func() {
				<-start
				if w == 0 {
					errs[w] = db.WriteMemoryWith(ctx, st.ID, func(context.Context, sqlstore.Conn, sqlstore.StoreCounters) error {
						panic("boom")
					})
					return
				}
				_, errs[w] = db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/r%d/w%d.md", r, w), Content: "x", By: benchBy})
			})
		}
		close(start)
		wg.Wait()
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "panicked: boom") {
			t.Fatalf("round %d: the write that panicked answered %v; want its panic as its error", r, errs[0])
		}
		for w, err := range errs[1:] {
			if err != nil {
				t.Fatalf("round %d: create /r%d/w%d.md beside the write that panicked: %v; want it landed", r, r, w+1, err)
			}
		}
	}
	want := rounds * (writers - 1)
	if n, err := db.CountMemories(ctx, st.ID); err != nil || n != want {
		t.Errorf("count %d (%v), want the %d creates", n, err, want)
	}
	page, err := db.ListChanges(ctx, st.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range page.Changes {
		if ch.Sequence != int64(i+1) {
			t.Fatalf("change %d has sequence %d: want the feed gap-free", i, ch.Sequence)
		}
	}
	if len(page.Changes) != want {
		t.Fatalf("%d changes in the feed, want %d", len(page.Changes), want)
	}
}

// refuseRows makes the database at url refuse, with message, the rows
// inserted into table that meet condition (SQL on NEW): a check of the
// database's that the server does not make.
func refuseRows(t *testing.T, url, table, condition, message string) {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	if _, err := admin.Exec(t.Context(), fmt.Sprintf(`CREATE FUNCTION refuse_%[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF %[2]s THEN RAISE EXCEPTION '%[3]s'; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION refuse_%[1]s()`, table, condition, message)); err != nil {
		t.Fatal(err)
	}
}

// A store's writes land on two shards at once when the writes waiting
// cross spreadAbove (the first shard takes them below it, the store's
// own above): its two batches lock its row in turn, and the feed and the
// count come out exact and gap-free.
func TestAStoresWritesOnTwoShardsAtOnceLoseNothing(t *testing.T) {
	db := replicas(t, 1)[0]
	ctx := t.Context()
	var st storage.MemoryStoreRow
	for {
		var err error
		if st, err = db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "two shards"}); err != nil {
			t.Fatal(err)
		}
		if db.MemoryShard(st.ID) != 0 {
			break
		}
	}
	const writers = 48
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/w/%d.md", w), Content: "x", By: benchBy})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if used := db.MemoryShardsUsed(); used < 2 {
		t.Fatalf("the writes ran on %d shard(s); the test needs the store's writes on two", used)
	}
	n, err := db.CountMemories(ctx, st.ID)
	if err != nil || n != writers {
		t.Fatalf("count = %d, %v; want %d", n, err, writers)
	}
	feedIsGapFree(t, db, st.ID, writers)
}

// The rows a batch's writes insert go as one statement per table
// (merge.go), its updates' memory rows one by one: creates and guarded
// updates by writers that share batches land as each
// write wrote them — each memory's content, its search entry and its
// versions, the store's feed gap-free — and merged statements were sent.
func TestMergedRowsLandAsTheirWritesWrote(t *testing.T) {
	db := openOn(t, testenv.PostgresSchema(t))
	ctx := t.Context()
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "merged"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 5
	word := func(w, r int) string { return fmt.Sprintf("w%dround%d", w, r) }
	mems := make([]storage.MemoryRow, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			m, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/m/%d.md", w), Content: "created " + word(w, 0), By: benchBy})
			if err != nil {
				t.Errorf("create %d: %v", w, err)
				return
			}
			for r := 1; r < rounds; r++ {
				content := "updated " + word(w, r)
				if m, _, err = db.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &content, IfSHA256: m.ContentSHA256, By: benchBy}); err != nil {
					t.Errorf("update %d round %d: %v", w, r, err)
					return
				}
			}
			mems[w] = m
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if db.MergedStatements() == 0 {
		t.Fatal("no merged statement was sent: the writes' rows each went alone")
	}
	for w, m := range mems {
		got, err := db.GetMemory(ctx, st.ID, m.ID)
		if err != nil || got.Content == nil || *got.Content != "updated "+word(w, rounds-1) || got.VersionID != m.VersionID {
			t.Fatalf("memory %d: %+v (%v), want its last update", w, got, err)
		}
		for r := range rounds {
			hits, err := db.SearchMemories(ctx, storage.SearchQuery{StoreIDs: []string{st.ID}, Terms: []string{word(w, r)}, Limit: 10})
			want := 0
			if r == rounds-1 {
				want = 1 // only the head content is indexed
			}
			if err != nil || len(hits.Items) != want || (want == 1 && hits.Items[0].Memory.ID != m.ID) {
				t.Fatalf("search %q: %+v (%v), want %d hit (memory %s)", word(w, r), hits.Items, err, want, m.ID)
			}
		}
		versions, err := db.ListMemoryVersions(ctx, storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID, Limit: 100})
		if err != nil || len(versions.Items) != rounds {
			t.Fatalf("memory %d: %d versions (%v), want %d", w, len(versions.Items), err, rounds)
		}
	}
	feedIsGapFree(t, db, st.ID, writers*rounds)
}
