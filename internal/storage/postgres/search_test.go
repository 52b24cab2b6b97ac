package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// The server computes each written memory's search entry; it must be the
// entry the database computes for a row written without one (a copy from
// SQLite, a statement by hand), word for word, position for position and
// weight for weight, or a search would rank and find memories differently
// depending on which path wrote them. Each content is written by a create
// and by an update, then the database recomputes every entry (the trigger
// fires on a path written by hand) and nothing may change.
func TestSearchEntriesFromTheServerAreTheDatabasesOwn(t *testing.T) {
	url := testenv.PostgresSchema(t)
	ctx := t.Context()
	db, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_1"}
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	contents := map[string]string{
		"/runbooks/deploy-checklist.md": "Before a deploy: drain the queue (see /ops/drain.md), then run `make deploy` — twice if v2.3 fails.",
		"/unicode/ünïcode.md":           "Naïve café STRASSE Straße ÉCOLE, ½ and ３ and 東京タワー; x_y snake_case foo-bar a.b.c",
		"/repeat/memory.md":             strings.Repeat("memory ", 600) + "end",
		"/both/deploy.md":               "deploy path words also in the content: both deploy",
		"/long/word.md":                 "short " + strings.Repeat("x", 3000) + " after",
		"/many/words.md":                strings.Repeat("a b c d e f g h ", 2200) + "last",
		"/empty/content.md":             "",
		"/path/words.md":                strings.Repeat("path words ", 300),
		"/nul/bytes.md":                 "before\x00after tab\there",
	}
	for path, content := range contents {
		m, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: path, Content: "placeholder " + content, By: by})
		if err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
		if _, _, err := db.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &content, By: by}); err != nil {
			t.Fatalf("update %s: %v", path, err)
		}
		if _, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/created" + path, Content: content, By: by}); err != nil {
			t.Fatalf("create /created%s: %v", path, err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	entries := func() map[string]string {
		rows, err := conn.Query(ctx, `SELECT path, search::text FROM memories`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv [2]string, err error) {
			err = r.Scan(&kv[0], &kv[1])
			return kv, err
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range got {
			m[kv[0]] = kv[1]
		}
		return m
	}
	written := entries()
	if len(written) != 2*len(contents) {
		t.Fatalf("%d memories, want %d", len(written), 2*len(contents))
	}
	if _, err := conn.Exec(ctx, `UPDATE memories SET path = path`); err != nil {
		t.Fatal(err)
	}
	for path, entry := range entries() {
		if written[path] != entry {
			t.Errorf("%s: the server wrote\n%.300s\nthe database computes\n%.300s", path, written[path], entry)
		}
	}
	// A hit for the words the entries were checked on, as a user asks.
	page, err := db.SearchMemories(ctx, storage.SearchQuery{StoreIDs: []string{st.ID}, Terms: storage.SearchTerms("STRASSE café ３"), Limit: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("search = %d hits (%v), want the two unicode memories", len(page.Items), err)
	}
}

// The server's entry reads each word once, hashing it as it lowers it; it
// must index exactly storage.SearchWords' words, at their positions, as the
// plain reading of the rule below does: over texts of mixed case, accents,
// other scripts, digits, punctuation, bytes that are not UTF-8, words too
// long to index, words repeated past a lexeme's positions and texts past
// the last position.
func TestTheSearchEntryIndexesSearchWords(t *testing.T) {
	pieces := []string{"deploy", "Deploy", "DEPLOY", "café", "CAFÉ", "Straße", "STRASSE", "東京", "３", "x2", "v2.3", "a_b", "foo-bar",
		"\xff", "\xe2\x82", "½", "ǅ", "İstanbul", " ", "  ", "\n", "—", ",", strings.Repeat("y", 2047), strings.Repeat("z", 2046), "ÉCOLE", "naïve",
		"costarring", "liquid"}
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", " ", "memory", strings.Repeat("memory ", 600), strings.Repeat("a b c d e f g h ", 2200) + "last", "memory memory"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(60) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			if rng.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		texts = append(texts, b.String())
	}
	for i, content := range texts {
		path := texts[(i+7)%len(texts)]
		if i == 3 {
			path = "memory memory" // a word past its 256 positions in all, with the path's
		}
		if got, want := postgres.SearchEntryText(path, content), plainEntry(path, content); got != want {
			t.Fatalf("path %.60q, content %.60q:\n got %.300s\nwant %.300s", path, content, got, want)
		}
	}
}

// plainEntry is the entry by the rule read plainly: storage.SearchWords'
// words of the path at weight A, then the content's, each word's positions
// in order, at most 255 from one text and 256 in all, a position at most
// 16,383, words of 2,047 bytes or more left out.
func plainEntry(path, content string) string {
	type entry struct {
		word      string
		positions []string
		last      int
	}
	var (
		entries []*entry
		by      = map[string]*entry{}
		pos     int
	)
	for _, text := range []struct {
		s      string
		weight string
	}{{path, "A"}, {content, ""}} {
		inText := map[string]int{}
		for w := range storage.SearchWords(text.s) {
			if len(w) >= 2047 {
				continue
			}
			pos = min(pos+1, 16383)
			e := by[w]
			if e == nil {
				e = &entry{word: w}
				by[w] = e
				entries = append(entries, e)
			}
			if inText[w] < 255 && len(e.positions) < 256 && e.last != pos {
				e.positions = append(e.positions, fmt.Sprint(pos)+text.weight)
				e.last = pos
				inText[w]++
			}
		}
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = "'" + e.word + "':" + strings.Join(e.positions, ",")
	}
	return strings.Join(out, " ")
}

// BenchmarkSearchEntry is the server's CPU for a written memory's search
// entry, which every create and content update computes before it joins
// its batch: the benchmarks' 4 KB of one repeated word, and prose with
// punctuation and accented words.
func BenchmarkSearchEntry(b *testing.B) {
	for _, c := range entryContents() {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.content)))
			b.ReportAllocs()
			for b.Loop() {
				_ = postgres.SearchEntryValue(entryPath, c.content)
			}
		})
	}
}

// entryPath and entryContents are the memories the search entry's
// benchmarks index.
const entryPath = "/notes/deploy-checklist.md"

func entryContents() []struct{ name, content string } {
	prose := strings.Repeat("Before a deploy: drain the queue (see /ops/drain.md), then run `make deploy` — twice if v2.3 fails. Café notes on Naïve retries, STRASSE 12. ", 30)
	return []struct{ name, content string }{
		{"repeated", strings.Repeat("memory ", 4096/7)},
		{"prose", prose[:4096]},
	}
}

// BenchmarkSearchEntryOnTheBackend is what a memory's search entry costs
// the PostgreSQL backend that stores it (the one holding the store's row
// lock, so every write of the store waits for it), in the binary form the
// server sends and in the text form it sent before: one-row INSERTs into a
// table of one tsvector column, pipelined 100 at a time, and the backend's
// CPU per insert from /proc (the database must run on this machine):
//
//	go test -run '^$' -bench SearchEntryOnTheBackend -benchtime 20000x ./internal/storage/postgres/
func BenchmarkSearchEntryOnTheBackend(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.PostgresSchema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	postgres.RegisterTypes(conn.TypeMap())
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE search_entries (search tsvector NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	cpu := func() time.Duration {
		d, err := testenv.ProcessCPU(pid)
		if err != nil {
			b.Fatalf("the backend's CPU (is the database on this machine?): %v", err)
		}
		return d
	}
	send := func(bt *pgx.Batch) {
		if err := conn.SendBatch(ctx, bt).Close(); err != nil {
			b.Fatal(err)
		}
		*bt = pgx.Batch{}
	}
	for _, c := range entryContents() {
		for _, form := range []struct {
			name  string
			value any
		}{
			{"text", postgres.SearchEntryText(entryPath, c.content)},
			{"binary", postgres.SearchEntryValue(entryPath, c.content)},
		} {
			b.Run(c.name+"/"+form.name, func(b *testing.B) {
				before := cpu()
				var bt pgx.Batch
				for b.Loop() {
					bt.Queue(`INSERT INTO search_entries (search) VALUES ($1)`, form.value)
					if bt.Len() == 100 {
						send(&bt)
					}
				}
				if bt.Len() > 0 {
					send(&bt)
				}
				b.ReportMetric(float64((cpu()-before).Microseconds())/float64(b.N), "backend_µs/insert")
			})
		}
	}
}
