package server_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// Benchmarks of the memory API end to end: HTTP through the real handler
// to a SQLite file, as a client sees it. Run them with
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/server/
//
// and quote ns/op (latency per request) and, for the listing, the figures
// it reports.

// benchEnv is newEnv for a benchmark, with logs discarded: writing a log
// line per request is not what is being measured.
func benchEnv(b *testing.B) *testEnv {
	b.Helper()
	return newEnv(b, app.Config{Logger: slog.New(slog.DiscardHandler)})
}

func BenchmarkCreateMemory(b *testing.B) {
	e := benchEnv(b)
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "bench"}, &st)
	body := strings.Repeat("a line of memory text\n", 50) // ~1 KB
	b.ResetTimer()
	for i := range b.N {
		res := e.do("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/bench/%03d/m%d.md", i%1000, i), Content: body})
		if res.status != http.StatusOK {
			b.Fatalf("%d: %s", res.status, res.body)
		}
	}
}

func BenchmarkUpdateWithPrecondition(b *testing.B) {
	e := benchEnv(b)
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "bench"}, &st)
	e.seed(b, st.ID, 1000)
	var m api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/hot.md", Content: "v0"}, &m)
	sha := m.ContentSHA256
	b.ResetTimer()
	for i := range b.N {
		res := e.do("POST", "/v1/memory_stores/"+st.ID+"/memories/"+m.ID, map[string]any{
			"content":      fmt.Sprintf("version %d\n%s", i, strings.Repeat("text ", 200)),
			"precondition": map[string]string{"type": "content_sha256", "content_sha256": sha},
		})
		if res.status != http.StatusOK {
			b.Fatalf("%d: %s", res.status, res.body)
		}
		var got api.Memory
		if err := json.Unmarshal(res.body, &got); err != nil {
			b.Fatal(err)
		}
		sha = got.ContentSHA256
	}
}

// BenchmarkListFullStore pages through a 10,000-memory store in the basic
// view at the largest page size, the way a worker's sync does; one op is the
// whole listing.
func BenchmarkListFullStore(b *testing.B) {
	e := benchEnv(b)
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "bench"}, &st)
	e.seed(b, st.ID, api.DefaultMaxMemories)
	b.ResetTimer()
	var pages, bytes int
	for range b.N {
		n := 0
		for cursor := ""; ; {
			path := "/v1/memory_stores/" + st.ID + "/memories?limit=100"
			if cursor != "" {
				path += "&page=" + url.QueryEscape(cursor)
			}
			res := e.do("GET", path, nil)
			if res.status != http.StatusOK {
				b.Fatalf("%d: %s", res.status, res.body)
			}
			pages++
			bytes += len(res.body)
			var page api.Page[api.MemoryListItem]
			if err := json.Unmarshal(res.body, &page); err != nil {
				b.Fatal(err)
			}
			n += len(page.Data)
			if page.NextPage == nil {
				break
			}
			cursor = *page.NextPage
		}
		if n != api.DefaultMaxMemories {
			b.Fatalf("listed %d memories, want %d", n, api.DefaultMaxMemories)
		}
	}
	b.ReportMetric(float64(pages)/float64(b.N), "pages/op")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/op")
}

// BenchmarkWriteThroughput measures, in one run, what 8 concurrent clients
// get from the memory API (creates/s, guarded updates/s, over HTTP) and what
// raw SQLite gives 8 concurrent writers doing one insert of the same
// content per transaction on the same settings — the floor the server is
// compared with. The three alternate in short rounds, so that a change in
// the shared machine's load or disk latency during the run weighs on each
// figure alike. One op is the whole measurement; run it with
//
//	go test -run '^$' -bench WriteThroughput -benchtime 1x ./internal/server/
func BenchmarkWriteThroughput(b *testing.B) {
	const clients, rounds = 8, 8
	writes := testenv.Scale(800, 4000) / rounds
	body := strings.Repeat("a line of memory text\n", 50) // ~1 KB
	// Each iteration (-benchtime Nx) runs on new databases, and the figures
	// printed are those of all iterations together.
	var raw, creates, updates throughput
	for b.Loop() {
		rawDB, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(b.TempDir(), "raw.db")))
		if err != nil {
			b.Fatal(err)
		}
		defer rawDB.Close()
		if _, err := rawDB.Exec(`CREATE TABLE t (id TEXT PRIMARY KEY, body BLOB NOT NULL)`); err != nil {
			b.Fatal(err)
		}

		e := benchEnv(b)
		// One kept-alive connection per client, as 8 workers would have.
		e.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		var st api.MemoryStore
		e.ok("POST", "/v1/memory_stores", map[string]any{"name": "bench"}, &st)
		mems := make([]api.Memory, clients)
		for round := range rounds {
			raw.add(concurrently(clients, writes, func(c, i int) error {
				tx, err := rawDB.Begin()
				if err != nil {
					return err
				}
				if _, err := tx.Exec(`INSERT INTO t (id, body) VALUES (?, ?)`, fmt.Sprintf("%d-%d-%d", round, c, i), []byte(body)); err != nil {
					tx.Rollback()
					return err
				}
				return tx.Commit()
			}))
			creates.add(concurrently(clients, writes, func(c, i int) error {
				res := e.do("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/c%d/r%d/m%d.md", c, round, i), Content: body})
				if res.status != http.StatusOK {
					return fmt.Errorf("create: %d: %s", res.status, res.body)
				}
				if round == 0 && i == 0 {
					return json.Unmarshal(res.body, &mems[c])
				}
				return nil
			}))
			updates.add(concurrently(clients, writes, func(c, i int) error {
				res := e.do("POST", "/v1/memory_stores/"+st.ID+"/memories/"+mems[c].ID, map[string]any{
					"content":      fmt.Sprintf("version %d.%d\n%s", round, i, body),
					"precondition": map[string]string{"type": "content_sha256", "content_sha256": mems[c].ContentSHA256},
				})
				if res.status != http.StatusOK {
					return fmt.Errorf("update: %d: %s", res.status, res.body)
				}
				return json.Unmarshal(res.body, &mems[c])
			}))
		}
	}
	b.ReportMetric(raw.perSecond(), "raw_sqlite_inserts/s")
	b.ReportMetric(creates.perSecond(), "creates/s")
	b.ReportMetric(updates.perSecond(), "guarded_updates/s")
	b.ReportMetric(creates.perSecond()/raw.perSecond(), "creates/raw")
	b.ReportMetric(updates.perSecond()/raw.perSecond(), "updates/raw")
}

// throughput sums the calls and the time of several rounds.
type throughput struct {
	calls   int
	elapsed time.Duration
}

func (t *throughput) add(r throughput) { t.calls += r.calls; t.elapsed += r.elapsed }

func (t throughput) perSecond() float64 { return float64(t.calls) / t.elapsed.Seconds() }

// concurrently runs n calls of op spread over clients goroutines and returns
// how many ran and how long they took together.
func concurrently(clients, n int, op func(client, i int) error) throughput {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / clients {
				if err := op(c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		panic(err)
	}
	return throughput{calls: n / clients * clients, elapsed: elapsed}
}
