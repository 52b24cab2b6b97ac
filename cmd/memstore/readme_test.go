package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// readmeCLIBlock returns the first sh block of the README's section on the
// operator CLI.
func readmeCLIBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Environments, agents and sessions from the CLI\n")
	if !ok {
		t.Fatal("the README has no section \"Environments, agents and sessions from the CLI\"")
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("that README section has no sh block")
	}
	return block
}

// The README shows how to create an environment, a key, an agent, a store
// and a session from the CLI, and how to serve the session. This runs that
// block as written, with bash, in a fresh folder next to a running server
// (so the CLI finds memstore-data/admin.key by itself, as the README
// says), changing only the build line and the mount root. If the README's
// commands drift from the CLI, this fails.
func TestReadmeCLIWalkThroughRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds memstore and runs a worker")
	}
	block := readmeCLIBlock(t)
	const build, mountRoot = "go build -o memstore ./cmd/memstore", "/tmp/mnt/memory"
	if strings.Count(block, build) != 1 || strings.Count(block, mountRoot) < 2 {
		t.Fatalf("the README block no longer builds with %q or mounts under %s; update this test:\n%s", build, mountRoot, block)
	}
	bin := memstoreBinary(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt", "memory")
	block = strings.ReplaceAll(block, build, `cp "$MEMSTORE_TEST_BIN" memstore`)
	block = strings.ReplaceAll(block, mountRoot, `"$MEMSTORE_TEST_MNT"`)
	script := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + block + "\necho \"README-IDS $STORE $SESSION\"\n"

	for _, v := range []string{"MEMSTORE_ADMIN_KEY", "MEMSTORE_API_KEY"} {
		t.Setenv(v, "")
	}
	rs, err := startServer(context.Background(), serveOptions{addr: "127.0.0.1:0", dataDir: filepath.Join(dir, "memstore-data")}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.shutdown() })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMSTORE_") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MEMSTORE_TEST_BIN="+bin, "MEMSTORE_TEST_MNT="+mnt,
		"MEMSTORE_BASE_URL="+rs.baseURL, "ANTHROPIC_BASE_URL="+rs.baseURL)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's CLI block failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	m := regexp.MustCompile(`README-IDS (memstore_\S+) (sesn_\S+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the block did not make a store and a session:\n%s", out)
	}
	store, session := m[1], m[2]

	get := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequest("GET", rs.baseURL+path, nil)
		req.Header.Set("x-api-key", rs.adminKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
	}
	var sess api.Session
	get("/v1/sessions/"+session, &sess)
	if sess.Status != api.SessionTerminated || len(sess.Resources) != 1 || sess.Resources[0].Instructions == nil || *sess.Resources[0].Instructions != "one task per line" {
		t.Fatalf("the README's session = %+v", sess)
	}
	var versions api.Page[api.MemoryVersion]
	get("/v1/memory_stores/"+store+"/memory_versions?view=full", &versions)
	var done bool
	for _, v := range versions.Data {
		if v.Path != nil && *v.Path == "/done.md" && v.Operation == api.OperationCreated && v.Content != nil && *v.Content == "released" &&
			v.CreatedBy == (api.Actor{Type: api.SessionActor, SessionID: session}) {
			done = true
		}
	}
	if !done {
		t.Fatalf("no /done.md created by the session; versions: %+v\nstdout:\n%s", versions.Data, out)
	}
	if !strings.Contains(string(out), "agent.tool_use") || !strings.Contains(string(out), "/done.md") {
		t.Errorf("the block's output lacks the session's events or the versions:\n%s", out)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("the worker left %d folders in the mount root", len(entries))
	}
}
