package postgres_test

import (
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
