package workerbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// rig is a real `memstore serve` with an admin client and a scripted
// agent. Its mount prefix is a folder of its own, which the official
// worker uses verbatim, so neither worker needs /mnt/memory.
type rig struct {
	b   *testing.B
	bin string
	// workerBin is memstore-worker, the worker alone, built as a worker
	// host would build it (static, CGO_ENABLED=0).
	workerBin string
	baseURL   string
	mnt       string
	admin     *client.Client
	agent     *api.Agent
}

func startRig(b *testing.B) *rig {
	dir := b.TempDir()
	r := &rig{b: b, bin: filepath.Join(dir, "memstore"), workerBin: filepath.Join(dir, "memstore-worker"), mnt: filepath.Join(dir, "mnt")}
	if out, err := exec.Command("go", "build", "-o", r.bin, "github.com/memstore/memstore/cmd/memstore").CombinedOutput(); err != nil {
		b.Fatalf("build memstore: %v\n%s", err, out)
	}
	build := exec.Command("go", "build", "-o", r.workerBin, "github.com/memstore/memstore/cmd/memstore-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build memstore-worker: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := filepath.Join(dir, "data")
	srv := exec.Command(r.bin, "serve", "--data", data, "--addr", addr, "--mount-prefix", r.mnt,
		"--max-requests-per-address", "-1", "--max-requests-per-key", "-1")
	srv.Env = append(os.Environ(), "MEMSTORE_ADMIN_KEY=")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	r.baseURL = "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(r.baseURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the server did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		b.Fatal(err)
	}
	if r.admin, err = client.New(r.baseURL, client.WithAPIKey(strings.TrimSpace(string(key)))); err != nil {
		b.Fatal(err)
	}
	if r.agent, err = r.admin.CreateAgent(context.Background(), api.CreateAgentRequest{Name: "bench", Model: api.ModelConfig{ID: api.ScriptedModel}}); err != nil {
		b.Fatal(err)
	}
	return r
}

// store creates a store of n memories of size bytes, /dNN/mNNNN.md, written
// by 16 writers at once.
func (r *rig) store(name string, n, size int) string {
	ctx := context.Background()
	st, err := r.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: name})
	if err != nil {
		r.b.Fatal(err)
	}
	body := strings.Repeat("memory text ", size/12) + "\n"
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if _, err := r.admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: fmt.Sprintf("/d%02d/m%04d.md", i%20, i), Content: body}); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	return st.ID
}

// fleet is the worker processes of one kind serving one environment.
type fleet struct {
	kind  string
	env   *api.Environment
	procs []*exec.Cmd
}

// startFleet starts the memstore worker (one memstore-worker process
// serving up to n sessions) or n official workers (one process each, as the official
// worker serves one session at a time).
func (r *rig) startFleet(kind string, n int) *fleet {
	ctx := context.Background()
	env, err := r.admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: kind})
	if err != nil {
		r.b.Fatal(err)
	}
	ek, err := r.admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: kind})
	if err != nil {
		r.b.Fatal(err)
	}
	f := &fleet{kind: kind, env: env}
	base := append(os.Environ(), "ANTHROPIC_BASE_URL="+r.baseURL, "ANTHROPIC_ENVIRONMENT_ID="+env.ID, "ANTHROPIC_ENVIRONMENT_KEY="+ek.Key)
	start := func(cmd *exec.Cmd, env ...string) {
		cmd.Env = append(slices.Clone(base), append(env, "ANTHROPIC_WORKDIR="+r.b.TempDir())...)
		if err := cmd.Start(); err != nil {
			r.b.Fatal(err)
		}
		f.procs = append(f.procs, cmd)
	}
	if kind == "memstore" {
		cmd := exec.Command(r.workerBin, "poll", "--sandbox", "none", "--max-sessions", strconv.Itoa(n), "--memory-sync-interval", "5s", "--max-idle", "1s")
		if path := os.Getenv("WORKERBENCH_LOG"); path != "" {
			// The memstore worker's log, for a run that needs looking into.
			logFile, err := os.Create(path)
			if err != nil {
				r.b.Fatal(err)
			}
			r.b.Cleanup(func() { logFile.Close() })
			cmd.Stderr = logFile
		}
		start(cmd)
	} else {
		for i := range n {
			start(exec.Command(os.Args[0]), roleVar+"="+officialRole, fmt.Sprintf("WORKERBENCH_WORKER_ID=official-%d", i))
		}
	}
	r.b.Cleanup(func() { f.stop() })
	return f
}

// rss is the fleet's resident memory now (VmRSS): the workers' own, not
// the shells they start.
func (f *fleet) rss() int64 { return f.sum("VmRSS:") }

// anon is the anonymous part of rss (RssAnon): what the workers allocated,
// without the pages of their executables, which the memstore worker shares
// with the server when both run from one binary.
func (f *fleet) anon() int64 { return f.sum("RssAnon:") }

func (f *fleet) sum(field string) int64 {
	var sum int64
	for _, p := range f.procs {
		sum += processStatus(p.Process.Pid, field)
	}
	return sum
}

// stop ends the fleet with SIGTERM and returns the CPU seconds its
// processes used, the shells they waited for included.
func (f *fleet) stop() float64 {
	var cpu float64
	for _, p := range f.procs {
		if p.ProcessState == nil {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
		cpu += (p.ProcessState.UserTime() + p.ProcessState.SystemTime()).Seconds()
	}
	return cpu
}

// processStatus reads a size field of a process's /proc status, in bytes
// (0 once it has gone).
func processStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// peakWatch samples sample every 20 ms until stopped and returns the peak.
func peakWatch(sample func() int64) (stop func() int64) {
	var peak int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, sample())
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(quit); <-done; return peak }
}

// mixedScript is the scripted agent's turn for a session whose store is
// mounted at dir: reads, writes, edits, searches and shell commands over
// the store, twice over, then the end of the session.
func mixedScript(dir string) string {
	var calls []string
	for round := range 2 {
		own := fmt.Sprintf("%s/notes-%d.md", dir, round)
		calls = append(calls,
			fmt.Sprintf(`{"name":"read","input":{"file_path":"%s/d%02d/m%04d.md"}}`, dir, round, round),
			fmt.Sprintf(`{"name":"bash","input":{"command":"ls %s/d0%d | wc -l && grep -rl text %s/d1%d | head -3"}}`, dir, round, dir, round),
			fmt.Sprintf(`{"name":"write","input":{"file_path":"%s","content":"round %d\n"}}`, own, round),
			fmt.Sprintf(`{"name":"edit","input":{"file_path":"%s","old_string":"round","new_string":"edited round"}}`, own),
			fmt.Sprintf(`{"name":"grep","input":{"pattern":"edited","path":"%s"}}`, dir),
			fmt.Sprintf(`{"name":"bash","input":{"command":"echo from bash >> %s/bash-%d.md && cat %s"}}`, dir, round, own),
		)
	}
	return `{"tool_calls":[` + strings.Join(calls, ",") + `],"end":"terminate"}`
}

// sessionTimes are one session's figures from the server's timestamps:
// the claim (the item's acknowledgement) to the first tool result, the
// session's creation to it (the wait in the queue included), and each
// call's latency, from when it could start (its tool_use, or the previous
// call's result if later) to its result.
func (r *rig) sessionTimes(sessionID, envID string) (firstResult, fromCreated time.Duration, calls []time.Duration) {
	ctx := context.Background()
	sess, err := r.admin.GetSession(ctx, sessionID)
	if err != nil {
		r.b.Fatal(err)
	}
	var acked time.Time
	for w, err := range r.admin.ListAllWork(ctx, envID, api.WorkListParams{}) {
		if err != nil {
			r.b.Fatal(err)
		}
		if w.Data.ID == sessionID && w.AcknowledgedAt != nil && (acked.IsZero() || w.AcknowledgedAt.Before(acked)) {
			acked = *w.AcknowledgedAt
		}
	}
	uses := map[string]time.Time{}
	var prev time.Time
	for e, err := range r.admin.ListAllEvents(ctx, sessionID, api.EventListParams{Limit: 1000}) {
		if err != nil {
			r.b.Fatal(err)
		}
		if e.ProcessedAt == nil {
			continue
		}
		switch e.Type {
		case api.EventAgentToolUse:
			uses[e.ID] = *e.ProcessedAt
		case api.EventUserToolResult:
			if firstResult == 0 {
				firstResult = e.ProcessedAt.Sub(acked)
				fromCreated = e.ProcessedAt.Sub(sess.CreatedAt)
			}
			from := uses[e.ToolUseID]
			if prev.After(from) {
				from = prev
			}
			calls = append(calls, e.ProcessedAt.Sub(from))
			prev = *e.ProcessedAt
		}
	}
	return firstResult, fromCreated, calls
}

// percentile is the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (r *rig) waitStopped(envID string, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		stopped := 0
		for w, err := range r.admin.ListAllWork(context.Background(), envID, api.WorkListParams{}) {
			if err != nil {
				r.b.Fatal(err)
			}
			if w.State == api.WorkStopped {
				stopped++
			}
		}
		if stopped >= n {
			return
		}
		if time.Now().After(deadline) {
			r.b.Fatalf("%d of %d sessions ended in %v", stopped, n, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// loadAverage is the host's 1, 5 and 15 minute load averages, printed
// beside the figures: latencies on a busy host say more about the host.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// BenchmarkFleet serves N concurrent sessions (WORKERBENCH_SESSIONS,
// default 32), each with a store of its own of 500 memories and a mixed
// script of 12 calls, first with N official-worker processes, then with
// one `memstore worker poll --max-sessions N`, against the same server,
// and prints total RSS, CPU seconds, claim → first tool result p50/p95 and
// tool-call latency p95 for both. Run it with
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./internal/workerbench/
func BenchmarkFleet(b *testing.B) {
	n := 32
	if v, err := strconv.Atoi(os.Getenv("WORKERBENCH_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		r := startRig(b)
		stores := make([]string, 2*n)
		for i := range stores {
			stores[i] = r.store(fmt.Sprint("fleet ", i), 500, 1024)
		}
		type figures struct {
			idle, peak             int64
			idleAnon, peakAnon     int64
			cpu                    float64
			first50, first95, call time.Duration
			created95              time.Duration
			took                   time.Duration
		}
		run := func(kind string, stores []string) figures {
			var f figures
			fl := r.startFleet(kind, n)
			time.Sleep(2 * time.Second)
			f.idle, f.idleAnon = fl.rss(), fl.anon()
			peak, peakAnon := peakWatch(fl.rss), peakWatch(fl.anon)
			start := time.Now()
			var sessions []string
			for _, st := range stores {
				s, err := r.admin.CreateSession(context.Background(), api.CreateSessionRequest{Agent: api.AgentRef{ID: r.agent.ID}, EnvironmentID: fl.env.ID,
					Resources: []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: st}}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.admin.SendEvents(context.Background(), s.ID, api.UserMessage(mixedScript(s.Resources[0].MountPath))); err != nil {
					b.Fatal(err)
				}
				sessions = append(sessions, s.ID)
			}
			r.waitStopped(fl.env.ID, n, 10*time.Minute)
			f.took = time.Since(start)
			f.peak, f.peakAnon = peak(), peakAnon()
			f.cpu = fl.stop()
			var firsts, fromCreated, calls []time.Duration
			for _, s := range sessions {
				first, created, c := r.sessionTimes(s, fl.env.ID)
				if len(c) != 12 {
					b.Fatalf("%s: session %s got %d tool results, want 12", kind, s, len(c))
				}
				firsts, calls = append(firsts, first), append(calls, c...)
				fromCreated = append(fromCreated, created)
			}
			f.first50, f.first95, f.call = percentile(firsts, 50), percentile(firsts, 95), percentile(calls, 95)
			f.created95 = percentile(fromCreated, 95)
			return f
		}
		off := run("official", stores[:n])
		ms := run("memstore", stores[n:])
		fmt.Printf("\n%d concurrent sessions, 500 memories each, 12 calls (read, write, edit, grep, bash); %d CPUs; load average %s\n", n, runtime.NumCPU(), loadAverage())
		fmt.Printf("%-40s %-22s %-22s %s\n", "figure", fmt.Sprintf("official (%d procs)", n), "memstore (1 proc)", "memstore/official")
		row := func(name string, o, m float64, show func(float64) string) {
			fmt.Printf("%-40s %-22s %-22s %.2f×\n", name, show(o), show(m), m/o)
		}
		bytes := func(v float64) string { return mib(int64(v)) }
		dur := func(v float64) string { return time.Duration(v).Round(time.Millisecond).String() }
		secs := func(v float64) string { return fmt.Sprintf("%.1f s", v) }
		row("idle RSS, total", float64(off.idle), float64(ms.idle), bytes)
		row("peak RSS, total", float64(off.peak), float64(ms.peak), bytes)
		row("idle RSS anonymous, total", float64(off.idleAnon), float64(ms.idleAnon), bytes)
		row("peak RSS anonymous, total", float64(off.peakAnon), float64(ms.peakAnon), bytes)
		row("CPU seconds (workers and their shells)", off.cpu, ms.cpu, secs)
		row("claim → first tool result p50", float64(off.first50), float64(ms.first50), dur)
		row("claim → first tool result p95", float64(off.first95), float64(ms.first95), dur)
		row("session created → first tool result p95", float64(off.created95), float64(ms.created95), dur)
		row("tool-call latency p95", float64(off.call), float64(ms.call), dur)
		row("all sessions ended after", float64(off.took), float64(ms.took), dur)
	}
}

// BenchmarkSessionMemory measures, for each kind of worker in a process
// of its own, the resident memory of an idle worker and the peak while it
// serves one session with 8 stores of 2,000 memories (4 KB each) through
// its mount and a short turn. Run it with
//
//	go test -run '^$' -bench SessionMemory -benchtime 1x ./internal/workerbench/
func BenchmarkSessionMemory(b *testing.B) {
	for b.Loop() {
		r := startRig(b)
		var stores []api.SessionResourceParams
		for i := range 8 {
			stores = append(stores, api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: r.store(fmt.Sprint("big ", i), 2000, 4096)})
		}
		measure := func(kind string) (idle, peak, idleAnon, peakAnon int64) {
			fl := r.startFleet(kind, 1)
			time.Sleep(3 * time.Second)
			idle, idleAnon = fl.rss(), fl.anon()
			watch, watchAnon := peakWatch(fl.rss), peakWatch(fl.anon)
			_, err := r.admin.CreateSession(context.Background(), api.CreateSessionRequest{Agent: api.AgentRef{ID: r.agent.ID}, EnvironmentID: fl.env.ID,
				Resources:     stores,
				InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}],"end":"terminate"}`)}})
			if err != nil {
				b.Fatal(err)
			}
			r.waitStopped(fl.env.ID, 1, 10*time.Minute)
			peak, peakAnon = watch(), watchAnon()
			fl.stop()
			return idle, peak, idleAnon, peakAnon
		}
		offIdle, offPeak, offIdleAnon, offPeakAnon := measure("official")
		msIdle, msPeak, msIdleAnon, msPeakAnon := measure("memstore")
		fmt.Printf("\none session, 8 stores × 2,000 memories × 4 KB; a worker process of each kind; load average %s\n", loadAverage())
		fmt.Printf("%-28s %-14s %-14s %s\n", "figure", "official", "memstore", "goal (memstore)")
		fmt.Printf("%-28s %-14s %-14s %s\n", "idle worker RSS", mib(offIdle), mib(msIdle), "≤ 16 MB")
		fmt.Printf("%-28s %-14s %-14s %s\n", "peak RSS serving the session", mib(offPeak), mib(msPeak), "≤ 40 MB")
		fmt.Printf("%-28s %-14s %-14s\n", "idle RSS anonymous", mib(offIdleAnon), mib(msIdleAnon))
		fmt.Printf("%-28s %-14s %-14s\n", "peak RSS anonymous", mib(offPeakAnon), mib(msPeakAnon))
	}
}
