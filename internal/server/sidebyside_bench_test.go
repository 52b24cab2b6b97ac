package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/worker"
)

// BenchmarkSideBySide runs the official SDK's EnvironmentWorker and
// memstore's worker, one after the other, against the same in-process
// memstore server and the same 2,000 × 4 KB store (and a store of 8,000
// for the idle sync and the delay it adds), and prints the issue's
// figures for both with their ratio. The server's mount prefix is a
// temporary folder, which the official worker uses verbatim, so neither
// needs /mnt/memory. It takes a few minutes (the official worker's
// shortest sync interval is 5 s of real time); run it with
//
//	go test -run '^$' -bench SideBySide -benchtime 1x ./internal/server/
func BenchmarkSideBySide(b *testing.B) {
	for b.Loop() {
		sideBySide(b)
	}
}

// trafficCounter counts the requests and response bytes of the memory
// endpoints, leaving out the change feed's long polls (a follower waiting,
// not a sync).
type trafficCounter struct {
	mu              sync.Mutex
	requests, bytes int64
}

func (c *trafficCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/memory_stores/") || r.URL.Query().Get("wait_ms") != "" {
			h.ServeHTTP(w, r)
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		c.mu.Lock()
		c.requests++
		c.bytes += cw.n
		c.mu.Unlock()
	})
}

func (c *trafficCounter) take() (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, n := c.requests, c.bytes
	c.requests, c.bytes = 0, 0
	return r, n
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type sideFigures struct {
	mount                 time.Duration
	mountReqs, mountBytes int64
	idleReqs, idleBytes   int64
	// syncDelay is how much longer the gap between two tool calls is when
	// a periodic sync is due between them than when none is.
	syncDelay time.Duration
	// heapPeak is the process's peak heap in use during the mount, over
	// what it held before; server and worker share the process.
	heapPeak uint64
}

// heapWatch samples the heap in use until stopped and returns its peak
// above the level at the start.
func heapWatch() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return peak - base
	}
}

func sideBySide(b *testing.B) {
	const memories, bigMemories, size = 2000, 8000, 4096
	ctx := context.Background()
	dir := b.TempDir()
	mnt := filepath.Join(dir, "mnt", "memory")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		b.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "memstore.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	counter := &trafficCounter{}
	hs := httptest.NewUnstartedServer(nil)
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	defer a.Close()
	srv := server.New(server.Config{App: a, MountPrefix: mnt, PublicBaseURL: "http://" + hs.Listener.Addr().String()})
	hs.Config.Handler = counter.wrap(srv.Handler())
	hs.Start()
	defer hs.Close()
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(hs.URL, client.WithAPIKey(key))
	if err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	actor := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_bench"}
	body := strings.Repeat("m", size-1) + "\n"
	src := filepath.Join(dir, "src")
	var stores []string
	for n := range 8 {
		st, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: fmt.Sprint("Bench ", n)})
		must(err)
		stores = append(stores, st.ID)
		for i := range memories {
			p := fmt.Sprintf("/d%02d/m%04d.md", i%20, i)
			_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: p, Content: body, By: actor, MaxMemories: memories})
			must(err)
			if n == 0 {
				must(os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o700))
				must(os.WriteFile(filepath.Join(src, p), []byte(body), 0o600))
			}
		}
	}
	// The delay row is also measured on a store of 8,000, written by 8
	// writers at once so that group commit makes the seeding quick.
	big, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Bench 8000"})
	must(err)
	var seed sync.WaitGroup
	for w := range 8 {
		seed.Go(func() {
			for i := w; i < bigMemories; i += 8 {
				_, err := db.CreateMemory(ctx, storage.NewMemory{StoreID: big.ID, Path: fmt.Sprintf("/d%02d/m%04d.md", i%80, i), Content: body, By: actor, MaxMemories: bigMemories})
				if err != nil {
					panic(err)
				}
			}
		})
	}
	seed.Wait()
	start := time.Now()
	must(exec.Command("cp", "-r", src, filepath.Join(dir, "copy")).Run())
	cp := time.Since(start)
	agent, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "bench", Model: api.ModelConfig{ID: api.ScriptedModel}})
	must(err)

	// run serves one session of the stores with a worker of the given kind
	// and measures it. The session's first turn is one bash call. With
	// turns, delayRounds times: a turn of two calls sent once the worker's
	// shortest sync interval has passed (a sync is due), then one of two
	// more sent at once (none is); the delay is the difference of the
	// median gaps between the two calls of each kind of turn.
	run := func(kind string, stores []string, turns bool) sideFigures {
		var f sideFigures
		env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: kind})
		must(err)
		ek, err := c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: kind})
		must(err)
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		switch kind {
		case "official":
			sdk := anthropic.NewClient(option.WithBaseURL(hs.URL), option.WithAPIKey("unused"), option.WithMaxRetries(1))
			w := environments.NewEnvironmentWorker(sdk, environments.EnvironmentWorkerOptions{
				EnvironmentID: env.ID, EnvironmentKey: ek.Key, WorkerID: kind, Workdir: b.TempDir(),
				MemorySyncInterval: environments.MinMemorySyncInterval, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			go func() { w.Run(wctx); close(done) }()
		default:
			wc, err := client.New(hs.URL)
			must(err)
			w, err := worker.New(worker.Config{Client: wc, EnvironmentID: env.ID, EnvironmentKey: ek.Key, WorkerID: kind, Workdir: b.TempDir(),
				MemorySyncInterval: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			must(err)
			go func() { w.Run(wctx); close(done) }()
		}
		defer func() { stop(); <-done }()
		counter.take()
		heap := heapWatch()
		t0 := time.Now()
		var res []api.SessionResourceParams
		for _, id := range stores {
			res = append(res, api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: id})
		}
		sess, err := c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
			Resources:     res,
			InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)}})
		must(err)
		waitTurns(b, c, sess.ID, 1)
		f.mount = time.Since(t0)
		f.heapPeak = heap()
		f.mountReqs, f.mountBytes = counter.take()
		if turns {
			two := `{"tool_calls":[{"name":"bash","input":{"command":"true"}},{"name":"bash","input":{"command":"true"}}]}`
			var due, notDue []time.Duration
			for round := range delayRounds {
				time.Sleep(5*time.Second + 100*time.Millisecond)
				// The idle sync is the traffic of the first round, its
				// sleep included: each worker syncs only after a tool
				// call, so that is exactly one due sync however long it
				// runs beside or after the turn.
				reqs, bytes := counter.take()
				if round == 1 {
					f.idleReqs, f.idleBytes = reqs, bytes
				}
				_, err = c.SendEvents(ctx, sess.ID, api.UserMessage(two))
				must(err)
				waitTurns(b, c, sess.ID, 2+2*round)
				_, err = c.SendEvents(ctx, sess.ID, api.UserMessage(two))
				must(err)
				waitTurns(b, c, sess.ID, 3+2*round)
				gaps := resultGaps(b, c, sess.ID)
				due, notDue = append(due, gaps[1+2*round]), append(notDue, gaps[2+2*round])
			}
			f.syncDelay = median(due) - median(notDue)
		}
		_, err = c.SendEvents(ctx, sess.ID, api.UserMessage(`{"tool_calls":[],"end":"terminate"}`))
		must(err)
		waitStopped(b, c, env.ID)
		return f
	}
	off, ms := run("official", stores[:1], true), run("memstore", stores[:1], true)
	off8, ms8 := run("official", stores, false), run("memstore", stores, false)
	offBig, msBig := run("official", []string{big.ID}, true), run("memstore", []string{big.ID}, true)
	ratio := func(m, o float64) string {
		if o == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", m/o)
	}
	fmt.Printf("\nside by side, %d memories × %d B, one store (cp -r of the same files: %v)\n", memories, size, cp.Round(time.Millisecond))
	fmt.Printf("%-44s %-18s %-18s %s\n", "figure", "official worker", "memstore", "memstore/official")
	fmt.Printf("%-44s %-18v %-18v %s\n", "mount (session created → first tool result)", off.mount.Round(time.Millisecond), ms.mount.Round(time.Millisecond), ratio(ms.mount.Seconds(), off.mount.Seconds()))
	fmt.Printf("%-44s %-18s %-18s %s\n", "mount requests / bytes", fmt.Sprintf("%d / %.1f MB", off.mountReqs, float64(off.mountBytes)/1e6),
		fmt.Sprintf("%d / %.1f MB", ms.mountReqs, float64(ms.mountBytes)/1e6), ratio(float64(ms.mountBytes), float64(off.mountBytes))+" bytes")
	bySize := []struct {
		n       string
		off, ms sideFigures
	}{{"2,000", off, ms}, {"8,000", offBig, msBig}}
	for _, row := range bySize {
		fmt.Printf("%-44s %-18s %-18s %s\n", "idle sync requests / bytes, "+row.n, fmt.Sprintf("%d / %d B", row.off.idleReqs, row.off.idleBytes),
			fmt.Sprintf("%d / %d B", row.ms.idleReqs, row.ms.idleBytes), ratio(float64(row.ms.idleBytes), float64(row.off.idleBytes))+" bytes")
	}
	for _, row := range bySize {
		fmt.Printf("%-44s %-18v %-18v %s\n", "delay a due sync adds to the next call, "+row.n, row.off.syncDelay.Round(time.Millisecond), row.ms.syncDelay.Round(time.Millisecond), "—")
	}
	fmt.Printf("%-44s %-18v %-18v %s\n", "mount of 8 stores × 2,000", off8.mount.Round(time.Millisecond), ms8.mount.Round(time.Millisecond), ratio(ms8.mount.Seconds(), off8.mount.Seconds()))
	mb := func(n uint64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
	fmt.Printf("%-44s %-18s %-18s %s\n", "heap peak during the 8-store mount²", mb(off8.heapPeak), mb(ms8.heapPeak), ratio(float64(ms8.heapPeak), float64(off8.heapPeak)))
	p50, p95 := propagation(b)
	fmt.Printf("%-44s %-18s %-18s %s\n", "write in session A seen in B, p50 / p95", "not run¹", fmt.Sprintf("%v / %v", p50.Round(time.Millisecond), p95.Round(time.Millisecond)), "—")
	fmt.Printf("content: %.1f MB; memstore mount vs cp -r: %.1f×\n", float64(memories*size)/1e6, ms.mount.Seconds()/cp.Seconds())
	fmt.Println("¹ the official worker mounts at the server's mount_path verbatim, so two sessions of one store cannot share a host")
	fmt.Println("² of the whole process above its level before the mount: the server's share is in both figures")
}

// propagation runs two memstore workers (two mount roots, the default
// interval) serving two sessions of one store, has session A write a file
// per turn, and measures how long each takes from A's folder to B's.
func propagation(b *testing.B) (p50, p95 time.Duration) {
	const samples = 20
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	hs := httptest.NewUnstartedServer(nil)
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	defer a.Close()
	srv := server.New(server.Config{App: a, PublicBaseURL: "http://" + hs.Listener.Addr().String()})
	hs.Config.Handler = srv.Handler()
	hs.Start()
	defer hs.Close()
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	c, _ := client.New(hs.URL, client.WithAPIKey(key))
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	st, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Shared"})
	must(err)
	agent, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "bench", Model: api.ModelConfig{ID: api.ScriptedModel}})
	must(err)
	env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "propagation"})
	must(err)
	ek, err := c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "w"})
	must(err)
	var roots [2]string
	var sessions [2]string
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i := range 2 {
		roots[i] = b.TempDir()
		wc, _ := client.New(hs.URL)
		w, err := worker.New(worker.Config{Client: wc, EnvironmentID: env.ID, EnvironmentKey: ek.Key, WorkerID: fmt.Sprint("w", i),
			// One session each: the two sessions are to run on two hosts
			// (mount roots), not both on the first worker that polls.
			MaxSessions: 1,
			Workdir:     b.TempDir(), MountRoot: roots[i], MaxIdle: -1, Logger: slog.New(slog.DiscardHandler)})
		must(err)
		sess, err := c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
			Resources:     []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: st.ID}},
			InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)}})
		must(err)
		sessions[i] = sess.ID
		wg.Go(func() { w.Run(wctx) })
		waitTurns(b, c, sess.ID, 1) // this worker claimed it before the next starts
	}
	var lat []time.Duration
	for k := range samples {
		name := fmt.Sprintf("note-%02d.md", k)
		_, err := c.SendEvents(ctx, sessions[0], api.UserMessage(`{"tool_calls":[{"name":"write","input":{"file_path":"/mnt/memory/shared/`+name+`","content":"sample"}}]}`))
		must(err)
		written := waitFile(b, filepath.Join(roots[0], "shared", name))
		seen := waitFile(b, filepath.Join(roots[1], "shared", name))
		lat = append(lat, seen.Sub(written))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*95/100]
}

// delayRounds is how many turns with and without a due sync the delay is
// the median of: one sample of each moves by several milliseconds on a
// loaded machine.
const delayRounds = 3 // at least 2: the idle sync is measured over the first

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// waitFile polls for a file and returns when it was first seen.
func waitFile(b *testing.B, path string) time.Time {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never appeared", path)
		}
		time.Sleep(time.Millisecond)
	}
}

// resultGaps returns, per turn that made two tool calls, the time between
// its two results as the server stamped them.
func resultGaps(b *testing.B, c *client.Client, sessionID string) []time.Duration {
	evs, err := c.ListEvents(context.Background(), sessionID, api.EventListParams{Limit: 1000})
	if err != nil {
		b.Fatal(err)
	}
	var gaps []time.Duration
	var prev *time.Time
	for _, e := range evs.Data {
		switch e.Type {
		case api.EventUserToolResult:
			if prev != nil && e.ProcessedAt != nil {
				gaps = append(gaps, e.ProcessedAt.Sub(*prev))
			}
			prev = e.ProcessedAt
		case api.EventSessionStatusIdle:
			prev = nil
		}
	}
	// The first turn made one call: pad so index n is turn n.
	return append([]time.Duration{0}, gaps...)
}

// waitTurns waits until a session has ended n turns.
func waitTurns(b *testing.B, c *client.Client, sessionID string, n int) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		evs, err := c.ListEvents(context.Background(), sessionID, api.EventListParams{Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		turns := 0
		for _, e := range evs.Data {
			if e.Type == api.EventSessionStatusIdle || e.Type == api.EventSessionStatusTerminated {
				turns++
			}
		}
		if turns >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("session %s did not end turn %d", sessionID, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStopped waits until every work item of an environment is stopped.
func waitStopped(b *testing.B, c *client.Client, envID string) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		page, err := c.ListWork(context.Background(), envID, api.WorkListParams{})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Data) > 0 && !slices.ContainsFunc(page.Data, func(w api.Work) bool { return w.State != api.WorkStopped }) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("environment %s: items not stopped", envID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
