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
	c := shardSet[*memoryWrite]{shards: make([]shard[*memoryWrite], 2), gather: spreadAbove}
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

// Appends go to their session's own shard from the first, however few
// wait: each shard's appenders come back while the other's batch runs.
func TestAppendsSpreadOverTheShardsFromTheFirst(t *testing.T) {
	c := newSessionCommitter()
	n := len(c.shards)
	var id string
	for i := 0; id == ""; i++ {
		if s := fmt.Sprint("sesn_", i); shardOf(s, n) != 0 {
			id = s
		}
	}
	for range 3 {
		if sh := c.join(id); sh != &c.shards[shardOf(id, n)] {
			t.Fatalf("an append with %d waiting went to another shard than its session's", c.waiting.Load())
		}
		c.leave()
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
		first   = true
	)
	b := batching[int]{
		take: func(pending []int) (batch, rest []int) { return slices.Clone(pending), nil },
		size: func(pending []int) int { return len(pending) },
		run: func(batch []int) func() {
			if first {
				first = false
				// A write queues while the first batch runs, which runs
				// long enough that the next leader may wait maxLinger.
				if sh.queue(4) {
					t.Error("a write queued behind a running batch was told to lead")
				}
				time.Sleep(2 * maxLinger)
			}
			return func() { batches <- batch }
		},
	}
	for w := range 3 {
		if lead := sh.queue(w + 1); lead != (w == 0) {
			t.Fatalf("write %d: lead = %v", w+1, lead)
		}
	}
	go sh.lead(b)
	if got := <-batches; len(got) != 3 {
		t.Fatalf("first batch %v, want the 3 writes queued before it", got)
	}
	// Two of the three answered writers come back: with the one queued
	// behind, as many as the first batch carried, but not all.
	sh.queue(5)
	sh.queue(6)
	select {
	case got := <-batches:
		t.Fatalf("batch %v left with one of its writers still to come back", got)
	case <-time.After(maxLinger / 5):
	}
	sh.queue(7)
	if got := <-batches; len(got) != 4 {
		t.Fatalf("second batch %v, want 4: the write queued behind the first and its 3 writers back", got)
	}
}

// The crowd a batch waits for is the batch its writers and those queued
// behind would make: for appends one per session, so several writers of
// one session make a crowd of one (waiting for them held every batch up
// by a wasted wait); none once many write.
func TestTheCrowdIsTheBatchTheWritersWouldMake(t *testing.T) {
	appends := func(sessions ...string) []*sessionWrite {
		var out []*sessionWrite
		for _, s := range sessions {
			out = append(out, &sessionWrite{sessionID: s})
		}
		return out
	}
	writes := func(n int) []*memoryWrite { return make([]*memoryWrite, n) }
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"appends: one session's writer answered, two more queued", nextCrowd(appends("a"), appends("a", "a"), sessionBatchSize), 1},
		{"appends: three sessions answered, a fourth queued", nextCrowd(appends("a", "b", "c"), appends("d"), sessionBatchSize), 4},
		{"appends: many writing", nextCrowd(appends("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"), appends("k", "l", "m", "n", "o", "p", "q"), sessionBatchSize), 0},
		{"memory writes: three answered, one queued", nextCrowd(writes(3), writes(1), memoryBatchSize), 4},
		{"memory writes: many writing", nextCrowd(writes(12), writes(5), memoryBatchSize), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: crowd %d, want %d", c.name, c.got, c.want)
		}
	}
}
