package server_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/server"
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
	return newEnv(b, server.Config{Logger: slog.New(slog.DiscardHandler)})
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
