package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/sandbox"
)

// Each session works in a room of its own, with and without the sandbox:
// session B, served beside A by the same worker, cannot read, list or
// change what A wrote in its room through $HOME or A's path, with any
// tool; A's dotfiles are gone when C starts after A ended, and so is its
// room.
func TestSessionsDoNotSeeEachOthersRooms(t *testing.T) {
	for _, sandboxed := range []bool{false, true} {
		name := "unsandboxed"
		if sandboxed {
			name = "sandboxed"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "")
			logs := &testlog.Buffer{}
			cfg := f.config(logs)
			if sandboxed {
				cfg = f.sandboxConfig(logs)
			}
			cfg.MaxIdle = -1
			w := f.worker(cfg)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("worker log:\n%s", logs)
				}
			})
			serve := func() chan error {
				item := f.claim()
				done := make(chan error, 1)
				go func() { done <- w.RunItem(context.Background(), Item{Work: item}) }()
				return done
			}

			a := f.session(script(api.ScriptEndIdle, toolCall("bash", map[string]any{"command": "echo secret-of-a > $HOME/a-secret.txt && echo 'echo planted' > $HOME/.bashrc && cp $HOME/.bashrc $HOME/.profile && pwd"})))
			aDone := serve()
			waitFor(t, "A's turn", func() bool { return countTurns(f.events(a.ID)) == 1 })
			res := toolResults(f.events(a.ID))
			room := strings.TrimSpace(res[0].text)
			if res[0].isError || room != filepath.Join(cfg.Workdir, a.ID+roomSuffix) {
				t.Fatalf("A's first call = %+v, want its room %s", res[0], filepath.Join(cfg.Workdir, a.ID+roomSuffix))
			}
			secret := filepath.Join(room, "a-secret.txt")

			calls := []api.ScriptedToolCall{
				toolCall("bash", map[string]any{"command": "cat $HOME/a-secret.txt"}),
				toolCall("read", map[string]any{"file_path": secret}),
				toolCall("grep", map[string]any{"pattern": "secret", "path": room}),
				toolCall("glob", map[string]any{"pattern": "*", "path": room}),
				toolCall("write", map[string]any{"file_path": secret, "content": "from b"}),
				toolCall("edit", map[string]any{"file_path": secret, "old_string": "secret", "new_string": "b"}),
				toolCall("bash", map[string]any{"command": "grep -rs secret-of $HOME; ls -A $HOME"}),
			}
			if sandboxed {
				// Unconfined, bash reaches what the worker's user can;
				// in the sandbox, A's room is not there at all.
				calls = append(calls,
					toolCall("bash", map[string]any{"command": "cat " + secret}),
					toolCall("bash", map[string]any{"command": "ls " + cfg.Workdir}),
					toolCall("bash", map[string]any{"command": "echo b > " + secret}),
				)
			}
			b := f.session(script(api.ScriptEndTerminate, calls...))
			if err := <-serve(); err != nil {
				t.Fatal(err)
			}
			got := toolResults(f.events(b.ID))
			if len(got) != len(calls) {
				t.Fatalf("B's results = %+v, want %d", got, len(calls))
			}
			for i, r := range got {
				listing := i == 6 || i == 8 // may list B's own, nothing of A's
				if strings.Contains(r.text, "secret-of-a") || (listing && strings.Contains(r.text, a.ID)) || (!listing && !r.isError) {
					t.Errorf("B's call %d (%s) reached A's room: %+v", i+1, r.name, r)
				}
			}
			if got[6].isError || got[6].text != "(no output)" {
				t.Errorf("B's own home = %+v, want it empty", got[6])
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "secret-of-a\n" {
				t.Errorf("A's file after B = %q, %v; want it unchanged", b, err)
			}

			f.sendScript(a.ID, `{"tool_calls":[],"end":"terminate"}`)
			if err := <-aDone; err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(room); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("A's room outlived A: %v", err)
			}
			c := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "ls -A $HOME; cat ~/.bashrc ~/.profile 2>&1 | wc -l"})))
			if err := <-serve(); err != nil {
				t.Fatal(err)
			}
			if r := toolResults(f.events(c.ID)); len(r) != 1 || r[0].isError || strings.TrimSpace(r[0].text) != "2" {
				t.Errorf("C's home = %+v; want it empty, without A's dotfiles", r)
			}
			if entries, _ := os.ReadDir(cfg.Workdir); len(entries) != 0 {
				t.Errorf("the workdir still holds %v after every session ended", entries)
			}
		})
	}
}

// The shell's environment is the allowlist: a variable set only in the
// worker's environment is not in the agent's env, with or without the
// sandbox; one passed by name or with a value is; HOME is the room and
// USER the shell's user.
func TestShellEnvironmentIsAnAllowlist(t *testing.T) {
	t.Setenv("WORKER_ONLY_SECRET", "s3cr3t-of-the-worker")
	t.Setenv("PASSED_BY_NAME", "from-the-worker")
	t.Setenv("LC_TIME", "C")
	passed, err := sandbox.ParseEnv("PASSED_BY_NAME")
	if err != nil {
		t.Fatal(err)
	}
	for _, sandboxed := range []bool{false, true} {
		name := "unsandboxed"
		if sandboxed {
			name = "sandboxed"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "")
			logs := &testlog.Buffer{}
			cfg := f.config(logs)
			if sandboxed {
				cfg = f.sandboxConfig(logs)
			}
			cfg.Sandbox.Env = []string{passed, "SET_HERE=a value"}
			sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "env | sort"})))
			if err := f.worker(cfg).RunItem(context.Background(), Item{Work: f.claim()}); err != nil {
				t.Fatal(err)
			}
			r := toolResults(f.events(sess.ID))
			if len(r) != 1 || r[0].isError {
				t.Fatalf("results = %+v", r)
			}
			env := r[0].text
			if strings.Contains(env, "WORKER_ONLY_SECRET") || strings.Contains(env, "s3cr3t") {
				t.Errorf("the worker's own variable reached the agent:\n%s", env)
			}
			user := "root"
			if sandboxed {
				user = "nobody"
			}
			for _, want := range []string{"PASSED_BY_NAME=from-the-worker\n", "SET_HERE=a value\n", "LC_TIME=C\n", "HOME=" + filepath.Join(cfg.Workdir, sess.ID+roomSuffix) + "\n", "PATH="} {
				if !strings.Contains(env, want) {
					t.Errorf("the agent's env lacks %q:\n%s", want, env)
				}
			}
			if os.Geteuid() == 0 && !strings.Contains(env, "USER="+user+"\n") {
				t.Errorf("the agent's env lacks USER=%s:\n%s", user, env)
			}
			for _, line := range strings.Split(strings.TrimSpace(env), "\n") {
				name, _, _ := strings.Cut(line, "=")
				switch {
				case name == "PWD", name == "SHLVL", name == "_", name == "OLDPWD":
					// bash's own
				case strings.HasPrefix(name, "LC_"), name == "LANG", name == "LANGUAGE", name == "TERM", name == "TZ", name == "PATH", name == "HOME", name == "USER",
					name == "PASSED_BY_NAME", name == "SET_HERE":
				default:
					t.Errorf("the agent's env holds %s, which is not on the allowlist", name)
				}
			}
			if logs.Line("session sandbox", "env=") == "" || strings.Contains(logs.String(), "from-the-worker") {
				t.Errorf("the session's log line should name the variables, never their values:\n%s", logs)
			}
		})
	}
}

// Run claims no more than MaxSessions items at once: with one slot, the
// second session stays queued while the first runs a long call, and is
// claimed and served once the first ends; with two, both run together.
func TestRunClaimsUpToMaxSessions(t *testing.T) {
	for _, max := range []int{1, 2} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			f := newFixture(t, "")
			logs := &testlog.Buffer{}
			cfg := f.config(logs)
			cfg.MaxSessions, cfg.MaxIdle = max, 50*time.Millisecond
			first := f.session(script(api.ScriptEndIdle, startedMarker("started")))
			second := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "echo second"})))
			stop := runWorker(t, f.worker(cfg))
			waitStarted(t, cfg.Workdir, "started")
			if max == 1 {
				time.Sleep(1500 * time.Millisecond) // more than a poll's wait
				if st := f.sessionWork(second.ID).State; st != api.WorkQueued {
					t.Fatalf("with one slot taken the second item is %s, want queued", st)
				}
				if _, err := f.admin.SendEvents(context.Background(), first.ID, api.UserInterrupt()); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the second session to be served", func() bool {
				return f.sessionWork(second.ID).State == api.WorkStopped
			})
			if max == 2 && f.sessionWork(first.ID).State != api.WorkActive {
				t.Errorf("the first session's long call did not run beside the second")
			}
			if r := toolResults(f.events(second.ID)); len(r) != 1 || r[0].text != "second\n" {
				t.Errorf("the second session's results = %+v", r)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Run claims an item only when it can start it at once: while the
// sessions it claimed are still mounting (their snapshots held here), the
// rest stay in the queue, where any worker may take them, though the
// worker has sessions to spare; once the mounts go on, every one is served.
func TestClaimsWaitForAFreeStart(t *testing.T) {
	f := newFixture(t, "")
	n := DefaultMaxStarting() + 2
	var sessions []*api.Session
	for i := range n {
		st := f.memStore(fmt.Sprintf("notes-%d", i), map[string]string{"/a.md": "a"})
		sessions = append(sessions, f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "true"})),
			attach(st, api.AccessReadWrite)))
	}
	release := make(chan struct{})
	var held atomic.Int32
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/snapshot") {
				held.Add(1)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	cfg := f.memoryConfig(&testlog.Buffer{})
	cfg.MaxSessions = n
	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the first sessions to reach their mounts", func() bool { return held.Load() == int32(DefaultMaxStarting()) })
	time.Sleep(1500 * time.Millisecond) // more than a poll's wait
	queued := 0
	for _, s := range sessions {
		if f.sessionWork(s.ID).State == api.WorkQueued {
			queued++
		}
	}
	if queued != n-DefaultMaxStarting() || held.Load() != int32(DefaultMaxStarting()) {
		t.Fatalf("with %d starts under way, %d items are queued and %d mounts began; want %d queued, %d mounts", DefaultMaxStarting(), queued, held.Load(), n-DefaultMaxStarting(), DefaultMaxStarting())
	}
	close(release)
	for _, s := range sessions {
		waitFor(t, "every session to be served", func() bool { return f.sessionWork(s.ID).State == api.WorkStopped })
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A session's events are followed while its memory mounts: the stream is
// open and the history listed before the mount is done, so the first call
// runs as soon as the tools are ready, and it still runs only then (it
// reads a file the mount brings).
func TestTheEventsAreFollowedWhileTheMemoryMounts(t *testing.T) {
	f := newFixture(t, "")
	st := f.memStore("notes", map[string]string{"/a.md": "from the store"})
	sess := f.session(script(api.ScriptEndTerminate, toolCall("read", map[string]any{"file_path": "/mnt/memory/notes/a.md"})),
		attach(st, api.AccessReadWrite))
	var streamed, listed, followedWhileMounting atomic.Bool
	f.srv.Wrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/events/stream"):
				streamed.Store(true)
			case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events"):
				listed.Store(true)
			case strings.HasSuffix(r.URL.Path, "/snapshot"):
				deadline := time.Now().Add(5 * time.Second)
				for !(streamed.Load() && listed.Load()) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				followedWhileMounting.Store(streamed.Load() && listed.Load())
			}
			h.ServeHTTP(w, r)
		})
	})
	logs := &testlog.Buffer{}
	stop := runWorker(t, f.worker(f.memoryConfig(logs)))
	waitFor(t, "the session to be served", func() bool { return f.sessionWork(sess.ID).State == api.WorkStopped })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !followedWhileMounting.Load() {
		t.Fatalf("the mount's snapshot was asked for before the session's event stream was open and its history listed (stream %v, history %v)", streamed.Load(), listed.Load())
	}
	results := toolResults(f.events(sess.ID))
	if len(results) != 1 || results[0].isError || !strings.Contains(results[0].text, "from the store") {
		t.Fatalf("tool results = %+v, want the memory's content: the call must run after the mount", results)
	}
}
