package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

// The README's first command: it must run on a machine with nothing set
// up, narrate the calls, the syncs and the versions, pass every check, and
// leave nothing behind.
func TestDemoRunsAndCleansUp(t *testing.T) {
	for _, v := range []string{"MEMSTORE_ADMIN_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_ENVIRONMENT_KEY"} {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"demo"}, testStreams(&out, &errb)); code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	text := out.String()
	for _, want := range []string{
		`mounted  "Project notes" at /mnt/memory/project-notes: 3 memories downloaded`,
		"call 3   write write a new memory",
		"REFUSED write: /mnt/memory/team-handbook/style.md is in the read-only memory store",
		"sync   uploaded /decisions/2026-05-up.md (Project notes)",
		"memory   final sync: 1 change",
		"modified  by session sesn_",
		"created   by API key apikey_",
		"✓ the agent's two changes are versions written by the session",
		"demo OK",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	// Where bubblewrap works the agent's bash reads a memory at its mount
	// path; elsewhere the demo says it ran without a sandbox.
	switch {
	case strings.Contains(text, "sandbox  bwrap: "):
		if !strings.Contains(text, "read the style guide with bash, at its mount path  ok      Write short sentences.") {
			t.Errorf("the sandboxed bash did not read the memory at its mount path:\n%s", text)
		}
	case !strings.Contains(text, "sandbox  none: "):
		t.Errorf("the demo does not say how bash was confined:\n%s", text)
	}
	if strings.Contains(text, "✗") {
		t.Errorf("a check failed:\n%s", text)
	}
	tmp := regexp.MustCompile(`all in (\S+)\n`).FindStringSubmatch(text)
	if tmp == nil {
		t.Fatalf("the demo does not say where it ran:\n%s", text)
	}
	if _, err := os.Stat(tmp[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo left %s behind (%v)", tmp[1], err)
	}
}

// `memstore up` is a server and a worker: a session created against it is
// served with its memory, and a restart serves the same environment.
func TestUpServesSessionsAndKeepsItsEnvironment(t *testing.T) {
	for _, v := range []string{"MEMSTORE_ADMIN_KEY", "ANTHROPIC_WORKDIR", "ANTHROPIC_MOUNT_ROOT", "ANTHROPIC_MAX_IDLE", "ANTHROPIC_MEMORY_SYNC_INTERVAL", "ANTHROPIC_SANDBOX"} {
		t.Setenv(v, "")
	}
	// A relative --data, as in the README: the hint must still work
	// from another folder.
	t.Chdir(t.TempDir())
	data := "memstore-data"
	start := func() (out *testlog.Buffer, stop func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		out = &testlog.Buffer{}
		code := make(chan int, 1)
		go func() {
			code <- run(ctx, []string{"up", "--addr", "127.0.0.1:0", "--data", data, "--metrics-addr", "127.0.0.1:0"}, testStreams(out, io.Discard))
		}()
		waitUntil(t, "up to print its environment key", func() bool { return strings.Contains(out.String(), "environment key") })
		return out, func() int { cancel(); return <-code }
	}
	field := func(out, name string) string {
		m := regexp.MustCompile(`(?m)^  ` + name + ` +(\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("up did not print %s:\n%s", name, out)
		}
		return m[1]
	}

	out, stop := start()
	baseURL, envID := field(out.String(), "API"), field(out.String(), "environment")
	if !strings.Contains(out.String(), "created; saved in") {
		t.Errorf("first start should create the environment:\n%s", out)
	}
	if info, err := os.Stat(filepath.Join(data, "up.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("up.json: %v, %v; want mode 0600 (it holds the environment key)", info, err)
	}
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(baseURL, client.WithAPIKey(strings.TrimSpace(string(key))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	keyPath, err := filepath.Abs(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: envID,
		Resources: []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID}},
		InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"write","input":{"file_path":"/mnt/memory/notes/up.md","content":"served by up\n"}},` +
			`{"name":"bash","input":{"command":"cat ` + keyPath + `"}}],"end":"terminate"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the memory written through up's worker", func() bool {
		for item, err := range admin.ListAllMemories(ctx, store.ID, client.ListMemoriesParams{View: api.ViewFull}) {
			if err == nil && item.Memory != nil && item.Memory.Path == "/up.md" && *item.Memory.Content == "served by up\n" {
				return true
			}
		}
		return false
	})
	waitUntil(t, "the session to end and its item to stop", func() bool {
		s, err := admin.GetSession(ctx, sess.ID)
		if err != nil || s.Status != api.SessionTerminated {
			return false
		}
		for w, err := range admin.ListAllWork(ctx, envID, api.WorkListParams{}) {
			if err != nil || w.State != api.WorkStopped {
				return false
			}
		}
		return true
	})
	// One /metrics shows the server's and the worker's series. The worker
	// counts its item once the teardown is over, which is after the server
	// saw the item stopped: wait for the count rather than race it.
	wants := []string{`memstore_memory_writes_total{op="create"} 1`, `memstore_worker_items_total{result="ok"} 1`, "go_goroutines "}
	var scraped []byte
	defer func() {
		if t.Failed() {
			t.Logf("up's last /metrics (wanted %q):\n%s", wants, scraped)
		}
	}()
	waitUntil(t, "up's /metrics to show the server's and the worker's series", func() bool {
		res, err := http.Get(field(out.String(), "metrics"))
		if err != nil {
			return false
		}
		defer res.Body.Close()
		if scraped, err = io.ReadAll(res.Body); err != nil {
			return false
		}
		for _, want := range wants {
			if !strings.Contains(string(scraped), want) {
				return false
			}
		}
		return true
	})
	// What up says about the sandbox holds: with bubblewrap the agent's
	// bash cannot read admin.key; without it, it can, as the line warns.
	var catKey *api.Event
	for e, err := range admin.ListAllEvents(ctx, sess.ID, api.EventListParams{Types: []string{api.EventUserToolResult}}) {
		if err != nil {
			t.Fatal(err)
		}
		catKey = &e
	}
	switch mode := field(out.String(), "sandbox"); {
	case catKey == nil:
		t.Fatal("the bash call got no result")
	case mode == "bwrap:" && (catKey.IsError == nil || !*catKey.IsError || !strings.Contains(catKey.Text(), "No such file or directory")):
		t.Errorf("sandboxed bash read admin.key: %q", catKey.Text())
	case mode == "none:" && catKey.Text() != string(key):
		t.Errorf("up warns that bash can read admin.key without a sandbox, but it read %q", catKey.Text())
	case mode != "bwrap:" && mode != "none:":
		t.Errorf("up's sandbox line says %q:\n%s", mode, out)
	}
	if code := stop(); code != 0 {
		t.Fatalf("up exit %d:\n%s", code, out)
	}
	entries, _ := os.ReadDir(filepath.Join(data, "memory"))
	if len(entries) != 0 {
		t.Errorf("up's mount root still holds %d folders", len(entries))
	}

	again, stop := start()
	defer stop()
	if got := field(again.String(), "environment"); got != envID || !strings.Contains(again.String(), "reused from") {
		t.Errorf("restart serves %s, want %s reused:\n%s", got, envID, again)
	}
	if strings.Contains(again.String(), "Generated the admin API key") {
		t.Errorf("a restart generated a new admin key")
	}
	// Keys are shown once, when they are made; a restart says where they are.
	if envKey := field(out.String(), "environment key"); !strings.HasPrefix(envKey, "sk-memstore-env-") || strings.Contains(again.String(), envKey) {
		t.Errorf("environment key %q: want it shown on the first start only:\n%s", envKey, again)
	}
	// The first console user is made once, and its password works.
	pw := regexp.MustCompile(`web console +(\S+): sign in as admin with password (\S+) `).FindStringSubmatch(out.String())
	if pw == nil || pw[1] != baseURL+"/console/" || strings.Contains(again.String(), pw[2]) {
		t.Errorf("up should print the console and the first user's password on the first start only:\n%s\n%s", out, again)
	} else if got := consoleSignIn(t, field(again.String(), "API"), "admin", pw[2]); got != http.StatusSeeOther {
		t.Errorf("signing in as admin with the printed password: status %d, want 303", got)
	}
	if abs, _ := filepath.Abs(data); !strings.Contains(again.String(), "MEMSTORE_DATA="+abs+"\n") {
		t.Errorf("the hint does not give the data folder as an absolute path:\n%s", again)
	}
}
