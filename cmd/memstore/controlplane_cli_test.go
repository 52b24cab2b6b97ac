package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// cliServer starts a real server (as `memstore serve` does) on a free port
// with a fresh data folder.
func cliServer(t *testing.T) (*runningServer, string) {
	t.Helper()
	data := t.TempDir()
	return testServe(t, serveOptions{dataDir: data}), data
}

// testServe starts a real server with opts, on a free port and a fresh
// data folder unless opts names them, with no keys from the environment;
// it stops with the test.
func testServe(t *testing.T, opts serveOptions) *runningServer {
	t.Helper()
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	t.Setenv("MEMSTORE_API_KEY", "")
	if opts.addr == "" {
		opts.addr = "127.0.0.1:0"
	}
	if opts.dataDir == "" {
		opts.dataDir = t.TempDir()
	}
	rs, err := startServer(context.Background(), opts, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.shutdown() })
	return rs
}

// memstoreCLI runs the binary's entry point with args and returns stdout;
// it fails the test unless the exit status is want.
func memstoreCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	return memstoreCLIInput(t, want, "", args...)
}

// memstoreCLIInput is memstoreCLI with input on standard input.
func memstoreCLIInput(t *testing.T, want int, input string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, streams{strings.NewReader(input), &out, &errb}); code != want {
		t.Fatalf("memstore %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String()
}

// testStreams are a command's streams with nothing on standard input.
func testStreams(stdout, stderr io.Writer) streams {
	return streams{strings.NewReader(""), stdout, stderr}
}

func decodeOut(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, out)
	}
}

func TestCLIEnvironmentsAgentsAndSessions(t *testing.T) {
	rs, data := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}

	var env api.Environment
	decodeOut(t, memstoreCLI(t, 0, append([]string{"env", "create", "build farm", "--metadata", "team=infra"}, conn...)...), &env)
	if env.Name != "build farm" || env.Config.Type != api.EnvironmentConfigSelfHosted || env.Metadata["team"] != "infra" {
		t.Fatalf("env create printed %+v", env)
	}
	var key api.EnvironmentKey
	decodeOut(t, memstoreCLI(t, 0, append([]string{"env", "key", "create", env.ID, "--name", "ci"}, conn...)...), &key)
	if !strings.HasPrefix(key.Key, "sk-memstore-env-") || key.EnvironmentID != env.ID {
		t.Fatalf("env key create printed %+v", key)
	}
	var keys []api.EnvironmentKey
	listed := memstoreCLI(t, 0, append([]string{"env", "key", "list", env.ID}, conn...)...)
	decodeOut(t, listed, &keys)
	if len(keys) != 1 || keys[0].ID != key.ID || keys[0].Name != "ci" || strings.Contains(listed, key.Key) {
		t.Fatalf("env key list printed %s", listed)
	}
	var revoked api.Deleted
	decodeOut(t, memstoreCLI(t, 0, append([]string{"env", "key", "revoke", env.ID, key.ID}, conn...)...), &revoked)
	if revoked.ID != key.ID || revoked.Type != api.EnvironmentKeyDeletedType {
		t.Fatalf("env key revoke printed %+v", revoked)
	}
	decodeOut(t, memstoreCLI(t, 0, append([]string{"env", "key", "list", env.ID}, conn...)...), &keys)
	if len(keys) != 0 {
		t.Fatalf("env key list after the revoke: %+v", keys)
	}
	// Without --api-key, the admin.key of the data folder is used.
	var envs []api.Environment
	decodeOut(t, memstoreCLI(t, 0, "env", "list", "--base-url", rs.baseURL, "--data", data), &envs)
	if len(envs) != 1 || envs[0].ID != env.ID {
		t.Fatalf("env list printed %+v", envs)
	}

	var ag api.Agent
	decodeOut(t, memstoreCLI(t, 0, append([]string{"agent", "create", "notes-bot"}, conn...)...), &ag)
	if ag.Model.ID != api.ScriptedModel || len(ag.Tools) != 1 {
		t.Fatalf("agent create printed %+v", ag)
	}

	script := `{"tool_calls":[{"name":"bash","input":{"command":"echo hi"}}]}`
	var sess api.Session
	decodeOut(t, memstoreCLI(t, 0, append([]string{"session", "create", "--env", env.ID, "--agent", ag.ID, "--title", "first", "--message", script}, conn...)...), &sess)
	if sess.Status != api.SessionRunning || sess.Title == nil || *sess.Title != "first" {
		t.Fatalf("session create printed %+v", sess)
	}
	lines := memstoreCLI(t, 0, append([]string{"session", "events", sess.ID}, conn...)...)
	if !strings.Contains(lines, "agent.tool_use") || !strings.Contains(lines, `bash {"command":"echo hi"}`) {
		t.Fatalf("session events printed:\n%s", lines)
	}
	memstoreCLI(t, 0, append([]string{"session", "interrupt", sess.ID}, conn...)...)
	memstoreCLIInput(t, 0, `{"tool_calls":[]}`, append([]string{"session", "send", sess.ID, "-"}, conn...)...)
	jsonLines := memstoreCLI(t, 0, append([]string{"session", "events", "--json", "--type", "agent.message", sess.ID}, conn...)...)
	var last api.Event
	decodeOut(t, strings.TrimSpace(jsonLines), &last)
	if last.Type != api.EventAgentMessage || !strings.HasPrefix(last.Text(), "Script finished: 0 tool call(s)") {
		t.Fatalf("session events --json printed:\n%s", jsonLines)
	}

	var got api.Session
	decodeOut(t, memstoreCLI(t, 0, append([]string{"session", "get", sess.ID}, conn...)...), &got)
	if got.Status != api.SessionIdle {
		t.Fatalf("session get: status %s", got.Status)
	}
	var list []api.Session
	decodeOut(t, memstoreCLI(t, 0, append([]string{"session", "list", "--env", env.ID, "--status", "idle"}, conn...)...), &list)
	if len(list) != 1 {
		t.Fatalf("session list printed %d sessions", len(list))
	}
	decodeOut(t, memstoreCLI(t, 0, append([]string{"session", "archive", sess.ID}, conn...)...), &got)
	if got.Status != api.SessionTerminated {
		t.Fatalf("session archive: status %s", got.Status)
	}
	// The environment still has a session: the server's refusal is shown.
	var errb bytes.Buffer
	if code := run(context.Background(), append([]string{"env", "delete", env.ID}, conn...), testStreams(io.Discard, &errb)); code != 1 || !strings.Contains(errb.String(), "still has sessions") {
		t.Fatalf("env delete of an environment in use: exit %d, %s", code, errb.String())
	}
	memstoreCLI(t, 0, append([]string{"session", "delete", sess.ID}, conn...)...)
	memstoreCLI(t, 0, append([]string{"env", "delete", env.ID}, conn...)...)
	memstoreCLI(t, 0, append([]string{"agent", "archive", ag.ID}, conn...)...)
}

func TestCLIUsageErrors(t *testing.T) {
	memstoreCLI(t, 2, "env")
	memstoreCLI(t, 2, "env", "frobnicate")
	memstoreCLI(t, 2, "env", "get")
	memstoreCLI(t, 2, "session", "send", "only-one-arg")
	memstoreCLI(t, 2, "worker")
	memstoreCLI(t, 2, "worker", "frobnicate")
	// Asking for the usage is not an error, at any level.
	memstoreCLI(t, 0, "-h")
	memstoreCLI(t, 0, "env", "-h")
	memstoreCLI(t, 0, "env", "get", "-h")
	memstoreCLI(t, 0, "worker", "poll", "-h")
	var errb bytes.Buffer
	t.Setenv("MEMSTORE_API_KEY", "")
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	if code := run(context.Background(), []string{"env", "list", "--data", t.TempDir()}, testStreams(io.Discard, &errb)); code != 1 || !strings.Contains(errb.String(), "no API key") {
		t.Fatalf("missing key: exit %d, %s", code, errb.String())
	}
}

// TestCLIReadmeFlow is docs/cli.md's walk-through: environment, key, agent,
// store with a memory, and a session that attaches it.
func TestCLIReadmeFlow(t *testing.T) {
	rs, data := cliServer(t)
	t.Setenv("MEMSTORE_BASE_URL", rs.baseURL)
	t.Setenv("MEMSTORE_DATA", data)

	// -q prints just the id (or, for a new key, the key) for scripts.
	id := func(args ...string) string { return strings.TrimSpace(memstoreCLI(t, 0, append(args, "-q")...)) }
	env := api.Environment{ID: id("env", "create", "laptop")}
	key := id("env", "key", "create", env.ID)
	if !strings.HasPrefix(key, "sk-memstore-env-") || !strings.HasPrefix(env.ID, "env_") {
		t.Fatalf("env create -q / env key create -q printed %q, %q", env.ID, key)
	}
	ag := api.Agent{SessionAgent: api.SessionAgent{ID: id("agent", "create", "note-taker")}}
	store := api.MemoryStore{ID: id("store", "create", "Team Notes", "--description", "what the team knows")}
	if ids := memstoreCLI(t, 0, "env", "list", "-q"); ids != env.ID+"\n" {
		t.Fatalf("env list -q printed %q", ids)
	}
	var mem api.Memory
	decodeOut(t, memstoreCLI(t, 0, "memory", "create", store.ID, "/todo.md", "--", "- ship it"), &mem)
	if got := memstoreCLI(t, 0, "memory", "get", store.ID, mem.ID); got != "- ship it" {
		t.Fatalf("memory get printed %q", got)
	}
	var updated api.Memory
	decodeOut(t, memstoreCLI(t, 0, "memory", "update", store.ID, mem.ID, "--content", "- shipped", "--if-sha256", mem.ContentSHA256), &updated)
	if updated.ContentSHA256 == mem.ContentSHA256 {
		t.Fatal("memory update changed nothing")
	}
	var items []api.MemoryListItem
	decodeOut(t, memstoreCLI(t, 0, "memory", "list", store.ID), &items)
	if len(items) != 1 || items[0].Memory == nil || items[0].Memory.Path != "/todo.md" {
		t.Fatalf("memory list printed %+v", items)
	}
	var versions []api.MemoryVersion
	decodeOut(t, memstoreCLI(t, 0, "memory", "versions", store.ID), &versions)
	if len(versions) != 2 || versions[0].Operation != api.OperationModified {
		t.Fatalf("memory versions printed %+v", versions)
	}
	var stores []api.MemoryStore
	decodeOut(t, memstoreCLI(t, 0, "store", "list"), &stores)
	if len(stores) != 1 {
		t.Fatalf("store list printed %+v", stores)
	}

	script := `{"tool_calls":[{"name":"read","input":{"file_path":"/mnt/memory/team-notes/todo.md"}}],"end":"terminate"}`
	var sess api.Session
	decodeOut(t, memstoreCLI(t, 0, "session", "create", "--env", env.ID, "--agent", ag.ID,
		"--store", store.ID, "--instructions", store.ID+"=one task per line", "--message", script), &sess)
	if len(sess.Resources) != 1 || sess.Resources[0].MountPath != "/mnt/memory/team-notes" || *sess.Resources[0].Instructions != "one task per line" {
		t.Fatalf("session create printed %+v", sess.Resources)
	}
	if out := memstoreCLI(t, 0, "session", "events", sess.ID); !strings.Contains(out, "agent.tool_use") {
		t.Fatalf("session events printed:\n%s", out)
	}
	var ro api.Session
	decodeOut(t, memstoreCLI(t, 0, "session", "create", "--env", env.ID, "--agent", ag.ID, "--store", store.ID+":ro"), &ro)
	if ro.Resources[0].Access != api.AccessReadOnly {
		t.Fatalf("--store ID:ro attached %+v", ro.Resources[0])
	}

	var deleted api.Deleted
	decodeOut(t, memstoreCLI(t, 0, "memory", "delete", store.ID, mem.ID), &deleted)
	decodeOut(t, memstoreCLI(t, 0, "store", "archive", store.ID), &store)
	if store.ArchivedAt == nil {
		t.Fatal("store archive did not archive")
	}
}
