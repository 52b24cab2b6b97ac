package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/workercli"
	"github.com/memstore/memstore/sandbox"
)

// doctorHost is a server with an environment and its key, and a mount
// root, as a worker host would have them.
type doctorHost struct {
	base, env, key, otherEnv, mountRoot string
}

func newDoctorHost(t *testing.T) doctorHost {
	t.Helper()
	for _, v := range []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_ENVIRONMENT_ID", "ANTHROPIC_ENVIRONMENT_KEY", "ANTHROPIC_MOUNT_ROOT", "ANTHROPIC_SANDBOX"} {
		t.Setenv(v, "")
	}
	rs, _ := cliServer(t)
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var envs [2]*api.Environment
	for i := range envs {
		if envs[i], err = admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "host"}); err != nil {
			t.Fatal(err)
		}
	}
	key, err := admin.CreateEnvironmentKey(ctx, envs[0].ID, api.CreateEnvironmentKeyRequest{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	return doctorHost{base: rs.baseURL, env: envs[0].ID, key: key.Key, otherEnv: envs[1].ID, mountRoot: t.TempDir()}
}

func (h doctorHost) args(over ...string) []string {
	return append([]string{"doctor", "--base-url", h.base, "--environment-id", h.env, "--environment-key", h.key, "--mount-root", h.mountRoot, "--sandbox", "none"}, over...)
}

// runDoctor runs memstore doctor and returns its exit status and report.
func runDoctor(t *testing.T, args []string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, testStreams(&stdout, &stderr))
	return code, stdout.String()
}

func TestDoctorPassesOnAGoodHost(t *testing.T) {
	h := newDoctorHost(t)
	code, out := runDoctor(t, h.args())
	if code != 0 {
		t.Fatalf("exit %d on a good host:\n%s", code, out)
	}
	for _, want := range []string{"✓ mount root", "✓ letter case", "✓ symlinks", "✓ server", "✓ environment key  valid for " + h.env, "✓ clock", "! sandbox", "ready:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if left, _ := os.ReadDir(h.mountRoot); len(left) != 0 {
		t.Errorf("doctor left %v in the mount root", left)
	}
}

// Each bad host fails the check that names its problem, with the fix.
func TestDoctorNamesTheFixOfEachBadHost(t *testing.T) {
	h := newDoctorHost(t)
	missing := filepath.Join(t.TempDir(), "memory")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing mount root", h.args("--mount-root", missing), []string{"✗ mount root       " + missing + " does not exist", "fix: mkdir -p " + missing}},
		{"wrong key", h.args("--environment-key", "sk-memstore-env-wrong"), []string{"✗ environment key  the server does not know the key", "fix: mint a new one with memstore env key create " + h.env}},
		{"another environment's id", h.args("--environment-id", h.otherEnv), []string{"✗ environment key  not a key of " + h.otherEnv, "fix: check --environment-id"}},
		{"no key", h.args("--environment-key", ""), []string{"✗ environment key  no environment id or no environment key", "ANTHROPIC_ENVIRONMENT_KEY"}},
		{"unreachable server", h.args("--base-url", "http://127.0.0.1:1"), []string{"✗ server           http://127.0.0.1:1 cannot be reached (connection refused)", "fix: start the server", "- environment key  not checked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runDoctor(t, tc.args)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			for _, want := range append(tc.want, "not ready: 1 check(s) failed") {
				if !strings.Contains(out, want) {
					t.Errorf("the report lacks %q:\n%s", want, out)
				}
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("doctor created the missing mount root %s", missing)
	}
}

// The clock check compares with the server's Date header, on an injected
// clock.
func TestDoctorClockSkew(t *testing.T) {
	server := time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		local time.Time
		mark  string
		want  string
	}{
		{server.Add(3 * time.Second), checkOK, "within 10s"},
		{server.Add(2 * time.Minute), checkFail, "2m0s ahead of the server's"},
		{server.Add(-time.Hour), checkFail, "1h0m0s behind the server's"},
	} {
		d := doctor{now: func() time.Time { return tc.local }}
		if f := d.clockCheck(server); f.mark != tc.mark || !strings.Contains(f.detail, tc.want) || (tc.mark == checkFail && !strings.Contains(f.fix, "timedatectl")) {
			t.Errorf("local %v: %+v, want %s %q", tc.local, f, tc.mark, tc.want)
		}
	}
}

// Which user the sandboxed shell runs as: nobody when bubblewrap can make
// a user namespace (even for a root worker), otherwise the worker's user,
// a warning with the fix — louder for root.
func TestDoctorSaysWhoTheSandboxedShellRunsAs(t *testing.T) {
	for _, tc := range []struct {
		shell, worker int
		mark, want    string
	}{
		{65534, 0, checkOK, "the shell runs as nobody (uid 65534), without capabilities, though the worker runs as uid 0"},
		{65534, 1000, checkOK, "the shell runs as nobody (uid 65534)"},
		{0, 0, checkWarn, "the shell runs as root"},
		{1000, 1000, checkWarn, "the shell runs as the worker's user (uid 1000)"},
	} {
		f := shellUserFinding(tc.shell, tc.worker)
		if f.mark != tc.mark || !strings.Contains(f.detail, tc.want) || (tc.mark == checkWarn && !strings.Contains(f.fix, "user namespaces")) {
			t.Errorf("shell uid %d, worker uid %d: %+v, want %s %q", tc.shell, tc.worker, f, tc.mark, tc.want)
		}
	}

	// On this host, with bubblewrap: the report says what the sandbox
	// will do.
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	h := newDoctorHost(t)
	_, out := runDoctor(t, h.args("--sandbox", "bwrap"))
	want := shellUserFinding(l.ShellUID(), os.Geteuid())
	if line := want.mark + " sandbox user     " + want.detail; !strings.Contains(out, line) {
		t.Errorf("the report lacks %q:\n%s", line, out)
	}
}

// A worker killed with SIGKILL mid-session leaves its store folder behind;
// doctor lists it with the files whose only copy it holds (one written by
// the write tool, one by bash, neither synced yet) and the session, and
// the host stays ready.
func TestDoctorListsTheFoldersAKilledWorkerLeft(t *testing.T) {
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	workdir, mountRoot := t.TempDir(), t.TempDir()
	key, err := s.admin.CreateEnvironmentKey(context.Background(), s.env.ID, api.CreateEnvironmentKeyRequest{Name: "doctor"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := s.admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	// The worker runs bash in the sandbox (bubblewrap is installed here),
	// which shows the store at its mount path; on disk it is in the
	// session's own folder.
	sess := s.session(t, `{"tool_calls":[`+
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/draft.md","content":"half-way\n"}},`+
		`{"name":"bash","input":{"command":"printf shell > /mnt/memory/notes/from-bash.md && touch started && sleep 120","timeout_ms":300000}}]}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID})
	notes := filepath.Join(mountRoot, sess.ID, "notes")

	var out testlog.Buffer
	// Inline sync: nothing is uploaded before the kill.
	cmd := exec.Command(bin, "worker", "poll", "--mount-root", mountRoot, "--memory-sync-live=false", "--sandbox", "bwrap")
	cmd.Env = s.workerEnv(workdir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitUntil(t, "the bash call to write its file", func() bool {
		results, _ := s.results(t, sess.ID)
		_, err := os.Stat(filepath.Join(notes, "from-bash.md"))
		return len(results) == 1 && err == nil
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	h := doctorHost{base: s.rs.baseURL, env: s.env.ID, key: key.Key, mountRoot: mountRoot}
	code, report := runDoctor(t, h.args())
	if code != 0 {
		t.Fatalf("exit %d: a leftover is worth a warning, not a refusal:\n%s", code, report)
	}
	for _, want := range []string{"! leftovers", "1 folder(s) left by a stopped worker, 2 file(s) in them not on the server",
		notes + " (memory store " + store.ID + ", session " + sess.ID + "): 2 file(s) not on the server: /draft.md, /from-bash.md",
		"fix: serve the session again on this host"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if got, err := os.ReadFile(filepath.Join(notes, "from-bash.md")); err != nil || string(got) != "shell" {
		t.Errorf("doctor changed the leftover: %q, %v", got, err)
	}

	// A worker started on the root says so in its log and its /metrics. It
	// polls another environment, so it never claims the session (which
	// would adopt the folder: the session is served again at its path).
	env2, err := s.admin.CreateEnvironment(context.Background(), api.CreateEnvironmentRequest{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	key2, err := s.admin.CreateEnvironmentKey(context.Background(), env2.ID, api.CreateEnvironmentKeyRequest{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	var out2 testlog.Buffer
	again := exec.Command(bin, "worker", "poll", "--mount-root", mountRoot, "--metrics-addr", metricsAddr)
	again.Env = append(s.workerEnv(t.TempDir()), "ANTHROPIC_ENVIRONMENT_ID="+env2.ID, "ANTHROPIC_ENVIRONMENT_KEY="+key2.Key)
	again.Stdout, again.Stderr = &out2, &out2
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Process.Kill(); again.Wait() })
	var scraped string
	waitUntil(t, "the worker's /metrics to count the leftover", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		scraped = string(b)
		return strings.Contains(scraped, "memstore_worker_leftover_folders 1") && strings.Contains(scraped, "memstore_worker_leftover_files 2")
	})
	if !strings.Contains(out2.String(), "found a store folder a stopped worker left") || !strings.Contains(out2.String(), sess.ID) {
		t.Errorf("the worker's log does not name the leftover:\n%s", out2.String())
	}
}

// The report says what sandboxed commands reach with each
// --sandbox-network: on through pasta (installed here, see .ci/run), off,
// host (a warning), and on without pasta (a warning that says why and how
// to install it).
func TestDoctorSaysWhatTheSandboxNetworkReaches(t *testing.T) {
	testenv.Pasta(t)
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Pasta: "/no/such/pasta"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	if f := networkFinding(l); f.mark != checkWarn || !strings.Contains(f.detail, "on falls back to the host's network") || !strings.Contains(f.detail, "/no/such/pasta") || !strings.Contains(f.fix, "apt-get install passt") {
		t.Errorf("on without pasta: %+v", f)
	}
	for network, want := range map[string]string{
		"on":     "✓ sandbox network on: each sandbox has a network of its own through pasta (",
		"off":    "✓ sandbox network off: sandboxed commands reach no network",
		"host":   "! sandbox network host: sandboxed commands share the host's network, its loopback included",
		"bridge": "✗ sandbox network --sandbox-network: sandbox network \"bridge\": use on, off or host: on (the internet",
	} {
		d := doctor{flags: workercli.Flags{Sandbox: "bwrap", SandboxNetwork: network}}
		var got []string
		for _, f := range d.sandboxChecks(context.Background()) {
			got = append(got, f.mark+" "+f.name+" "+f.detail)
		}
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("--sandbox-network %s: the findings lack %q:\n%s", network, want, strings.Join(got, "\n"))
		}
	}
	// And the report prints it.
	h := newDoctorHost(t)
	if _, out := runDoctor(t, h.args("--sandbox", "bwrap", "--sandbox-network", "host")); !strings.Contains(out, "! sandbox network  host:") {
		t.Errorf("the report lacks the network's line:\n%s", out)
	}
}
