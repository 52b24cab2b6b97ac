package postgres

import (
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Memory writes and session appends wait on shards for their batch. A
// shard runs one batch at a time: the write that finds it idle leads, runs
// a batch of what waits, then hands the lead to a new goroutine when more
// wait, so the caller that led returns with its own answer rather than
// serving others for as long as they come.
//
// While few memory writes wait they all go to the first shard, one batch
// at a time; when more wait, they spread by their store's id, so the
// writes to one store batch together while the others commit in parallel
// on their own connections. Few writers spread over two shards made
// batches of two or three writes, each paying its BEGIN, its stores'
// locks, counters and path checks and its COMMIT (8 clients on 100
// stores: creates 0.35–0.39 of raw inserts, 0.45–0.48 on one shard; again
// on 2026-12-04, 0.34–0.37 against 0.45–0.49, the backends' CPU per create
// 0.23–0.28 ms against 0.15–0.18), while many on one shard lost the
// parallel commits (64 clients on 100 stores: updates 0.87–0.88, 0.75–0.80
// on one shard). A store whose writes land on two shards at the switch has
// two batches locking its row, in id order, as two replicas' batches do
// (TestAStoresWritesOnTwoShardsAtOnceLoseNothing).
//
// Appends spread by their session's id from the first: a batch of appends
// pays little of its own (its BEGIN, one lock statement, its COMMIT), and
// with all of them on one shard, the appenders of one batch waited while
// its backend ran their statements one after another, then the backend
// waited for them. On two shards each shard's appenders come back while
// the other's batch runs: 8 clients sent 1,878–2,394 appends/s against
// 1,529–2,103 on one shard, more in each of seven runs taken in turn
// (docs/postgresql-performance.md). A session's appends all go to one
// shard of a server.

// commitShards is how many batches of one kind may commit at once: as
// many as the server has cores, and at least two, so one batch's COMMIT
// can wait for its WAL flush while another runs. More shards than that
// bought nothing but smaller batches: with writes spread over many stores,
// 16 shards made nearly every batch one write, and the database spent
// about a third more CPU per write (docs/postgresql-performance.md).
func commitShards() int { return max(2, runtime.GOMAXPROCS(0)) }

// spreadAbove is how many memory writes may wait before they spread over
// the shards, and how many make a crowd too large to wait for (nextCrowd).
const spreadAbove = 16

// maxLinger bounds a leader's wait for the writers of the last batch.
const maxLinger = 50 * time.Millisecond

// shardOf is the shard, of n, of the store or session id.
func shardOf(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// shardSet is the shards of one kind of write, and how many wait.
type shardSet[W any] struct {
	shards []shard[W]
	// gather is how many waiting writes go to the first shard before
	// they spread by id (0: they spread from the first).
	gather int64
	// waiting counts the writes between join and leave.
	waiting atomic.Int64
}

func newShardSet[W any](gather int64) shardSet[W] {
	return shardSet[W]{shards: make([]shard[W], commitShards()), gather: gather}
}

// join counts a write to id as waiting and returns the shard it joins;
// leave, once it is answered, must follow.
func (c *shardSet[W]) join(id string) *shard[W] {
	if c.waiting.Add(1) <= c.gather {
		return &c.shards[0]
	}
	return &c.shards[shardOf(id, len(c.shards))]
}

func (c *shardSet[W]) leave() { c.waiting.Add(-1) }

// shard queues writes for their batch.
type shard[W any] struct {
	mu      sync.Mutex
	pending []W
	leading bool
	// crowd is how many writes the next batch waits for (nextCrowd) and
	// lastTook how long the last batch took. arrived, when set, is closed
	// by the next write to queue, waking a leader that lingers.
	crowd    int
	lastTook time.Duration
	arrived  chan struct{}
}

// queue adds w to the shard and reports whether the caller is to lead.
func (sh *shard[W]) queue(w W) (lead bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.pending = append(sh.pending, w)
	lead = !sh.leading
	sh.leading = true
	if sh.arrived != nil {
		close(sh.arrived)
		sh.arrived = nil
	}
	return lead
}

// batching is how one kind of write forms, runs and answers its batches.
type batching[W any] struct {
	// take splits the waiting writes into the next batch and the rest;
	// size is how many of them the next batch would carry.
	take func(pending []W) (batch, rest []W)
	size func(pending []W) int
	// run runs a batch to its outcome and returns what answers its
	// writes; it must not panic.
	run func(batch []W) (answer func())
}

// lead runs one batch, then hands the lead on if writes wait.
func (sh *shard[W]) lead(b batching[W]) {
	sh.mu.Lock()
	sh.linger(b.size)
	batch, rest := b.take(sh.pending)
	sh.pending = rest
	sh.mu.Unlock()

	start := time.Now()
	answer := b.run(batch)

	sh.mu.Lock()
	// The writes queued behind the batch are counted before its answers
	// go out: a writer answered first could queue again and be counted
	// twice, in the batch and behind it, making a crowd that never comes.
	sh.crowd, sh.lastTook = nextCrowd(batch, sh.pending, b.size), time.Since(start)
	answer()
	if len(sh.pending) > 0 {
		go sh.lead(b)
	} else {
		sh.leading = false
	}
	sh.mu.Unlock()
}

// linger waits, with sh.mu held on entry and return, until the waiting
// writes would make a batch of the crowd (while few write: nextCrowd): the
// writers of the last batch were answered together and send their next
// writes together, and a batch that left without them would make them
// wait for its whole round trips and COMMIT. It waits at most as long as
// the last batch took, and maxLinger: a writer that does not come back
// costs the next batch at most that, and makes the crowd smaller after.
func (sh *shard[W]) linger(size func([]W) int) {
	if sh.crowd == 0 || size(sh.pending) >= sh.crowd {
		return
	}
	t := time.NewTimer(min(sh.lastTook, maxLinger))
	defer t.Stop()
	for size(sh.pending) < sh.crowd {
		sh.arrived = make(chan struct{})
		arrived := sh.arrived
		sh.mu.Unlock()
		select {
		case <-arrived:
			sh.mu.Lock()
		case <-t.C:
			sh.mu.Lock()
			sh.arrived = nil
			return
		}
	}
	sh.arrived = nil
}

// nextCrowd is how many writes the batch after batch waits for, behind
// having queued while batch ran. While few write, it is the batch that
// batch's writers, come back, and those behind would make together: each
// sends its next write when answered, and those behind wait already. A batch that waited only for as many writes as the last one
// carried left the last of them behind every time (8 clients on one store
// made batches of 5–7 writes on average; waiting for all, 7.9; and with
// no wait at all creates on one store ran 0.39–0.42 of raw inserts,
// against 0.44–0.46 waiting for as many as the last batch). Appends to
// one session go one to a batch, so several writers of one session make a
// crowd of one. While many write, it is zero: they fill the next batch
// anyway, and waiting for the answered ones to come back only delayed it
// (64 clients: appends 0.63–0.73 of raw waiting, 0.73–0.76 not; creates
// on 100 stores 0.51–0.61 and 0.60–0.84).
func nextCrowd[W any](batch, behind []W, size func([]W) int) int {
	if len(batch)+len(behind) > spreadAbove {
		return 0
	}
	return size(slices.Concat(batch, behind))
}
