package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/faultstop"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/sandbox"
)

// The fault-injection suite: a real server process and a real worker
// process (built with the memstore_faults tag) serve a busy session, and
// something is killed with SIGKILL at a chosen moment of it — the worker,
// the server, or both. The worker stops itself (SIGSTOP) at the moment
// (MEMSTORE_FAULT_AT, see faults_on.go), so the kill lands exactly there,
// never at a random time. Then whatever died is restarted on the same data
// folder, mount root and address, and the session must finish on its own
// with every edit of the agent on the server, one result per tool call, and
// nothing left in the mount root but what the worker keeps by design.

// faultPoints are the moments of the busy session (see busyScript) the
// long run kills at: before the first sync (fetch, mount downloads), around
// tool calls, during the first write-through upload (the later ones race
// with the syncs the follower and the interval start, which may upload the
// file first, so which of them happens is not certain), between scan and
// apply and during uploads and downloads of the mid-session sync, at
// the final sync (whose uploads, in live mode, are only what no earlier
// upload took, so none of them is certain), and as the ended session's
// folder is being removed. (memsync's TestAKillAtAnyFaultPointLosesNothing
// kills a session in-process at every point it reaches, in the test
// command.)
var faultPoints = []string{
	"item.fetched#1", "mount.downloaded#1", "mount.downloaded#3",
	"tool.ran#1", "tool.posted#2", "tool.ran#3", "tool.posted#4",
	"write.uploaded#1",
	"sync.planned#1", "sync.uploaded#1", "sync.downloaded#1", "sync.downloaded#2",
	"tool.ran#5", "tool.posted#6", "tool.ran#8", "tool.posted#9",
	"final.planned#1", "end.disposing#1",
}

// finalSyncRepeats is how many more times the long run kills both
// processes in the final sync (see TestKilledAtAnyPoint…).
const finalSyncRepeats = 8

// victims are what dies at a fault point.
var victims = []string{"worker", "server", "both"}

func TestKilledAtAnyPointTheSessionFinishesWithNothingLost(t *testing.T) {
	// sandboxed: the worker runs bash in bubblewrap, which mounts each
	// store in a folder named after the session (and shows it to bash at
	// /mnt/memory/notes).
	type scenario struct {
		point, victim string
		sandboxed     bool
		again         int // a repetition's number (1, 2, …); 0 for the first run
	}
	var scenarios []scenario
	if testenv.IsLong() {
		for _, v := range victims {
			for _, p := range faultPoints {
				scenarios = append(scenarios, scenario{p, v, false, 0})
			}
		}
		scenarios = append(scenarios, scenario{"final.planned#1", "worker", true, 0})
		// Both killed in the final sync once lost a memory on the server:
		// the stop came late and landed in the folder's removal, which
		// was not journaled then (docs/worker.md, "The fault suite"). The
		// long run repeats it, so a recurrence shows with its dump.
		for i := 1; i <= finalSyncRepeats; i++ {
			scenarios = append(scenarios, scenario{"final.planned#1", "both", false, i})
		}
	} else {
		// The README's test command: one kill of each kind. Live sync (the
		// default) uploads each write as it happens, so the final sync
		// has nothing certain to upload; the kills land in the first
		// write-through upload (a1, the only one no sync can take first)
		// and the mid-session sync's. The sandboxed kill lands in the final
		// sync: the next worker finds the session ended and must finish
		// the folders left in the session's own folder.
		scenarios = []scenario{{"write.uploaded#1", "worker", false, 0}, {"tool.posted#4", "server", false, 0},
			{"sync.uploaded#1", "both", false, 0}, {"final.planned#1", "worker", true, 0}}
	}
	bin := faultBinary(t)
	// A few at a time: each mostly waits (a sleep in the script, a lease to
	// lapse), and the machine is small.
	slots := make(chan struct{}, testenv.Scale(3, 6))
	for _, sc := range scenarios {
		name := sc.victim + "@" + sc.point
		if sc.sandboxed {
			name += "+sandbox"
		}
		if sc.again > 0 {
			name += fmt.Sprintf("+again%d", sc.again)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			runFaultScenario(t, bin, sc.point, sc.victim, sc.sandboxed)
		})
	}
}

// busyScript is the session: writes, an edit and shell writes before and
// after a pause that lets the mid-session sync run (the worker's interval
// is the 5 s minimum), then the session terminates. Every call is
// idempotent, since a call whose result was never posted is run again by
// the next worker. It returns the script and the memories the agent leaves.
func busyScript(mount string) (string, map[string]string) {
	calls := []string{
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"a1"}}`,
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/b.md","content":"b1"}}`,
		fmt.Sprintf(`{"name":"bash","input":{"command":"printf c1 > %s/c.md"}}`, mount),
		`{"name":"bash","input":{"command":"sleep 5.5"}}`,
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"a2"}}`,
		`{"name":"edit","input":{"file_path":"/mnt/memory/notes/b.md","old_string":"b1","new_string":"b2"}}`,
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/d/x.md","content":"d1"}}`,
		fmt.Sprintf(`{"name":"bash","input":{"command":"printf c2 > %s/c.md"}}`, mount),
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/e.md","content":"e1"}}`,
	}
	return `{"tool_calls":[` + strings.Join(calls, ",") + `],"end":"terminate"}`,
		map[string]string{"/a.md": "a2", "/b.md": "b2", "/c.md": "c2", "/d/x.md": "d1", "/e.md": "e1"}
}

// proc is a started process and its output.
type proc struct {
	cmd  *exec.Cmd
	out  *testlog.Buffer
	done chan struct{}
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &testlog.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

// startServe starts `memstore serve args…` and waits until it answers on
// its --addr (which args must give).
func startServe(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	addr := args[slices.Index(args, "--addr")+1]
	p := startProc(t, bin, env, append([]string{"serve"}, args...)...)
	waitUntil(t, "the server to answer", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return p
}

// freeAddr is a loopback address nothing listens on, for a server that
// must come back on the same one after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// kill SIGKILLs the process (continuing it first, so a stopped process
// dies at once) and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	<-p.done
}

// stopped reports whether the process is stopped (SIGSTOP): every thread
// of it, so that what the listing at the kill shows is what it left.
func (p *proc) stopped() bool {
	ok, err := faultstop.Stopped(p.cmd.Process.Pid)
	return err == nil && ok
}

func runFaultScenario(t *testing.T, bin, point, victim string, sandboxed bool) {
	sandboxMode, bashMount := "none", ""
	if sandboxed {
		if _, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap}, slog.New(slog.DiscardHandler)); err != nil {
			t.Skipf("bubblewrap cannot run here: %v", err)
		}
		sandboxMode, bashMount = "bwrap", "/mnt/memory/notes"
	}
	const adminKey = "sk-memstore-faults-admin"
	data, mountRoot, workdir := t.TempDir(), t.TempDir(), t.TempDir()
	addr := freeAddr(t)
	baseURL := "http://" + addr
	startServer := func() *proc {
		return startServe(t, bin, []string{"MEMSTORE_ADMIN_KEY=" + adminKey}, "--addr", addr, "--data", data)
	}
	server := startServer()

	ctx := context.Background()
	admin, err := client.New(baseURL, client.WithAPIKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	env, key, agent := ws.Env, ws.Key, ws.Agent
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string]*api.Memory{}
	for _, p := range []string{"/seed-1.md", "/seed-2.md", "/seed-3.md"} {
		m, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: p, Content: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		seeds[p] = m
	}
	if bashMount == "" {
		bashMount = filepath.Join(mountRoot, "notes")
	}
	script, want := busyScript(bashMount)
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		Resources:     []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID}},
		InitialEvents: []api.Event{api.UserMessage(script)},
	})
	if err != nil {
		t.Fatal(err)
	}

	workerEnv := []string{
		"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_ENVIRONMENT_ID=" + env.ID, "ANTHROPIC_ENVIRONMENT_KEY=" + key,
	}
	// Without a sandbox the script's shell writes reach the store's folder
	// by its path on this machine; with one, at its mount path. The lease
	// is short, so that a killed worker's item is claimed again soon, but
	// not shorter than the machine's worst stall: with 5 s, one long run's
	// server answered no write for 8 s while its reads went on (most
	// likely SQLite's fsync waiting behind the other tests' disk writes),
	// the lease lapsed before the fault point and the scenario never
	// reached it.
	workerArgs := []string{"worker", "poll", "--mount-root", mountRoot, "--workdir", workdir, "--sandbox", sandboxMode,
		"--memory-sync-interval", "5s", "--lease-ttl", "15s", "--max-idle", "1s", "--log-format", "json"}
	worker := startProc(t, bin, append(workerEnv, "MEMSTORE_FAULT_AT="+point), workerArgs...)
	var killed string // filled at the kill
	// On failure, whatever the step: what the processes said and where the
	// session stands (a timeout alone says nothing about why).
	defer func() {
		if !t.Failed() {
			return
		}
		t.Logf("%s\nworker output:\n%s\nserver output:\n%s", killed, worker.out, server.out)
		if s, err := admin.GetSession(ctx, sess.ID); err == nil {
			t.Logf("session status %s", s.Status)
		}
		for w, err := range admin.ListAllWork(ctx, env.ID, api.WorkListParams{}) {
			if err == nil {
				t.Logf("work %s state %s", w.ID, w.State)
			}
		}
	}()

	// Another writer changes two memories the agent never touches while
	// the session runs, so the mid-session sync has downloads to make.
	results := func() []api.Event {
		var out []api.Event
		for e, err := range admin.ListAllEvents(ctx, sess.ID, api.EventListParams{Limit: 1000}) {
			if err != nil {
				return nil // the server may be down for a moment
			}
			out = append(out, e)
		}
		return out
	}
	edited := false
	editSeeds := func() {
		for _, p := range []string{"/seed-1.md", "/seed-2.md"} {
			c := "changed by another writer"
			if _, err := admin.UpdateMemory(ctx, store.ID, seeds[p].ID, api.UpdateMemoryRequest{Content: &c}); err != nil {
				t.Fatalf("another writer's change: %v", err)
			}
		}
		want["/seed-1.md"], want["/seed-2.md"], want["/seed-3.md"] = "changed by another writer", "changed by another writer", "seed"
		edited = true
	}
	waitUntil(t, "the worker to reach "+point, func() bool {
		if !edited && countType(results(), api.EventUserToolResult) > 0 {
			editSeeds()
		}
		select {
		case <-worker.done:
			t.Fatalf("the worker exited before %s:\n%s", point, worker.out)
		default:
		}
		return worker.stopped()
	})
	t.Logf("stopped at %s; killing the %s", point, victim)
	// Stopped before the mount, the worker has made nothing in the mount
	// root yet. The old stop, late, let it run on into the mount
	// (docs/worker.md, "The fault suite").
	if strings.HasPrefix(point, "item.fetched#") {
		if entries, err := os.ReadDir(mountRoot); err != nil || len(entries) > 0 {
			t.Errorf("the worker ran on past %s before it stopped: the mount root at the kill holds:\n%s", point, listTree(mountRoot))
		}
	}
	// What the processes that die said, and the mount root as the kill
	// leaves it: the failure dump below shows them beside the restarted
	// processes' output.
	killed = fmt.Sprintf("worker before the kill:\n%s\nserver before the kill:\n%s\nmount root at the kill:\n%s",
		worker.out, server.out, listTree(mountRoot))
	switch victim {
	case "worker":
		worker.kill()
		worker = startProc(t, bin, workerEnv, workerArgs...)
	case "server":
		server.kill()
		server = startServer()
		_ = worker.cmd.Process.Signal(syscall.SIGCONT)
	case "both":
		worker.kill()
		server.kill()
		server = startServer()
		worker = startProc(t, bin, workerEnv, workerArgs...)
	}

	// A worker killed before its first heartbeat leaves the claim's own
	// lease (api.DefaultLeaseTTLSeconds) to lapse before the work item can
	// be claimed again; the session then still has its script to run.
	waitWithin(t, api.DefaultLeaseTTLSeconds*time.Second+90*time.Second, "the session to finish and its work to stop", func() bool {
		if !edited && countType(results(), api.EventUserToolResult) > 0 {
			editSeeds()
		}
		return sessionFinished(admin, env.ID, sess.ID)
	})

	// 0 edits lost: the server holds the agent's last content of every
	// file and the other writer's changes, nothing else.
	if got := storeContents(t, admin, store.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("memories = %v\nwant       %v\nworker output:\n%s", got, want, worker.out)
	}
	// 0 duplicate tool results, and every call answered.
	checkToolCalls(t, results(), 9)
	// The mount is gone, and so is its state folder (no edit lost, so no
	// copy kept).
	if entries, _ := os.ReadDir(mountRoot); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("left in the mount root: %v", names)
	}
	_ = worker.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-worker.done:
	case <-time.After(30 * time.Second):
		t.Errorf("the worker did not stop on SIGTERM")
	}
}

func countType(events []api.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// checkToolCalls checks that a session's log holds the script's calls
// tool calls, each answered by exactly one result.
func checkToolCalls(t *testing.T, events []api.Event, calls int) {
	t.Helper()
	answers := map[string]int{}
	for _, e := range events {
		if e.Type == api.EventUserToolResult {
			answers[e.ToolUseID]++
		}
	}
	for _, e := range events {
		if e.Type == api.EventAgentToolUse && answers[e.ID] != 1 {
			t.Errorf("tool call %s has %d results, want 1", e.ID, answers[e.ID])
		}
	}
	if n := countType(events, api.EventAgentToolUse); n != calls {
		t.Errorf("%d tool calls, want the script's %d", n, calls)
	}
}

// storeContents maps each memory of a store to its content.
func storeContents(t *testing.T, c *client.Client, storeID string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for it, err := range c.ListAllMemories(context.Background(), storeID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			t.Fatal(err)
		}
		if m := it.Memory; m != nil {
			got[m.Path] = *m.Content
		}
	}
	return got
}

// sessionFinished reports whether a session is terminated and every work
// item of its environment stopped, as c sees them.
func sessionFinished(c *client.Client, environmentID, sessionID string) bool {
	ctx := context.Background()
	s, err := c.GetSession(ctx, sessionID)
	if err != nil || s.Status != api.SessionTerminated {
		return false
	}
	for w, err := range c.ListAllWork(ctx, environmentID, api.WorkListParams{}) {
		if err != nil || w.State != api.WorkStopped {
			return false
		}
	}
	return true
}

// listTree lists every file and folder under root with its size, one per
// line, for a failure's log.
func listTree(root string) string {
	var b strings.Builder
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		if info, err := d.Info(); err == nil {
			fmt.Fprintf(&b, "%s %d\n", p, info.Size())
		}
		return nil
	})
	return b.String()
}
