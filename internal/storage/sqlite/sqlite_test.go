package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
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

func TestConformanceAcrossRestarts(t *testing.T) {
	storagetest.RunRestarts(t, func(t *testing.T, now func() time.Time) func() storage.Store {
		path := filepath.Join(t.TempDir(), "memstore.db")
		return func() storage.Store {
			db, err := Open(context.Background(), path, Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return db
		}
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

// The file is in WAL mode, so readers (listings, long polls, event
// streams) never block the writer, and every connection waits for the
// write lock rather than failing with SQLITE_BUSY.
func TestOpenUsesWALAndWaitsForTheWriteLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Several connections at once, so that more than the first one of the
	// pool is asked.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		if conns[i], err = db.db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	for i, c := range conns {
		var mode string
		var timeout, fk, sync int
		if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		// synchronous FULL (2): in WAL mode, NORMAL skips the fsync at
		// commit, and an acknowledged write could vanish in a power cut.
		if mode != "wal" || timeout < 1000 || fk != 1 || sync != 2 {
			t.Fatalf("connection %d: journal_mode %s, busy_timeout %d ms, foreign_keys %d, synchronous %d; want wal, at least a second, 1, 2 (FULL)", i, mode, timeout, fk, sync)
		}
	}
}

// Two handles on one file (two server processes): each caches the logs it
// appended to, and still sees every event the other appended since.
func TestCachedLogsSeeAppendsFromAnotherHandle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := a.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	if _, err := a.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	var (
		seen []api.Event
		want []string
	)
	record := func(v storage.SessionView) error {
		seen = v.Log
		return nil
	}
	for i, h := range []*DB{a, a, b, a, b, b, a} {
		text := fmt.Sprintf("message %d", i)
		if _, err := h.AppendEvents(ctx, sess.ID, []api.Event{api.UserMessage(text)}, record); err != nil {
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
