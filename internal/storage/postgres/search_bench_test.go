package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// searchCorpus is how many memories the search benchmark searches.
const searchCorpus = 100_000

// BenchmarkSearch searches one store of 100,000 generated memories on
// SQLite and on PostgreSQL through SearchMemories (ranked, a snippet per
// hit, a page of 20), beside the bare index query on the same database
// (ranked ids, no join, no snippet) for reference. "rare" finds 100
// memories, "common" 1,000, "everywhere" 10,000 (each hit is ranked, so
// a word in a tenth of all memories is the costly case):
//
//	go test -run '^$' -bench Search -benchtime 200x ./internal/storage/postgres/
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	queries := []struct{ name, terms string }{{"rare", "quasar ledger"}, {"common", "signing keys"}, {"everywhere", "deploy"}}

	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "search.db")
		db, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		st := benchStore(b, db)
		fill(b, st.ID, "?", func(query string, args []any) error {
			_, err := raw.ExecContext(ctx, query, args...)
			return err
		}, func(t time.Time) any { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") })
		for _, q := range queries {
			benchSearch(b, db, st.ID, q.name, q.terms)
			b.Run(q.name+"/raw-fts5", func(b *testing.B) {
				match := `"` + strings.Join(strings.Fields(q.terms), `" "`) + `"`
				timeOps(b, func() int {
					rows, err := raw.QueryContext(ctx, `SELECT rowid FROM memory_search WHERE memory_search MATCH ? ORDER BY rank LIMIT 20`, match)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for rows.Next() {
						n++
					}
					rows.Close()
					return n
				})
			})
		}
	})

	b.Run("postgres", func(b *testing.B) {
		url := testenv.PostgresSchema(b)
		db, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		raw, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close(ctx)
		st := benchStore(b, db)
		fill(b, st.ID, "$", func(query string, args []any) error {
			_, err := raw.Exec(ctx, query, args...)
			return err
		}, func(t time.Time) any { return t })
		if _, err := raw.Exec(ctx, `ANALYZE memories`); err != nil {
			b.Fatal(err)
		}
		for _, q := range queries {
			benchSearch(b, db, st.ID, q.name, q.terms)
			b.Run(q.name+"/raw-tsquery", func(b *testing.B) {
				timeOps(b, func() int {
					rows, err := raw.Query(ctx, `SELECT id FROM memories, plainto_tsquery('simple', $1) q WHERE search @@ q ORDER BY ts_rank(search, q) DESC LIMIT 20`, q.terms)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for rows.Next() {
						n++
					}
					rows.Close()
					return n
				})
			})
		}
	})
}

func benchStore(b testing.TB, db storage.Store) storage.MemoryStoreRow {
	st, err := db.CreateMemoryStore(context.Background(), storage.NewMemoryStore{Name: "search bench"})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// benchSearch times SearchMemories for terms, a first page of 20.
func benchSearch(b *testing.B, db storage.Store, storeID, name, terms string) {
	b.Run(name+"/SearchMemories", func(b *testing.B) {
		q := storage.SearchQuery{StoreIDs: []string{storeID}, Terms: storage.SearchTerms(terms), Limit: 20}
		timeOps(b, func() int {
			page, err := db.SearchMemories(context.Background(), q)
			if err != nil {
				b.Fatal(err)
			}
			return len(page.Items)
		})
	})
}

// timeOps runs op b.N times and reports ms/op; an op that finds nothing
// fails the benchmark (it would time an empty answer).
func timeOps(b *testing.B, op func() int) {
	cpu := func() time.Duration {
		var u syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
			b.Fatal(err)
		}
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	b.ResetTimer()
	before := cpu()
	for range b.N {
		if op() == 0 {
			b.Fatal("the query found nothing")
		}
	}
	used := cpu() - before
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// fill writes searchCorpus memories into storeID with multi-row INSERTs
// (the index's triggers fill it as a write would): text drawn from a
// vocabulary with a Zipf law, as prose is, "deploy" in one memory in ten,
// "signing keys" in one in a hundred, "quasar ledger" in one in a thousand.
func fill(b testing.TB, storeID, placeholder string, exec func(string, []any) error, at func(time.Time) any) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := benchVocabulary(rng)
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 2, uint64(len(words)-1))
	now := at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := time.Now()
	const batch = 500
	n := 0
	ph := func() string {
		n++
		if placeholder == "$" {
			return fmt.Sprintf("$%d", n)
		}
		return "?"
	}
	for lo := 0; lo < searchCorpus; lo += batch {
		var vs, ms, paths []string
		var vargs, margs []any
		n = 0
		for i := lo; i < lo+batch; i++ {
			var text strings.Builder
			for w := 0; w < 40+rng.IntN(60); w++ {
				word := words[zipf.Uint64()]
				if word == "deploy" || word == "quasar" || word == "ledger" || word == "signing" || word == "keys" {
					word = "note"
				}
				text.WriteString(word)
				text.WriteString(" ")
				if rng.IntN(12) == 0 {
					text.WriteString(". ")
				}
			}
			if i%10 == 0 {
				text.WriteString("Remember to deploy after review. ")
			}
			if i%100 == 3 {
				text.WriteString("Rotate the signing keys. ")
			}
			if i%1000 == 7 {
				text.WriteString("The quasar ledger is reconciled monthly.")
			}
			content := text.String()
			path := fmt.Sprintf("/%s/%s-%d.md", words[rng.IntN(50)], words[rng.IntN(len(words))], i)
			paths = append(paths, path)
			mid, vid := fmt.Sprintf("mem_bench%020d", i), fmt.Sprintf("memver_bench%020d", i)
			vs = append(vs, "("+strings.Join([]string{ph(), ph(), ph(), "'created'", ph(), ph(), ph(), ph(), ph(), "'api_key'", "'apikey_bench'", ph()}, ", ")+")")
			vargs = append(vargs, vid, storeID, mid, path, []byte(content), "sha", len(content), now, i+1)
		}
		n = 0
		for i := lo; i < lo+batch; i++ {
			mid, vid := fmt.Sprintf("mem_bench%020d", i), fmt.Sprintf("memver_bench%020d", i)
			ms = append(ms, "("+strings.Join([]string{ph(), ph(), ph(), "'sha'", "0", ph(), ph(), ph()}, ", ")+")")
			margs = append(margs, mid, storeID, paths[i-lo], vid, now, now)
		}
		if err := exec(`INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, content_sha256, content_size_bytes, created_at, created_by_type, created_by_id, sequence) VALUES `+strings.Join(vs, ", "), vargs); err != nil {
			b.Fatal(err)
		}
		if err := exec(`INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at) VALUES `+strings.Join(ms, ", "), margs); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d memories written in %s", searchCorpus, time.Since(start).Round(time.Millisecond))
}

// benchVocabulary is a few thousand words: common English first (the
// head of the Zipf law), then made-up but pronounceable ones.
func benchVocabulary(rng *rand.Rand) []string {
	words := strings.Fields(`the of and to a in is it you that he was for on are with as his they be at one have this from or had by
		not word but what some we can out other were all there when up use your how said an each she which do their time if will way
		about many then them write would like so these her long make thing see him two has look more day could go come did number
		sound no most people my over know water than call first who may down side been now find any new work part take get place
		made live where after back little only round man year came show every good me give our under name very through just form
		sentence great think say help low line differ turn cause much mean before move right boy old too same tell does set three
		want air well also play small end put home read hand port large spell add even land here must big high such follow act why
		ask men change went light kind off need house picture try us again animal point mother world near build self earth father
		server client release branch merge review test build cache queue worker session memory store token config schema backup`)
	syllables := strings.Fields("ka lo mi ra te su no pi ve da ro li sa mu ne to fi ga be zo")
	for len(words) < 5000 {
		var w strings.Builder
		for range 2 + rng.IntN(3) {
			w.WriteString(syllables[rng.IntN(len(syllables))])
		}
		words = append(words, w.String())
	}
	return words
}
