package postgres

import (
	"fmt"
	"testing"
)

// Few writes waiting share one shard, so they commit in one batch rather
// than two small ones; past spreadAbove they go to their stores' own
// shards, which commit in parallel; and as they are answered the writes
// gather on one shard again.
func TestWritesSpreadOverTheShardsOnlyWhenManyWait(t *testing.T) {
	c := committer{shards: make([]commitShard, 2)}
	// Stores whose own shard is the second.
	var stores []string
	for i := 0; len(stores) < spreadAbove+2; i++ {
		if id := fmt.Sprint("memstore_", i); shardOf(id, 2) == 1 {
			stores = append(stores, id)
		}
	}
	for i, id := range stores[:spreadAbove] {
		if sh := c.shardFor(id); sh != &c.shards[0] {
			t.Fatalf("write %d of %d waiting went to the store's own shard; want the first, which batches it with the others", i+1, spreadAbove)
		}
	}
	if sh := c.shardFor(stores[spreadAbove]); sh != &c.shards[1] {
		t.Fatalf("write %d waiting went to the first shard; want its store's own, to commit beside the first", spreadAbove+1)
	}
	for range spreadAbove + 1 {
		c.writing.Add(-1) // answered
	}
	if sh := c.shardFor(stores[spreadAbove+1]); sh != &c.shards[0] {
		t.Fatal("a write alone after the crowd was answered went to its store's own shard; want the first")
	}
}
