package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/workercli"
)

// Every setting a worker refuses is refused before it polls: the command
// exits 1 with a message naming the flag (or variable) and what to give
// instead, and the session's queued item is still queued for a worker
// that is set up right.
func TestWorkerRefusesBadSettingsBeforeClaimingAnything(t *testing.T) {
	for _, v := range []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_ENVIRONMENT_ID", "ANTHROPIC_ENVIRONMENT_KEY", "ANTHROPIC_WORKDIR",
		"ANTHROPIC_MOUNT_ROOT", "ANTHROPIC_MEMORY_SYNC_INTERVAL", "ANTHROPIC_MEMORY_SYNC_DELETIONS", "ANTHROPIC_MAX_IDLE",
		"ANTHROPIC_LOG_FORMAT", "ANTHROPIC_WORK_ID", "ANTHROPIC_SESSION_ID", "ANTHROPIC_WORK_SECRET", "ANTHROPIC_WORK_LAST_HEARTBEAT",
		"ANTHROPIC_SANDBOX", "ANTHROPIC_SANDBOX_NETWORK"} {
		t.Setenv(v, "")
	}
	s := newWorkerSetup(t)
	store, err := s.admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.session(t, `{"tool_calls":[{"name":"bash","input":{"command":"echo hi"}}]}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID})
	item := s.work(t, sess.ID)

	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty-secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll := []string{"worker", "poll", "--base-url", s.rs.baseURL, "--environment-id", s.env.ID, "--environment-key", s.key, "--workdir", dir, "--mount-root", dir}
	runItem := []string{"worker", "run", "--base-url", s.rs.baseURL, "--environment-id", s.env.ID, "--work-id", item.ID, "--session-id", sess.ID, "--workdir", dir, "--mount-root", dir}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"interval not a duration", append(poll, "--memory-sync-interval", "often"), []string{"--memory-sync-interval", "15s"}},
		{"interval below the minimum", append(poll, "--memory-sync-interval", "1s"), []string{"memory_sync_interval", "minimum is 5s"}},
		{"unknown deletion mode", append(poll, "--memory-sync-deletions", "sometimes"), []string{"--memory-sync-deletions", "log_only"}},
		{"negative max idle", append(poll, "--max-idle", "-1s"), []string{"--max-idle", "0 to keep"}},
		{"lease ttl not a duration", append(poll, "--lease-ttl", "soon"), []string{"--lease-ttl", "0 to leave it to the server"}},
		{"negative lease ttl", append(poll, "--lease-ttl", "-5s"), []string{"--lease-ttl", "a duration such as 10s"}},
		{"unknown log format", append(poll, "--log-format", "xml"), []string{"--log-format", "text or json"}},
		{"missing mount root", append(poll, "--mount-root", missing), []string{missing, "does not exist", "--mount-root"}},
		{"missing workdir", append(poll, "--workdir", missing), []string{missing, "--workdir"}},
		{"unknown sandbox mode", append(poll, "--sandbox", "docker"), []string{"--sandbox", "auto", "bwrap", "none"}},
		{"unknown sandbox network", append(poll, "--sandbox-network", "maybe"), []string{"--sandbox-network", "on, off or host"}},
		{"sandbox bind without a destination", append(poll, "--sandbox-bind", "/usr"), []string{"-sandbox-bind", "SRC:DST"}},
		{"sandbox bind of a missing folder", append(poll, "--sandbox-bind", missing+":/opt/x"), []string{"sandbox bind", missing}},
		{"negative max sessions", append(poll, "--max-sessions", "-2"), []string{"--max-sessions", "1 or more"}},
		{"max sessions not a number", append(poll, "--max-sessions", "many"), []string{"--max-sessions", "a whole number"}},
		{"negative max starting", append(poll, "--max-starting", "-1"), []string{"--max-starting", "1 or more"}},
		{"max starting not a number", append(poll, "--max-starting", "all"), []string{"--max-starting", "a whole number"}},
		{"sandbox env not set in the worker", append(poll, "--sandbox-env", "MEMSTORE_TEST_UNSET_VARIABLE"), []string{"--sandbox-env", "is not set in the worker's environment", "MEMSTORE_TEST_UNSET_VARIABLE=value"}},
		{"sandbox env of HOME", append(poll, "--sandbox-env", "HOME=/"), []string{"--sandbox-env", "cannot be passed"}},
		{"stray argument", append(poll, "now"), []string{`unexpected argument "now"`}},
		{"poll without a key", []string{"worker", "poll", "--base-url", s.rs.baseURL, "--environment-id", s.env.ID, "--workdir", dir}, []string{"--environment-key", "ANTHROPIC_ENVIRONMENT_KEY"}},
		{"run without a work id", []string{"worker", "run", "--environment-id", s.env.ID, "--session-id", sess.ID}, []string{"--work-id is required", "ANTHROPIC_WORK_ID"}},
		{"run without a session id", []string{"worker", "run", "--environment-id", s.env.ID, "--work-id", item.ID}, []string{"--session-id is required"}},
		{"run without any credential", runItem, []string{"ANTHROPIC_WORK_SECRET", "--work-secret-file"}},
		{"secret file missing", append(runItem, "--work-secret-file", missing), []string{"--work-secret-file", missing}},
		{"secret file empty", append(runItem, "--work-secret-file", empty), []string{"--work-secret-file", "empty"}},
		{"secret file is a folder", append(runItem, "--work-secret-file", dir), []string{"--work-secret-file", "not a regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, testStreams(&stdout, &stderr)); code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
			}
			for _, part := range tc.want {
				if !strings.Contains(stderr.String(), part) {
					t.Errorf("stderr %q lacks %q", stderr.String(), part)
				}
			}
		})
	}
	if got := s.work(t, sess.ID); got.ID != item.ID || got.State != api.WorkQueued {
		t.Errorf("work item %s is %s after the refusals, want %s still queued", got.ID, got.State, item.ID)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a refusal created %s", missing)
	}
}

// The operator verbs check what they were given before they send anything:
// a clear error naming the flag, exit 1 (2 for a wrong argument count, with
// the usage), and nothing created or changed on the server.
func TestOperatorVerbsRefuseBadInputBeforeSendingIt(t *testing.T) {
	rs, _ := cliServer(t)
	t.Setenv("MEMSTORE_BASE_URL", rs.baseURL)
	t.Setenv("MEMSTORE_API_KEY", rs.adminKey)
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/a.md", Content: "a"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	session := []string{"session", "create", "--env", env.ID, "--agent", agent.ID}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"session without an environment", []string{"session", "create", "--agent", agent.ID}, 1, []string{"--env and --agent are required"}},
		{"store with an unknown access", append(session, "--store", store.ID+":write"), 1, []string{"--store", "read_only (ro) or read_write (rw)"}},
		{"instructions for a store not attached", append(session, "--store", store.ID, "--instructions", "memstore_other=x"), 1, []string{"--instructions", "STORE_ID=TEXT"}},
		{"message from a missing file", append(session, "--message", "@/nonexistent/script.json"), 1, []string{"/nonexistent/script.json"}},
		{"agent tools not JSON", []string{"agent", "create", "b", "--tools", "bash"}, 1, []string{"--tools", "JSON array"}},
		{"metadata without a value", []string{"store", "create", "other", "--metadata", "team"}, 2, []string{"want key=value", "Usage: memstore store create"}},
		{"update with nothing to change", []string{"memory", "update", store.ID, mem.ID}, 1, []string{"--content and/or --path"}},
		{"retention of an unknown form", []string{"store", "retention", store.ID, "keep_some"}, 2, []string{`"keep_some"`, "Usage: memstore store retention"}},
		{"retention in fractions of a second", []string{"store", "retention", store.ID, "max_age=1.5s"}, 2, []string{"whole seconds"}},
		{"follow a filtered history", []string{"session", "events", "sesn_x", "--follow", "--type", "agent.message"}, 1, []string{"--type", "--follow"}},
		{"a missing argument", []string{"memory", "create", store.ID, "/b.md"}, 2, []string{"wrong number of arguments", "Usage: memstore memory create"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(ctx, tc.args, testStreams(&stdout, &stderr)); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, part := range tc.want {
				if !strings.Contains(stderr.String(), part) {
					t.Errorf("stderr %q lacks %q", stderr.String(), part)
				}
			}
			if n := strings.Count(stderr.String(), tc.want[0]); n != 1 {
				t.Errorf("stderr says %q %d times, want once:\n%s", tc.want[0], n, stderr.String())
			}
		})
	}
	count := func(seq func(yield func(struct{}, error) bool)) int {
		n := 0
		for _, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	sessions := count(func(yield func(struct{}, error) bool) {
		for _, err := range admin.ListAllSessions(ctx, api.SessionListParams{}) {
			if !yield(struct{}{}, err) {
				return
			}
		}
	})
	agents := count(func(yield func(struct{}, error) bool) {
		for _, err := range admin.ListAllAgents(ctx, api.AgentListParams{}) {
			if !yield(struct{}{}, err) {
				return
			}
		}
	})
	stores := count(func(yield func(struct{}, error) bool) {
		for _, err := range admin.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{}) {
			if !yield(struct{}{}, err) {
				return
			}
		}
	})
	if sessions != 0 || agents != 1 || stores != 1 {
		t.Errorf("after the refusals: %d sessions, %d agents, %d stores; want 0, 1, 1", sessions, agents, stores)
	}
	if got, err := admin.GetMemory(ctx, store.ID, mem.ID, client.GetMemoryParams{}); err != nil || got.MemoryVersionID != mem.MemoryVersionID {
		t.Errorf("the memory changed: %+v, %v", got, err)
	}
}

// A usage text (on -h, or after a bad flag) shows each flag's default; a
// key taken from the environment must not be one of them, or asking for
// help prints a credential to the terminal, the scrollback and any log
// that captures stderr.
func TestUsageNeverPrintsACredentialFromTheEnvironment(t *testing.T) {
	const apiKey, envKey = "sk-memstore-from-the-environment", "sk-memstore-env-from-the-environment"
	t.Setenv("MEMSTORE_API_KEY", apiKey)
	t.Setenv("MEMSTORE_ADMIN_KEY", apiKey)
	t.Setenv("ANTHROPIC_ENVIRONMENT_KEY", envKey)
	for _, args := range [][]string{
		{"env", "list", "-h"},
		{"store", "create", "--no-such-flag"},
		{"worker", "poll", "-h"},
		{"worker", "run", "--no-such-flag"},
		{"up", "-h"},
		{"serve", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		run(context.Background(), args, testStreams(&stdout, &stderr))
		if out := stdout.String() + stderr.String(); strings.Contains(out, apiKey) || strings.Contains(out, envKey) {
			t.Errorf("memstore %s printed a key:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(stderr.String(), "Usage") {
			t.Errorf("memstore %s printed no usage:\n%s", strings.Join(args, " "), stderr.String())
		}
	}
}

// docs/worker.md and the worker's own log line say --memory-sync-interval=-1
// runs sessions without memory: any negative value disables it, so a
// negative number needs no unit. A positive one still does.
func TestMemorySyncIntervalOfMinusOneDisablesMemory(t *testing.T) {
	for _, tc := range []struct {
		value    string
		disabled bool
		refused  bool
	}{
		{"-1", true, false},
		{"-1s", true, false},
		{"15s", false, false},
		{"15", false, true},
		{"-x", false, true},
	} {
		f := workercli.Flags{BaseURL: "http://127.0.0.1:1", SyncInterval: tc.value, SyncDeletions: "enabled", MaxIdle: "60s", Sandbox: "none", SandboxNetwork: "on"}
		cfg, err := f.Config(slog.New(slog.DiscardHandler))
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "--memory-sync-interval")):
			t.Errorf("%q: err %v, want a refusal naming the flag", tc.value, err)
		case !tc.refused && err != nil:
			t.Errorf("%q: refused: %v", tc.value, err)
		case !tc.refused && (cfg.MemorySyncInterval < 0) != tc.disabled:
			t.Errorf("%q: interval %v, want disabled=%v", tc.value, cfg.MemorySyncInterval, tc.disabled)
		}
	}
}
