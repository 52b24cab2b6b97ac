package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/storagetest"
	"github.com/memstore/memstore/internal/testenv"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, now func() time.Time) storage.Store {
		db, err := postgres.Open(t.Context(), testenv.PostgresSchema(t), postgres.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// An unreachable database at start-up is one line saying where memstore
// looked and what to check; it needs no running server.
func TestOpenUnreachableIsOneClearLine(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://memstore:secret@127.0.0.1:1/memstore?connect_timeout=2", postgres.Options{})
	if err == nil {
		t.Fatal("opened a database that is not there")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, "secret") || !strings.Contains(msg, "127.0.0.1:1/memstore") || !strings.Contains(msg, "check that the server is running") {
		t.Fatalf("error = %q", msg)
	}
}
