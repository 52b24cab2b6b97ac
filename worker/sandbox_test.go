package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/memsync"
	"github.com/memstore/memstore/sandbox"
)

// sandboxConfig is memoryConfig with every session's bash in bubblewrap,
// or a skip when bubblewrap cannot run here (the sandbox package's tests
// say why).
func (f *fixture) sandboxConfig(logs *testlog.Buffer) Config {
	f.t.Helper()
	if _, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap}, slog.New(slog.DiscardHandler)); err != nil {
		f.t.Skipf("bubblewrap cannot run here: %v", err)
	}
	cfg := f.memoryConfig(logs)
	cfg.Sandbox = sandbox.Config{Mode: sandbox.Bwrap}
	return cfg
}

// bashCall is a bash tool call in a script's tool_calls.
func bashCall(command string) string {
	b, err := json.Marshal(toolCall("bash", map[string]any{"command": command}))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A sandboxed session under a remapped mount root: its bash finds each
// store at its advertised path and nothing else under /mnt/memory, a write
// into the read-only store fails with EROFS and uploads nothing, the data
// folder and the mount root are out of sight, links that would lead the
// sync or the file tools out of the session do nothing, and what bash
// writes in the read-write store is synced.
func TestSandboxedBashSeesTheStoresAtTheirMountPaths(t *testing.T) {
	f := newFixture(t, "")
	logs := &testlog.Buffer{}
	cfg := f.sandboxConfig(logs)
	data := t.TempDir()
	adminKey := filepath.Join(data, "admin.key")
	if err := os.WriteFile(adminKey, []byte("sk-admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notes := f.memStore("Project notes", map[string]string{"/x.md": "a memory\n"})
	book := f.memStore("Team handbook", map[string]string{"/style.md": "short sentences\n"})
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "cat /mnt/memory/project-notes/x.md"}),
		toolCall("bash", map[string]any{"command": "ls /mnt/memory"}),
		toolCall("bash", map[string]any{"command": "echo x > /mnt/memory/team-handbook/y.md"}),
		toolCall("bash", map[string]any{"command": "cat " + adminKey}),
		toolCall("bash", map[string]any{"command": "ls " + cfg.MountRoot}),
		toolCall("bash", map[string]any{"command": "echo 'from bash' > /mnt/memory/project-notes/bash.md"}),
		// Escapes: links the sync and the file tools, outside the
		// sandbox, would resolve against the host.
		toolCall("bash", map[string]any{"command": "(cd /mnt/memory/project-notes && ln -s " + adminKey + " key.md && ln -s /mnt/memory/team-handbook/style.md style.md && ln -s .. up) && echo linked"}),
		toolCall("bash", map[string]any{"command": "echo w > w.txt && ln w.txt /mnt/memory/project-notes/hard.md"}),
		toolCall("read", map[string]any{"file_path": "/mnt/memory/project-notes/key.md"}),
		toolCall("read", map[string]any{"file_path": "/mnt/memory/project-notes/up/team-handbook/style.md"}),
	), attach(notes, api.AccessReadWrite), attach(book, api.AccessReadOnly))

	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	got := toolResults(f.events(sess.ID))
	if len(got) != 10 {
		t.Fatalf("results = %+v", got)
	}
	for i, want := range []struct {
		ok   bool
		text string
	}{
		{true, "a memory\n"},
		{true, "project-notes\nteam-handbook\n"},
		{false, "Read-only file system"},
		{false, "No such file or directory"},
		{false, "No such file or directory"},
		{true, "(no output)"},
		{true, "linked\n"},
		{false, "Invalid cross-device link"},
		{false, "symbolic link"},
		{false, "symbolic link"},
	} {
		r := got[i]
		if r.isError == want.ok || (want.ok && r.text != want.text) || !strings.Contains(r.text, want.text) {
			t.Errorf("call %d = %+v, want ok=%v with %q", i+1, r, want.ok, want.text)
		}
		if strings.Contains(r.text, "sk-admin-secret") || strings.Contains(r.text, "short sentences") {
			t.Errorf("call %d reached what it must not: %q", i+1, r.text)
		}
	}

	if m, want := f.memories(notes.ID), map[string]string{"/x.md": "a memory\n", "/bash.md": "from bash\n"}; !maps.Equal(m, want) {
		t.Errorf("notes on the server = %q, want %q (bash's file synced, no link followed)", m, want)
	}
	if m := f.memories(book.ID); len(m) != 1 || len(f.versions(book.ID)) != 1 {
		t.Errorf("the read-only store changed: %q", m)
	}
	line := logs.Line("session sandbox", "session_id="+sess.ID)
	// The default network, on: a namespace of its own where pasta connects
	// it (a root worker with pasta installed), else the host's.
	network := `network="on (pasta`
	if _, err := exec.LookPath("pasta"); err != nil || os.Geteuid() != 0 {
		network = `network="host (on, without pasta)"`
	}
	for _, part := range []string{"sandbox=bwrap", "stores=[/mnt/memory/project-notes]", "read_only_stores=[/mnt/memory/team-handbook]", network, "workdir=" + filepath.Join(cfg.Workdir, sess.ID+roomSuffix)} {
		if !strings.Contains(line, part) {
			t.Errorf("the sandbox log line %q lacks %q", line, part)
		}
	}
	emptyDir(t, cfg.MountRoot)
}

// Two sandboxed sessions attach one store and run at once on one worker
// with one mount root: each has its own folder under the root and sees it
// at the same /mnt/memory/shared, what each writes with bash reaches the
// other after a sync, and neither sees the other's folder. Without the
// sandbox the second session gets a folder of its own too, while the first
// keeps the shared one.
func TestTwoSandboxedSessionsShareOneStoreOnOneWorker(t *testing.T) {
	f := newFixture(t, "")
	shared := f.memStore("Shared", map[string]string{"/seed.md": "seed\n"})
	clock := newFakeClock()
	logs := &testlog.Buffer{}
	cfg := f.sandboxConfig(logs)
	cfg.Now, cfg.MaxIdle = clock.Now, -1
	w := f.worker(cfg)
	names := []string{"one", "two"}
	var sessions []*api.Session
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
			for _, s := range sessions {
				for _, e := range f.events(s.ID) {
					t.Logf("session %s event %s %s", s.ID, e.Type, e.ID)
				}
			}
		}
	})
	var done []chan error
	for _, own := range names {
		s := f.session(script(api.ScriptEndIdle,
			toolCall("bash", map[string]any{"command": "echo 'from " + own + "' > /mnt/memory/shared/" + own + ".md; ls " + cfg.MountRoot})),
			attach(shared, api.AccessReadWrite))
		item := f.claim()
		ch := make(chan error, 1)
		go func() { ch <- w.RunItem(context.Background(), Item{Work: item}) }()
		sessions, done = append(sessions, s), append(done, ch)
	}
	turns := 1
	turn := func(call func(other string) string) {
		t.Helper()
		for i, s := range sessions {
			f.sendScript(s.ID, `{"tool_calls":[`+call(names[1-i])+`]}`)
		}
		turns++
		for _, s := range sessions {
			waitFor(t, "the turn's results", func() bool {
				return lastOfType(f.events(s.ID), api.EventSessionStatusIdle) != nil && countTurns(f.events(s.ID)) == turns
			})
		}
	}
	for _, s := range sessions {
		waitFor(t, "the first writes", func() bool { return countTurns(f.events(s.ID)) == 1 })
	}
	for i, s := range sessions {
		if r := toolResults(f.events(s.ID)); len(r) != 1 || !strings.Contains(r[0].text, "No such file or directory") {
			t.Errorf("session %d: write and list of the mount root = %+v; want the write to work and the root out of sight", i+1, r)
		}
	}
	entries, err := os.ReadDir(cfg.MountRoot)
	if err != nil || len(entries) != 2 {
		t.Fatalf("the mount root holds %v, %v; want one folder per session", entries, err)
	}
	clock.Advance(memsync.MinInterval)
	noop := func(string) string { return bashCall("true") }
	turn(noop) // each uploads its file after the call
	waitFor(t, "both uploads", func() bool {
		m := f.memories(shared.ID)
		return m["/one.md"] == "from one\n" && m["/two.md"] == "from two\n"
	})
	clock.Advance(memsync.MinInterval)
	turn(noop) // each downloads the other's file after the call
	turn(func(other string) string { return bashCall("cat /mnt/memory/shared/" + other + ".md") })
	for i, s := range sessions {
		res := toolResults(f.events(s.ID))
		if last := res[len(res)-1]; last.isError || last.text != "from "+names[1-i]+"\n" {
			t.Errorf("session %d read %+v, want the other session's memory", i+1, last)
		}
	}
	for _, s := range sessions {
		f.sendScript(s.ID, `{"tool_calls":[],"end":"terminate"}`)
	}
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	emptyDir(t, cfg.MountRoot)

	// Without the sandbox, the first session of the store mounts it in the
	// shared folder, where bash finds it; the second, served meanwhile, gets
	// a folder of its own under the root instead of waiting for the first
	// to end, and its file tools reach the store at its mount path.
	plainLogs := &testlog.Buffer{}
	plain := f.memoryConfig(plainLogs)
	plain.MaxIdle = -1
	pw := f.worker(plain)
	first := f.session(script(api.ScriptEndIdle), attach(shared, api.AccessReadWrite))
	firstItem := f.claim()
	firstDone := make(chan error, 1)
	go func() { firstDone <- pw.RunItem(context.Background(), Item{Work: firstItem}) }()
	waitFor(t, "the first session's turn", func() bool { return countTurns(f.events(first.ID)) == 1 })
	second := f.session(script(api.ScriptEndTerminate,
		toolCall("write", map[string]any{"file_path": "/mnt/memory/shared/second.md", "content": "from the second\n"}),
		toolCall("bash", map[string]any{"command": "cat " + plain.MountRoot + "/*/shared/second.md"})),
		attach(shared, api.AccessReadWrite))
	secondItem := f.claim()
	if err := pw.RunItem(context.Background(), Item{Work: secondItem}); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(f.events(second.ID)); len(got) != 2 || got[0].isError || got[1].text != "from the second\n" {
		t.Errorf("the second session's results while the first runs = %+v", got)
	}
	if plainLogs.Line("a folder of its own", "session_id="+second.ID) == "" {
		t.Errorf("the worker did not log where the second session's stores are:\n%s", plainLogs)
	}
	if st := f.work(firstItem.ID).State; st != api.WorkActive {
		t.Errorf("the first session's item is %s, want still active", st)
	}
	if m := f.memories(shared.ID); m["/second.md"] != "from the second\n" {
		t.Errorf("the second session's write did not reach the store: %q", m)
	}
	f.sendScript(first.ID, `{"tool_calls":[],"end":"terminate"}`)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	emptyDir(t, plain.MountRoot)
}
