package postgres_test

import (
	"strings"
	"testing"

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
