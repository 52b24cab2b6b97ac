package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// BenchmarkPages prints the server time of the console's heaviest pages,
// end to end over HTTP on SQLite: a folder and a filter of a store holding
// 10,000 memories, and the history of a memory with 1,000 versions.
//
//	go test -run '^$' -bench Pages -benchtime 50x ./internal/console/
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	srv := startConsole(b)
	big, err := srv.Store.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "big"})
	if err != nil {
		b.Fatal(err)
	}
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_bench"}
	for i := range 10_000 {
		if _, err := srv.Store.CreateMemory(ctx, storage.NewMemory{StoreID: big.ID, Path: fmt.Sprintf("/notes/d%02d/note-%04d.md", i%100, i),
			Content: fmt.Sprintf("note %d\n", i), By: by, MaxMemories: 10_000}); err != nil {
			b.Fatal(err)
		}
	}
	m, err := srv.Store.CreateMemory(ctx, storage.NewMemory{StoreID: big.ID, Path: "/zz-history.md", Content: "v0", By: by, MaxMemories: 10_001})
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < 1_000; i++ {
		content := fmt.Sprintf("v%d", i)
		if _, _, err := srv.Store.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: big.ID, MemoryID: m.ID, Content: &content, By: by}); err != nil {
			b.Fatal(err)
		}
	}
	v := newVisitor(b, srv)
	if status := v.login("ada", testPassword); status != http.StatusSeeOther {
		b.Fatalf("sign-in: status %d", status)
	}
	for _, page := range []struct{ name, path string }{
		{"tree-root", "/console/stores/" + big.ID + "/"},
		{"tree-folder-of-100-folders", "/console/stores/" + big.ID + "/?prefix=/notes/"},
		{"tree-folder-of-100-memories", "/console/stores/" + big.ID + "/?prefix=/notes/d42/"},
		{"tree-filter", "/console/stores/" + big.ID + "/?filter=/notes/d99/note-99"},
		{"history-1000-versions-first-page", "/console/stores/" + big.ID + "/memories/" + m.ID + "/history"},
		{"stores-list", "/console/"},
	} {
		b.Run(page.name, func(b *testing.B) {
			for b.Loop() {
				if status, body := v.do("GET", page.path, nil); status != http.StatusOK {
					b.Fatalf("GET %s: %d\n%s", page.path, status, body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
		})
	}
}
