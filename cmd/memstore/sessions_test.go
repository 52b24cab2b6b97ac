package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// Two sessions of one store, created together, served by one real
// `memstore worker poll`, in bubblewrap and without it: each writes its own
// file, waits past two syncs (15 s of short calls; a sync is due every 5 s,
// checked after each call), then reads the other's. Both reads work only if
// the worker serves the two side by side: served one after the other, the
// first would look for a file the second has not written yet. In the
// sandbox bash writes and reads at the mount path; without it the second
// session's stores are in a folder of its own, which the file tools reach
// at the mount path.
func TestOneWorkerServesTwoSessionsOfOneStoreAtOnce(t *testing.T) {
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	modes := []bool{false}
	if err := exec.Command("bwrap", "--unshare-pid", "--ro-bind", "/", "/", "true").Run(); err != nil {
		t.Logf("bubblewrap cannot run here, so only the unsandboxed worker runs: %v", err)
	} else {
		modes = append(modes, true)
	}
	// Both workers run at once, each on an environment of its own.
	var checks []func()
	for _, sandboxed := range modes {
		env := s
		if sandboxed {
			ws := testserver.NewWorkers(t, s.admin, testserver.ScriptedAgent())
			env = &workerSetup{rs: s.rs, admin: s.admin, env: ws.Env, key: ws.Key, agent: ws.Agent}
		}
		checks = append(checks, twoSessionsOfOneStore(t, bin, env, sandboxed))
	}
	for _, check := range checks {
		check()
	}
}

// twoSessionsOfOneStore starts the scenario on s's environment and returns
// what waits for it and checks the results.
func twoSessionsOfOneStore(t *testing.T, bin string, s *workerSetup, sandboxed bool) (check func()) {
	ctx := context.Background()
	store, err := s.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(own string) string {
		if sandboxed {
			return `{"name":"bash","input":{"command":"echo from ` + own + ` > /mnt/memory/shared/` + own + `.md"}}`
		}
		return `{"name":"write","input":{"file_path":"/mnt/memory/shared/` + own + `.md","content":"from ` + own + `\n"}}`
	}
	read := func(other string) string {
		if sandboxed {
			return `{"name":"bash","input":{"command":"cat /mnt/memory/shared/` + other + `.md"}}`
		}
		return `{"name":"read","input":{"file_path":"/mnt/memory/shared/` + other + `.md"}}`
	}
	names := []string{"one", "two"}
	var sessions []*api.Session
	for i, own := range names {
		sessions = append(sessions, s.session(t, `{"tool_calls":[`+write(own)+`,`+
			strings.Repeat(`{"name":"bash","input":{"command":"sleep 2.5"}},`, 6)+read(names[1-i])+`],"end":"terminate"}`,
			api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID, Access: api.AccessReadWrite}))
	}

	var out testlog.Buffer
	args := []string{"worker", "poll", "--mount-root", t.TempDir(), "--max-sessions", "2", "--memory-sync-interval", "5s"}
	if sandboxed {
		args = append(args, "--sandbox", "bwrap")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = s.workerEnv(t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	mode := map[bool]string{true: "bwrap", false: "unsandboxed"}[sandboxed]
	return func() {
		for _, sess := range sessions {
			waitWithin(t, 90*time.Second, mode+": both sessions to end", func() bool {
				return s.work(t, sess.ID).State == api.WorkStopped
			})
		}
		for i, sess := range sessions {
			texts, errs := s.results(t, sess.ID)
			if len(texts) != 8 || errs[7] || !strings.Contains(texts[7], "from "+names[1-i]) {
				t.Errorf("%s: session %s results = %q (errors %v); want the other session's file read\n%s", mode, names[i], texts, errs, out.String())
			}
		}
		if !strings.Contains(out.String(), "max_sessions=2") {
			t.Errorf("%s: the worker's first line does not say how many sessions it serves:\n%s", mode, out.String())
		}
	}
}
