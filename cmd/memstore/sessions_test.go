package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
)

// Two sessions of one store, created together, served by one real
// `memstore worker poll` in bubblewrap: each writes its own file, waits
// past two syncs (15 s of short calls; a sync is due every 5 s, checked
// after each call), then reads the other's. Both reads work only if the
// worker serves the two side by side: served one after the other, the
// first would look for a file the second has not written yet.
func TestOneWorkerServesTwoSessionsOfOneStoreAtOnce(t *testing.T) {
	if err := exec.Command("bwrap", "--unshare-pid", "--ro-bind", "/", "/", "true").Run(); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	ctx := context.Background()
	store, err := s.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"one", "two"}
	var sessions []*api.Session
	for i, own := range names {
		other := names[1-i]
		sessions = append(sessions, s.session(t, `{"tool_calls":[`+
			`{"name":"bash","input":{"command":"echo from `+own+` > /mnt/memory/shared/`+own+`.md"}},`+
			strings.Repeat(`{"name":"bash","input":{"command":"sleep 2.5"}},`, 6)+
			`{"name":"bash","input":{"command":"cat /mnt/memory/shared/`+other+`.md"}}],"end":"terminate"}`,
			api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID, Access: api.AccessReadWrite}))
	}

	var out testlog.Buffer
	cmd := exec.Command(bin, "worker", "poll", "--mount-root", t.TempDir(), "--sandbox", "bwrap", "--max-sessions", "2", "--memory-sync-interval", "5s")
	cmd.Env = s.workerEnv(t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, sess := range sessions {
		waitWithin(t, 90*time.Second, "both sessions to end", func() bool {
			return s.work(t, sess.ID).State == api.WorkStopped
		})
	}
	for i, sess := range sessions {
		texts, errs := s.results(t, sess.ID)
		if len(texts) != 8 || errs[7] || texts[7] != "from "+names[1-i]+"\n" {
			t.Errorf("session %s results = %q (errors %v); want the other session's file read\n%s", names[i], texts, errs, out.String())
		}
	}
	if !strings.Contains(out.String(), "max_sessions=2") {
		t.Errorf("the worker's first line does not say how many sessions it serves:\n%s", out.String())
	}
}
