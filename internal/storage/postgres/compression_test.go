package postgres_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testenv"
)

// A version's content is compressed with lz4 where the server has it
// (migration 0015), and reads back as written.
func TestVersionContentsAreCompressedWithLZ4(t *testing.T) {
	url := testenv.PostgresSchema(t)
	db, ctx := openOn(t, url), t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var lz4 bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals))`).Scan(&lz4); err != nil {
		t.Fatal(err)
	}
	if !lz4 {
		t.Skip("this PostgreSQL was built without lz4: versions stay compressed with pglz")
	}
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("a note worth keeping, ", 200)
	m, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/n.md", Content: content, By: storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_1"}})
	if err != nil {
		t.Fatal(err)
	}
	// The column's own method, not the server's default (which a
	// cluster may have set to lz4 already), and the row's.
	var column string
	if err := conn.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute WHERE attrelid = 'memory_versions'::regclass AND attname = 'content'`).Scan(&column); err != nil {
		t.Fatal(err)
	}
	if column != "l" {
		t.Fatalf("memory_versions.content's compression is %q, want l (lz4)", column)
	}
	var method *string
	if err := conn.QueryRow(ctx, `SELECT pg_column_compression(content) FROM memory_versions WHERE id = $1`, m.VersionID).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method == nil || *method != "lz4" {
		t.Fatalf("the version's content is compressed with %v, want lz4", method)
	}
	got, err := db.GetMemory(ctx, st.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content == nil || *got.Content != content {
		t.Fatal("the content read back differs from the one written")
	}
}
