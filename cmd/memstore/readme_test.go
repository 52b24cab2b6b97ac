package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
)

// The shell blocks of README.md and of every guide in docs/ are run by
// TestReadmeShellBlocksRun. Every ```sh block runs, in a fresh folder with a
// fresh HOME, unless the line just before its fence says otherwise:
//
//	<!-- readme-test: skip: <why> -->   not run; the reason is required
//	<!-- readme-test: next to a server --> run with `memstore serve` already
//	                                       running for that folder, as a
//	                                       block that says "next to a local
//	                                       memstore serve" expects
//
// A block fenced as bash, shell, console or zsh fails the test: fence it as
// sh so that it runs, or mark it skipped. Output is fenced as text.
const readmeMarker = "<!-- readme-test: "

// repoRoot is where the tests of this package find the README and docs/.
const repoRoot = "../.."

// readmeBlock is one fenced block of a documentation file.
type readmeBlock struct {
	file    string // the file, relative to the repository root
	line    int    // of its opening fence, 1-based
	lang    string // the fence's info string
	marker  string // what its readme-test comment says, "" without one
	section string // the heading it is under
	body    string
}

func (b readmeBlock) String() string { return fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.section) }

// docFiles are the files whose blocks run: README.md, then every docs/*.md
// (a guide added later runs without a change here).
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, g := range guides {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(g, repoRoot+string(filepath.Separator))))
	}
	return files
}

// readmeBlocks reads the fenced blocks of every documentation file.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	for _, file := range docFiles(t) {
		blocks = append(blocks, fileBlocks(t, file)...)
	}
	return blocks
}

func fileBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	var section, prev string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{file: file, line: n, lang: strings.TrimPrefix(line, "```"), section: section}
			if m, ok := strings.CutPrefix(prev, readmeMarker); ok {
				cur.marker = strings.TrimSpace(strings.TrimSuffix(m, "-->"))
			}
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a block is left open (no closing ```)", file, cur.line)
	}
	return blocks
}

// readmeChecks are what a block must have done beyond exiting 0, keyed by a
// text only that block contains.
func readmeChecks() map[string]func(t *testing.T, r readmeRun) {
	return map[string]func(t *testing.T, r readmeRun){
		"memstore demo": func(t *testing.T, r readmeRun) {
			if !strings.Contains(r.stdout, "demo OK") {
				t.Errorf("the demo did not say it was OK:\n%s", r.stdout)
			}
		},
		// The curl walk-through ends by stopping the server it started in
		// the background, and shows that it stopped.
		"./memstore serve &": func(t *testing.T, r readmeRun) {
			for _, want := range []string{`"path":"/hello.md"`, `"content":"Hello, memory!"`, "memory_path_conflict_error", "the server has stopped"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the curl walk-through's output lacks %s:\n%s", want, r.stdout)
				}
			}
		},
		// The --tools example makes an agent whose bash asks first.
		`"permission_policy"`: func(t *testing.T, r readmeRun) {
			var a api.Agent
			if err := json.NewDecoder(strings.NewReader(r.stdout)).Decode(&a); err != nil {
				t.Fatalf("agent get --output json printed no agent (%v):\n%s", err, r.stdout)
			}
			if a.ID != r.vars["AGENT"] || len(a.Tools) != 1 || !strings.Contains(string(a.Tools[0]), `"always_ask"`) {
				t.Errorf("the agent made with --tools has tools %s, want the toolset with bash always_ask", a.Tools)
			}
		},
		"--store $STORE --instructions": checkCLIWalkThrough, // the CLI walk-through of docs/cli.md
		"memstore version": func(t *testing.T, r readmeRun) {
			if !strings.HasPrefix(r.stdout, "memstore ") {
				t.Errorf("memstore version, installed with go install, printed:\n%s", r.stdout)
			}
		},
		"memstore memory diff": func(t *testing.T, r readmeRun) {
			for _, want := range []string{"milk\neggs", "OPERATION", "modified", "+eggs\n"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the memory history walk-through's output lacks %q:\n%s", want, r.stdout)
				}
			}
		},
	}
}

// readmeRun is what running one block left behind.
type readmeRun struct {
	stdout string
	vars   map[string]string // the block's upper-case shell variables at its end
	server *runningServer    // the server next to it, if it asked for one
	mnt    string            // the folder standing in for /tmp/mnt/memory
}

// Each shell block of the README and the guides runs as printed, with bash,
// in a fresh folder and HOME, with nothing installed but memstore's own build:
//   - `go build -o X ./cmd/memstore`, `go install ./cmd/memstore` and
//     `go run ./cmd/memstore …` are answered by a stand-in go that uses the
//     memstore this test binary is (memstoreBinary), so no block compiles;
//     any other go command fails and names the markers above;
//   - the server's port 8080 becomes a free one (localhost:8080 in the
//     text, MEMSTORE_ADDR and the base URLs in the environment), and the
//     mount root /tmp/mnt/memory a temporary folder, so that runs on one
//     machine do not collide.
//
// If the documented commands drift from the CLI, or a block stops working
// on a fresh clone, this fails, naming the file and line of the block.
func TestReadmeShellBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memstore processes")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the blocks of README.md and docs/*.md call curl: install it (apt-get install curl)")
	}
	bin := memstoreBinary(t)
	checks, ran := readmeChecks(), map[string]bool{}
	for _, b := range readmeBlocks(t) {
		switch b.lang {
		case "bash", "shell", "console", "zsh":
			t.Errorf("%s is fenced as %s: fence it as sh so that this test runs it, or mark it %sskip: <why> -->", b, b.lang, readmeMarker)
			continue
		case "sh":
		default:
			continue
		}
		withServer := false
		switch {
		case strings.HasPrefix(b.marker, "skip:"):
			if strings.TrimSpace(strings.TrimPrefix(b.marker, "skip:")) == "" {
				t.Errorf("%s is skipped without a reason", b)
			}
			continue
		case b.marker == "next to a server":
			withServer = true
		case b.marker != "":
			t.Errorf("%s: unknown marker %q (see readme_test.go)", b, b.marker)
			continue
		}
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			r := runReadmeBlock(t, bin, b, withServer)
			for key, check := range checks {
				if strings.Contains(b.body, key) {
					ran[key] = true
					check(t, r)
				}
			}
		})
	}
	for key := range checks {
		if !ran[key] {
			t.Errorf("no block that runs, in README.md or docs/*.md, contains %q any more; update readmeChecks", key)
		}
	}
}

func runReadmeBlock(t *testing.T, bin string, b readmeBlock, withServer bool) readmeRun {
	dir, home, tools := t.TempDir(), t.TempDir(), t.TempDir()
	r := readmeRun{mnt: filepath.Join(t.TempDir(), "mnt", "memory")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	addr := "127.0.0.1:" + port
	if withServer {
		r.server, err = startServer(context.Background(), serveOptions{addr: addr, dataDir: filepath.Join(dir, "memstore-data")}, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.server.shutdown() })
	}
	goStandIn := `#!/bin/sh
# The docs test's go: it answers the documented go commands with the memstore
# the test built (see readme_test.go); anything else fails.
case "$1 $2 $4" in
"build -o ./cmd/memstore") [ $# -eq 4 ] && exec cp "$MEMSTORE_TEST_BIN" "$3" ;;
esac
case "$*" in
"install ./cmd/memstore") mkdir -p "$HOME/go/bin" && exec cp "$MEMSTORE_TEST_BIN" "$HOME/go/bin/memstore" ;;
"run ./cmd/memstore "*) shift 2; exec "$MEMSTORE_TEST_BIN" "$@" ;;
esac
echo "go $*: the test of README.md and docs/*.md runs only go build -o FILE ./cmd/memstore, go install ./cmd/memstore and go run ./cmd/memstore; mark this block <!-- readme-test: skip: <why> --> or teach cmd/memstore/readme_test.go" >&2
exit 1
`
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(goStandIn), 0o755); err != nil {
		t.Fatal(err)
	}

	body := strings.ReplaceAll(b.body, "localhost:8080", "localhost:"+port)
	body = strings.ReplaceAll(body, "/tmp/mnt/memory", r.mnt)
	var vars []string
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(body, -1) {
		vars = append(vars, m[1])
	}
	script := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n" + body +
		"\nfor v in " + strings.Join(vars, " ") + "; do printf 'README-VAR %s=%s\\n' \"$v\" \"${!v-}\"; done\n"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + home,
		"PATH=" + tools + ":" + filepath.Join(home, "go", "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TMPDIR=" + os.TempDir(),
		"MEMSTORE_TEST_BIN=" + bin,
		"MEMSTORE_ADDR=" + addr,
		"MEMSTORE_BASE_URL=http://" + addr,
		"ANTHROPIC_BASE_URL=http://" + addr,
	}
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s failed: %v\nthe block as run:\n%s\nstdout:\n%s\nstderr:\n%s", b, err, body, out, stderr.String())
	}
	r.stdout, r.vars = string(out), map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if kv, ok := strings.CutPrefix(line, "README-VAR "); ok {
			k, v, _ := strings.Cut(kv, "=")
			r.vars[k] = v
		}
	}
	return r
}

// The CLI walk-through makes a session whose worker writes /done.md into
// the store, ends it, and leaves the mount root empty.
func checkCLIWalkThrough(t *testing.T, r readmeRun) {
	store, session := r.vars["STORE"], r.vars["SESSION"]
	if r.server == nil || !strings.HasPrefix(store, "memstore_") || !strings.HasPrefix(session, "sesn_") {
		t.Fatalf("the block did not make a store and a session next to a server: %v", r.vars)
	}
	get := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequest("GET", r.server.baseURL+path, nil)
		req.Header.Set("x-api-key", r.server.adminKey)
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
		t.Fatalf("no /done.md created by the session; versions: %+v\nstdout:\n%s", versions.Data, r.stdout)
	}
	if !strings.Contains(r.stdout, "agent.tool_use") {
		t.Errorf("the block's output lacks the session's events:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`"path":\s*"/done.md"`).MatchString(r.stdout) {
		t.Errorf("the block's listing of versions lacks /done.md:\n%s", r.stdout)
	}
	if entries, _ := os.ReadDir(r.mnt); len(entries) != 0 {
		t.Errorf("the worker left %d folders in the mount root", len(entries))
	}
}
