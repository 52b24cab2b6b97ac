package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, now func() time.Time) storage.Store {
		db, err := Open(context.Background(), filepath.Join(t.TempDir(), "memstore.db"), Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

func TestReopenKeepsDataAndSkipsAppliedMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCredential(ctx, storage.Credential{ID: "apikey_x", Kind: storage.APIKey}, "h"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if _, err := db.CredentialByHash(ctx, "h"); err != nil {
		t.Fatalf("credential lost across reopen: %v", err)
	}
}
