package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// BenchmarkBackends runs the same concurrent workloads on SQLite and on
// PostgreSQL, side by side, reporting operations per second:
//
//	go test -run '^$' -bench Backends -benchtime 2000x ./internal/storage/postgres/
func BenchmarkBackends(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"sqlite", func(b *testing.B) storage.Store {
			db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return db
		}},
		{"postgres", func(b *testing.B) storage.Store {
			db, err := postgres.Open(context.Background(), testenv.PostgresSchema(b)+"&pool_max_conns=64", postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return db
		}},
	}
	for _, be := range backends {
		for _, clients := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/guarded-updates/clients=%d", be.name, clients), func(b *testing.B) {
				benchGuardedUpdates(b, be.open(b), clients)
			})
			b.Run(fmt.Sprintf("%s/creates/clients=%d", be.name, clients), func(b *testing.B) {
				benchCreates(b, be.open(b), clients)
			})
		}
		b.Run(be.name+"/claims/workers=32", func(b *testing.B) {
			benchClaims(b, be.open(b), 32)
		})
	}
}

var benchBy = storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_bench"}

// spread runs b.N operations over n goroutines and reports ops/s.
func spread(b *testing.B, n int, op func(client, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	b.ResetTimer()
	for c := range n {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(c, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// Each client updates its own memory of one store, guarded by the hash it
// last wrote: every update succeeds, and they all contend for the store.
func benchGuardedUpdates(b *testing.B, s storage.Store, clients int) {
	defer s.Close()
	ctx := context.Background()
	st, err := s.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	mems := make([]storage.MemoryRow, clients)
	for i := range mems {
		if mems[i], err = s.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/c%d.md", i), Content: "v0", By: benchBy}); err != nil {
			b.Fatal(err)
		}
	}
	spread(b, clients, func(c, i int) error {
		content := fmt.Sprintf("version %d", i)
		m, _, err := s.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: mems[c].ID, Content: &content, IfSHA256: mems[c].ContentSHA256, By: benchBy})
		mems[c] = m
		return err
	})
}

func benchCreates(b *testing.B, s storage.Store, clients int) {
	defer s.Close()
	ctx := context.Background()
	st, err := s.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	spread(b, clients, func(c, i int) error {
		_, err := s.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/c%d/m%d.md", c, i), Content: "a memory", By: benchBy, MaxMemories: b.N + 1})
		return err
	})
}

func benchClaims(b *testing.B, s storage.Store, workers int) {
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "bench", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateEnvironment(ctx, env); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
		if _, err := s.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
			b.Fatal(err)
		}
	}
	spread(b, workers, func(c, i int) error {
		tok := ids.New(ids.SessionsToken)
		_, err := s.ClaimWork(ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: fmt.Sprint("worker-", c), ClaimTTL: time.Minute, Token: storage.Credential{ID: tok}, TokenHash: "h-" + tok})
		return err
	})
}
