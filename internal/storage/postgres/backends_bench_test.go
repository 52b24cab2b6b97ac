package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testenv"
)

// BenchmarkBackends runs the same concurrent workloads on SQLite and on
// PostgreSQL, side by side, reporting operations per second, and beside
// them raw PostgreSQL: one transaction per INSERT of a 4 KB row into a
// table with a unique (store_id, path) index, on the same database. Memory
// writes carry 4 KB of content too.
//
//	go test -run '^$' -bench Backends -benchtime 2000x ./internal/storage/postgres/
func BenchmarkBackends(b *testing.B) {
	for _, clients := range []int{8, 64} {
		for _, stores := range []int{1, 100} {
			b.Run(fmt.Sprintf("raw-postgres/inserts/clients=%d/stores=%d", clients, stores), func(b *testing.B) {
				benchRawInserts(b, clients, stores)
			})
		}
	}
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
			for _, stores := range []int{1, 100} {
				b.Run(fmt.Sprintf("%s/guarded-updates/clients=%d/stores=%d", be.name, clients, stores), func(b *testing.B) {
					benchGuardedUpdates(b, be.open(b), clients, stores)
				})
				b.Run(fmt.Sprintf("%s/creates/clients=%d/stores=%d", be.name, clients, stores), func(b *testing.B) {
					benchCreates(b, be.open(b), clients, stores)
				})
			}
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

// benchContent is the 4 KB a benchmark write stores, the raw row's size.
var benchContent = strings.Repeat("memory ", 4096/7)

func benchStores(b *testing.B, s storage.Store, n int) []string {
	ctx := context.Background()
	out := make([]string, n)
	for i := range out {
		st, err := s.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: fmt.Sprint("bench-", i)})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = st.ID
	}
	return out
}

// Each client updates memories of its own, guarded by the hash it last
// wrote: every update succeeds. There is one memory per client or per
// store, whichever is more, memory k in store k%stores and updated by
// client k%clients, so all clients contend for one store, or spread over
// every store.
func benchGuardedUpdates(b *testing.B, s storage.Store, clients, stores int) {
	defer s.Close()
	ctx := context.Background()
	sts := benchStores(b, s, stores)
	mems := make([]storage.MemoryRow, max(clients, stores))
	for k := range mems {
		var err error
		if mems[k], err = s.CreateMemory(ctx, storage.NewMemory{StoreID: sts[k%stores], Path: fmt.Sprintf("/m%d.md", k), Content: "v0", By: benchBy}); err != nil {
			b.Fatal(err)
		}
	}
	turn := make([]int, clients)
	spread(b, clients, func(c, i int) error {
		k := c + clients*(turn[c]%((len(mems)-c+clients-1)/clients))
		turn[c]++
		content := fmt.Sprintf("%d %s", i, benchContent)
		m, _, err := s.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: mems[k].StoreID, MemoryID: mems[k].ID, Content: &content, IfSHA256: mems[k].ContentSHA256, By: benchBy})
		mems[k] = m
		return err
	})
}

func benchCreates(b *testing.B, s storage.Store, clients, stores int) {
	defer s.Close()
	ctx := context.Background()
	sts := benchStores(b, s, stores)
	spread(b, clients, func(c, i int) error {
		_, err := s.CreateMemory(ctx, storage.NewMemory{StoreID: sts[i%stores], Path: fmt.Sprintf("/c%d/m%d.md", c, i), Content: benchContent, By: benchBy, MaxMemories: b.N + 1})
		return err
	})
}

// benchRawInserts is the reference: what PostgreSQL itself does with one
// single-row INSERT transaction per operation.
func benchRawInserts(b *testing.B, clients, stores int) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.PostgresSchema(b)+"&pool_max_conns=64")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE raw_rows (id bigserial PRIMARY KEY, store_id text NOT NULL, path text NOT NULL, content text NOT NULL, UNIQUE (store_id, path))`); err != nil {
		b.Fatal(err)
	}
	spread(b, clients, func(c, i int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO raw_rows (store_id, path, content) VALUES ($1, $2, $3)`, fmt.Sprint("store-", i%stores), fmt.Sprintf("/c%d/m%d.md", c, i), benchContent)
			return err
		})
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
		_, _, err := s.ClaimWork(ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: fmt.Sprint("worker-", c), ClaimTTL: time.Minute, Token: storage.Credential{ID: tok}, TokenHash: "h-" + tok})
		return err
	})
}
