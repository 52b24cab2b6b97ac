package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Few writes waiting share one shard, so they commit in one batch rather
// than two small ones; past spreadAbove they go to their stores' own
// shards, which commit in parallel; and as they are answered the writes
// gather on one shard again.
func TestWritesSpreadOverTheShardsOnlyWhenManyWait(t *testing.T) {
	c := shardSet[*memoryWrite]{shards: make([]shard[*memoryWrite], 2)}
	// Stores whose own shard is the second.
	var stores []string
	for i := 0; len(stores) < spreadAbove+2; i++ {
		if id := fmt.Sprint("memstore_", i); shardOf(id, 2) == 1 {
			stores = append(stores, id)
		}
	}
	for i, id := range stores[:spreadAbove] {
		if sh := c.join(id); sh != &c.shards[0] {
			t.Fatalf("write %d of %d waiting went to the store's own shard; want the first, which batches it with the others", i+1, spreadAbove)
		}
	}
	if sh := c.join(stores[spreadAbove]); sh != &c.shards[1] {
		t.Fatalf("write %d waiting went to the first shard; want its store's own, to commit beside the first", spreadAbove+1)
	}
	for range spreadAbove + 1 {
		c.leave() // answered
	}
	if sh := c.join(stores[spreadAbove+1]); sh != &c.shards[0] {
		t.Fatal("a write alone after the crowd was answered went to its store's own shard; want the first")
	}
}

// A batch waits for the writers the last one answered and for those that
// queued behind it while it ran: few writers each send their next write
// on their answer, and a batch that left when as many as it answered had
// come back left the last of them behind, to wait a whole batch.
func TestABatchWaitsForTheWritersAnsweredAndThoseQueuedBehind(t *testing.T) {
	var (
		sh      shard[int]
		batches = make(chan []int, 4)
		queued  = make(chan struct{})
		first   = true
	)
	take := func(pending []int) (batch, rest []int) { return slices.Clone(pending), nil }
	commit := func(batch []int) {
		if first {
			first = false
			// A write queues while the first batch runs, which runs long
			// enough that the next leader waits for its writers as long
			// as it may (maxLinger).
			if sh.queue(4) {
				t.Error("a write queued behind a running batch was told to lead")
			}
			close(queued)
			time.Sleep(2 * maxLinger)
		}
		batches <- batch
	}
	for w := range 3 {
		if lead := sh.queue(w + 1); lead != (w == 0) {
			t.Fatalf("write %d: lead = %v", w+1, lead)
		}
	}
	go sh.lead(take, commit)
	<-queued
	if got := <-batches; len(got) != 3 {
		t.Fatalf("first batch %v, want the 3 writes queued before it", got)
	}
	// The three answered writers come back one by one, well within
	// maxLinger.
	for w := range 3 {
		time.Sleep(maxLinger / 25)
		sh.queue(5 + w)
	}
	if got := <-batches; len(got) != 4 {
		t.Fatalf("second batch %v, want 4: the write queued behind the first and its 3 writers back", got)
	}
}
