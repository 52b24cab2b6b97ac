package memsync_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
)

// benchMemories is the store size of the benchmarks: a well-used store,
// a fifth of the default per-store limit.
const benchMemories = 2000

// traffic reports a client's traffic per operation.
func traffic(b *testing.B, before, after client.Stats) {
	n := float64(b.N)
	b.ReportMetric(float64(after.Requests-before.Requests)/n, "requests/op")
	b.ReportMetric(float64(after.BytesSent+after.BytesReceived-before.BytesSent-before.BytesReceived)/n, "bytes/op")
}

func add(a, b client.Stats) client.Stats {
	return client.Stats{Requests: a.Requests + b.Requests, Retries: a.Retries + b.Retries,
		BytesSent: a.BytesSent + b.BytesSent, BytesReceived: a.BytesReceived + b.BytesReceived}
}

// BenchmarkMount downloads a 2,000-memory store into a fresh folder, the way
// a session starts. The "basic+get" variant measures, for comparison, the
// traffic of the other way to read a whole store — a basic listing and one
// GET per memory, 16 in flight — without writing anything: Mount uses the
// full listing because it moves the same content in far fewer requests.
func BenchmarkMount(b *testing.B) {
	e := newEnv(b)
	fill(b, e, benchMemories)
	b.Run("full-listing", func(b *testing.B) { benchMounts(b, e) })
	b.Run("basic+get", func(b *testing.B) {
		c := e.quietSession(b.TempDir())
		before := c.stats()
		for b.Loop() {
			if n := readWithGets(b, e.ctx, c.client, e.storeID); n != benchMemories {
				b.Fatalf("read %d memories", n)
			}
		}
		traffic(b, before, c.stats())
	})
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMountSnapshot is BenchmarkMount from a memstore server: one
// snapshot request, the way the fleet's sessions start.
func BenchmarkMountSnapshot(b *testing.B) {
	e := newFeedEnv(b)
	fill(b, e, benchMemories)
	benchMounts(b, e)
}

// benchMounts mounts the env's store into a fresh folder b.N times and
// reports the traffic and the process's CPU per mount.
func benchMounts(b *testing.B, e *env) {
	var total client.Stats
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := e.quietSession(b.TempDir())
		b.StartTimer()
		before := processCPU(b)
		if err := m.Mount(e.ctx); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - before
		b.StopTimer()
		total = add(total, m.stats())
		m.End(e.ctx, false)
		b.StartTimer()
	}
	traffic(b, client.Stats{}, total)
	// The worker's and the in-process server's CPU together: a figure the
	// host's load moves less than the time.
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// readWithGets reads every memory's content with a basic listing and one
// GET each, 16 at a time, and returns how many it read.
func readWithGets(b *testing.B, ctx context.Context, c *client.Client, storeID string) int {
	var ids []string
	for it, err := range c.ListAllMemories(ctx, storeID, client.ListMemoriesParams{View: api.ViewBasic, Limit: 100}) {
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, it.Memory.ID)
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := c.GetMemory(ctx, storeID, id, client.GetMemoryParams{View: api.ViewFull}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return len(ids)
}

// BenchmarkIdleSync syncs a mounted 2,000-memory store in which nothing
// changed: one basic listing per 100 memories, no content moved, no file
// read or written.
func BenchmarkIdleSync(b *testing.B) {
	e := newEnv(b)
	fill(b, e, benchMemories)
	m := e.quietSession(b.TempDir())
	if err := m.Mount(e.ctx); err != nil {
		b.Fatal(err)
	}
	defer m.End(e.ctx, false)
	// The hash cache does not trust a file changed less than two seconds
	// ago (a later write in the same timestamp tick would go unseen); a
	// folder between two syncs is older than that, so the cache is told
	// the files are past that window, and a first sync fills it.
	m.SkipRacyWindow()
	m.Sync(e.ctx)
	before, hashed := m.stats(), m.FilesHashed()
	for b.Loop() {
		e.clock.Advance(memsync.DefaultInterval)
		m.SyncIfDue(e.ctx)
	}
	traffic(b, before, m.stats())
	b.ReportMetric(float64(m.FilesHashed()-hashed)/float64(b.N), "files-hashed/op")
}

var discard = slog.New(slog.DiscardHandler)

// quietSession is a session whose log is discarded, so the benchmark
// measures the sync rather than the logging.
func (e *env) quietSession(root string) *benchMount {
	e.t.Helper()
	c := e.sessionClient(http.DefaultTransport)
	s, err := memsync.NewSession(memsync.SessionConfig{
		Client: c,
		Now:    e.clock.Now,
		Logger: discard,
		Stores: []memsync.StoreMount{{MemoryStoreID: e.storeID, Name: "Notes", MountPath: "/mnt/memory/notes", Dir: filepath.Join(root, "notes")}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return &benchMount{Session: s, client: c}
}

type benchMount struct {
	*memsync.Session
	client *client.Client
}

func (m *benchMount) stats() client.Stats { return m.client.Stats() }
