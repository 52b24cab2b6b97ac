package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// nobody is the unprivileged user the worker runs as below.
const nobody = 65534

// openTo lets nobody reach path: it owns path and everything under it, and
// may pass through every folder above it.
func openTo(t *testing.T, path string) {
	t.Helper()
	if err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o111); err != nil {
			t.Fatal(err)
		}
	}
}

// A real `memstore worker run --sandbox bwrap` process running as an
// unprivileged user (bubblewrap then needs user namespaces): its agent's
// bash reads a memory at the advertised path under a remapped mount root,
// lists exactly the attached stores, cannot write the read-only store, and
// what it writes in the read-write store reaches the server.
func TestWorkerRunAsAnUnprivilegedUserSandboxesBash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: every sandboxed test already runs as an unprivileged user")
	}
	if err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bwrap", "--unshare-pid", "--ro-bind", "/", "/", "true").Run(); err != nil {
		t.Skipf("bubblewrap cannot run as an unprivileged user here (user namespaces refused, or setpriv/bwrap missing): %v", err)
	}
	bin := memstoreBinaryCopy(t)
	openTo(t, filepath.Dir(bin))
	s := newWorkerSetup(t)
	ctx := context.Background()
	notes, err := s.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.CreateMemory(ctx, notes.ID, api.CreateMemoryRequest{Path: "/x.md", Content: "a memory\n"}); err != nil {
		t.Fatal(err)
	}
	book, err := s.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "book"})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.session(t, `{"tool_calls":[`+
		`{"name":"bash","input":{"command":"id -u; cat /mnt/memory/notes/x.md; ls /mnt/memory"}},`+
		`{"name":"bash","input":{"command":"echo x > /mnt/memory/book/y.md"}},`+
		`{"name":"bash","input":{"command":"echo from nobody > /mnt/memory/notes/nobody.md"}}],"end":"terminate"}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: notes.ID, Access: api.AccessReadWrite},
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: book.ID, Access: api.AccessReadOnly})
	env := s.admin.With(client.WithBearerToken(s.key))
	w, err := env.PollWork(ctx, s.env.ID, api.WorkPollParams{BlockMS: api.MaxPollBlockMS})
	if err != nil || w == nil {
		t.Fatalf("poll: %v %v", w, err)
	}
	if _, err := env.AckWork(ctx, s.env.ID, w.ID); err != nil {
		t.Fatal(err)
	}

	base := t.TempDir()
	workdir, mnt := filepath.Join(base, "work"), filepath.Join(base, "mnt")
	for _, d := range []string{workdir, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	openTo(t, base)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, bin, "worker", "run", "--sandbox", "bwrap", "--base-url", s.rs.baseURL,
		"--environment-id", s.env.ID, "--work-id", w.ID, "--session-id", sess.ID, "--workdir", workdir, "--mount-root", mnt)
	cmd.Env = append(s.workerEnv(workdir), "ANTHROPIC_WORK_SECRET="+*w.Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	// A worker still running at the deadline prints its goroutines
	// (SIGQUIT) so that the failure says where it was stuck.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("worker run as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), "sandbox=bwrap") {
		t.Errorf("no sandbox log line:\n%s", out)
	}

	texts, errs := s.results(t, sess.ID)
	if len(texts) != 3 {
		t.Fatalf("results = %q\n%s", texts, out)
	}
	if want := "65534\na memory\nbook\nnotes\n"; errs[0] || texts[0] != want {
		t.Errorf("bash as nobody = %q, want %q", texts[0], want)
	}
	if !errs[1] || !strings.Contains(texts[1], "Read-only file system") {
		t.Errorf("write into the read-only store = %q", texts[1])
	}
	if errs[2] {
		t.Errorf("write into the read-write store failed: %q", texts[2])
	}
	got := map[string]string{}
	for _, id := range []string{notes.ID, book.ID} {
		for item, err := range s.admin.ListAllMemories(ctx, id, client.ListMemoriesParams{View: api.ViewFull}) {
			if err != nil {
				t.Fatal(err)
			}
			if item.Memory == nil {
				continue
			}
			got[id+item.Memory.Path] = *item.Memory.Content
		}
	}
	if len(got) != 2 || got[notes.ID+"/nobody.md"] != "from nobody\n" {
		t.Errorf("memories on the server = %q, want x.md and nobody.md in notes, nothing in book", got)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("the mount root still holds %d entries", len(entries))
	}
}
