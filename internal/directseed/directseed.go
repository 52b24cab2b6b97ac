// Package directseed writes a `memstore bench --seed` data set straight
// into a database, through the storage layer's memory writes, with many
// writes per transaction. Through the API, a write is a request and a
// commit: a million memories of 5 versions took about two hours on a 2-core
// machine, which put the full-size data set out of reach of anyone
// who wanted to measure it. The rows are the API's: the same rules
// (storage.CreateMemoryIn, UpdateMemoryIn) decide them, in the same
// transactions code (sqlstore.WriteMemoriesTogether), so versions, the
// change feed and the search index come out as a server would write them.
package directseed

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/loadgen"
	"github.com/memstore/memstore/internal/storage"
)

// Database is what a seed writes through: a backend's storage.Store with
// sqlstore's bulk memory writes (both backends' *DB).
type Database interface {
	CreateMemoryStore(ctx context.Context, in storage.NewMemoryStore) (storage.MemoryStoreRow, error)
	WriteMemoriesTogether(ctx context.Context, storeID string, fn func(storage.MemoryTx) error) error
}

// Options is one seed.
type Options struct {
	Shape loadgen.Shape
	// Writers is how many transactions run at once (each on its own
	// stores): 1 is all SQLite can use, a few keep PostgreSQL busy.
	Writers int
	// WritesPerTx bounds the writes of one transaction; a store's
	// memories are split over several when it has more.
	WritesPerTx int
	// Progress, when set, is called a few times a second.
	Progress func(loadgen.Progress)
}

// Result is what a seed made.
type Result struct {
	Name     string   `json:"name"`
	StoreIDs []string `json:"memory_store_ids"`
	// Writes is memories created plus updates made.
	Writes         int64   `json:"writes"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Actor is who the versions say wrote them: an API key id minted for
	// the seed, which no key has (as after a key is deleted).
	Actor string `json:"created_by_api_key_id"`
}

// Seed makes o.Shape.Stores stores named as `memstore bench --seed` names
// them and writes their memories, each o.Shape.Versions times. It stops at
// the first failure; what was committed before stays, as after an
// interrupted API seed.
func Seed(ctx context.Context, db Database, o Options) (*Result, error) {
	sh := o.Shape
	if sh.Stores < 1 || sh.Memories < 1 || sh.Versions < 1 || sh.ContentBytes < 1 {
		return nil, fmt.Errorf("directseed: shape %+v: every count must be 1 or more", sh)
	}
	writers := max(o.Writers, 1)
	perTx := max(o.WritesPerTx, sh.Versions)
	start := time.Now()
	res := &Result{Name: loadgen.SeedName(start), Actor: ids.New(ids.APIKey)}
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: res.Actor}
	total := int64(sh.Stores) * int64(sh.Memories) * int64(sh.Versions)
	var done atomic.Int64
	stop := loadgen.StartProgress(o.Progress, func() loadgen.Progress {
		return loadgen.Progress{Phase: "seed", Elapsed: time.Since(start), Done: done.Load(), Total: total}
	})
	defer stop()

	// A writer takes a store at a time: it creates the store, then writes
	// its memories, each Versions times, in transactions of up to perTx
	// writes. An interrupted seed leaves whole stores but the last ones.
	perJob := perTx / sh.Versions
	stores := make(chan int)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range stores {
				st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: loadgen.SeedStoreName(res.Name, i, sh.Stores), Description: loadgen.SeedDescription})
				if err != nil {
					fail(fmt.Errorf("create seed store %d of %d: %w", i+1, sh.Stores, err))
					continue
				}
				mu.Lock()
				res.StoreIDs = append(res.StoreIDs, st.ID)
				mu.Unlock()
				for from := 0; from < sh.Memories && ctx.Err() == nil; from += perJob {
					to := min(from+perJob, sh.Memories)
					err := db.WriteMemoriesTogether(ctx, st.ID, func(tx storage.MemoryTx) error {
						return writeMemories(ctx, tx, st.ID, from, to, sh, by)
					})
					if err != nil {
						fail(fmt.Errorf("seed memories %d to %d of store %s: %w", from, to-1, st.ID, err))
						break
					}
					done.Add(int64(to-from) * int64(sh.Versions))
				}
			}
		}()
	}
feed:
	for i := range sh.Stores {
		select {
		case stores <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(stores)
	wg.Wait()
	res.Writes = done.Load()
	res.ElapsedSeconds = time.Since(start).Seconds()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return res, first
}

// writeMemories writes memories from to to (excluded) of a store, each
// created then updated to Versions versions, with the content and paths an
// API seed writes. It may run more than once (a retried transaction).
func writeMemories(ctx context.Context, tx storage.MemoryTx, storeID string, from, to int, sh loadgen.Shape, by storage.Actor) error {
	for n := from; n < to; n++ {
		path := loadgen.SeedPath(n)
		c := loadgen.Content(sh.ContentBytes, path, 1)
		if err := app.CheckMemory(path, c); err != nil {
			return err
		}
		in := storage.NewMemory{StoreID: storeID, Path: path, Content: c, By: by}
		m, err := storage.CreateMemoryIn(ctx, tx, in, in.ContentSHA256())
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		for v := 2; v <= sh.Versions; v++ {
			c := loadgen.Content(sh.ContentBytes, path, v)
			up := storage.MemoryUpdate{StoreID: storeID, MemoryID: m.ID, Content: &c, By: by}
			if _, _, err := storage.UpdateMemoryIn(ctx, tx, up, up.ContentSHA256()); err != nil {
				return fmt.Errorf("update %s to version %d: %w", path, v, err)
			}
		}
	}
	return nil
}
