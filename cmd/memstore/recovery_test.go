package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/sandbox"
)

// Cross-host recovery (docs/recovery.md): a sandboxed worker is killed with
// SIGKILL at a chosen moment of a session, a worker on another mount root
// (another host) takes the session over and finishes it, and then a worker
// started on the first root finds the folder the killed one left: every
// file that was on disk at the kill is on the server — at its path, or,
// where the server's memory changed since the folder's last sync, as a
// conflicted copy beside it — and the folder is gone.
func TestLeftoversOfAKilledWorkerAreRecoveredAfterAnotherHostFinishes(t *testing.T) {
	if _, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap}, slog.New(slog.DiscardHandler)); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	// The test command kills once, with a bash file, a write and a file
	// the next host writes again on disk; the long run at every tool call
	// and in the final sync.
	points := []string{"tool.ran#3"}
	if testenv.IsLong() {
		points = []string{"tool.ran#1", "tool.posted#2", "tool.ran#3", "tool.ran#4", "tool.posted#4", "final.planned#1"}
	}
	bin := faultBinary(t)
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			runRecoveryScenario(t, bin, point)
		})
	}
}

// recoveryScript writes with the write tool and with bash, then writes
// again a file an earlier bash call made, so that a host that takes over
// after the kill changes what the killed one left; then the session ends.
const recoveryScript = `{"tool_calls":[` +
	`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"a1"}},` +
	`{"name":"bash","input":{"command":"printf b1 > /mnt/memory/notes/b.md && mkdir -p /mnt/memory/notes/d && printf x1 > /mnt/memory/notes/d/x.md"}},` +
	`{"name":"write","input":{"file_path":"/mnt/memory/notes/a.md","content":"a2"}},` +
	`{"name":"bash","input":{"command":"printf b2 > /mnt/memory/notes/b.md"}},` +
	`{"name":"write","input":{"file_path":"/mnt/memory/notes/seed.md","content":"agent"}}` +
	`],"end":"terminate"}`

func runRecoveryScenario(t *testing.T, bin, point string) {
	const adminKey = "sk-memstore-recovery-admin"
	data, rootA, rootB := t.TempDir(), t.TempDir(), t.TempDir()
	addr := freeAddr(t)
	baseURL := "http://" + addr
	server := startServe(t, bin, []string{"MEMSTORE_ADMIN_KEY=" + adminKey}, "--addr", addr, "--data", data)
	ctx := context.Background()
	admin, err := client.New(baseURL, client.WithAPIKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/seed.md", Content: "seed"}); err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID,
		Resources:     []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID}},
		InitialEvents: []api.Event{api.UserMessage(recoveryScript)},
	})
	if err != nil {
		t.Fatal(err)
	}
	workerEnv := []string{"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_ENVIRONMENT_ID=" + ws.Env.ID, "ANTHROPIC_ENVIRONMENT_KEY=" + ws.Key}
	args := func(root string, extra ...string) []string {
		return append([]string{"worker", "poll", "--mount-root", root, "--workdir", t.TempDir(), "--sandbox", "bwrap",
			"--lease-ttl", "5s", "--max-idle", "1s", "--log-format", "json"}, extra...)
	}
	// Inline sync on the first host: what it wrote waits on its disk for
	// the next sync, which the kill prevents.
	a := startProc(t, bin, append(workerEnv, "MEMSTORE_FAULT_AT="+point), args(rootA, "--memory-sync-live=false")...)
	var b, c *proc
	defer func() {
		if t.Failed() {
			for name, p := range map[string]*proc{"killed worker": a, "worker on the other root": b, "recovering worker": c, "server": server} {
				if p != nil {
					t.Logf("%s:\n%s", name, p.out)
				}
			}
		}
	}()
	waitWithin(t, 30*time.Second, "the worker to reach "+point, func() bool {
		select {
		case <-a.done:
			t.Fatalf("the worker exited before %s", point)
		default:
		}
		return a.stopped()
	})
	folder := filepath.Join(rootA, sess.ID, "notes")
	onDisk, bases := folderAtKill(t, folder)
	a.kill()
	t.Logf("killed at %s with %v on disk (journal bases %v)", point, onDisk, bases)

	b = startProc(t, bin, workerEnv, args(rootB)...)
	waitWithin(t, 60*time.Second, "the other host to finish the session", func() bool {
		return sessionFinished(admin, ws.Env.ID, sess.ID)
	})
	b.kill()

	// The worker removes the folder, then logs that it recovered it: both
	// are waited for (reading the log as soon as the folder was gone failed
	// a CI run: the line was not written yet).
	c = startProc(t, bin, workerEnv, args(rootA)...)
	waitWithin(t, 30*time.Second, "the worker on the first root to recover the folder and log that it did", func() bool {
		entries, _ := os.ReadDir(rootA)
		return len(entries) == 0 && strings.Contains(c.out.String(), "recovered a store folder a stopped worker left")
	})

	got := storeContents(t, admin, store.ID)
	for p, content := range onDisk {
		sum := storage.ContentHash(content)
		switch {
		case got[p] == content:
		case sum == bases[p]:
			// Unchanged since the last sync: the server had it then.
		case got[app.ConflictCopyPath(p, sess.ID, sum)] == content:
			if got[p] == "" {
				t.Errorf("%s: a conflicted copy, but nothing at the path itself", p)
			}
		default:
			t.Errorf("%s held %q at the kill; the server has %q at its path and no conflicted copy (store: %v)", p, content, got[p], got)
		}
	}
	// Nothing the agent wrote is lost either: the session's own end state.
	for p, content := range map[string]string{"/a.md": "a2", "/b.md": "b2", "/d/x.md": "x1", "/seed.md": "agent"} {
		if got[p] != content {
			t.Errorf("%s = %q, want the session's last write %q (store: %v)", p, got[p], content, got)
		}
	}
	for p := range got {
		if strings.Contains(p, api.ConflictCopyMarker) && !strings.HasPrefix(p, "/b.md"+api.ConflictCopyMarker) && !strings.HasPrefix(p, "/a.md"+api.ConflictCopyMarker) {
			t.Errorf("conflicted copy %s of a file the next host never changed", p)
		}
	}
}

// folderAtKill reads every file of a store folder and the journal's base
// of each path, as the kill leaves them.
func folderAtKill(t *testing.T, folder string) (files, bases map[string]string) {
	t.Helper()
	files, bases = map[string]string{}, map[string]string{}
	err := filepath.WalkDir(folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(folder, p)
		files["/"+filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("reading the folder at the kill: %v", err)
	}
	var j struct {
		State map[string]struct {
			Base string `json:"base"`
		} `json:"state"`
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(folder), ".notes.memstore", "journal.json"))
	if err != nil || json.Unmarshal(raw, &j) != nil {
		t.Fatalf("reading the journal at the kill: %v", err)
	}
	for p, s := range j.State {
		bases[p] = s.Base
	}
	return files, bases
}
