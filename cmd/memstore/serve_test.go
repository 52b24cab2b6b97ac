package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/gctarget"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/workercli"
)

// serveProc is `memstore serve` running in a child process.
type serveProc struct {
	cmd            *exec.Cmd
	stdout, stderr *testlog.Buffer
	url            string
	// readyLine is the server's log line saying it is ready.
	readyLine map[string]any
	exited    chan struct{}
}

// serveProcess starts `memstore serve --addr 127.0.0.1:0 --data data` and
// the extra flags in a child process with MEMSTORE_ADMIN_KEY set to
// adminKey ("" for none), and returns once the server says it is ready.
func serveProcess(t *testing.T, data, adminKey string, extra ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(memstoreBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json"}, extra...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMSTORE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MEMSTORE_ADMIN_KEY="+adminKey)
	p := &serveProc{cmd: cmd, stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	waitUntil(t, "memstore serve to be ready", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("memstore serve exited before it was ready:\n%s", p.stderr.String())
		default:
		}
		return p.ready()
	})
	return p
}

// ready reports whether the server logged that it is ready, and learns
// its URL from that line.
func (p *serveProc) ready() bool {
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "memstore server ready" {
			p.url, _ = rec["base_url"].(string)
			p.readyLine = rec
			return true
		}
	}
	return false
}

// stop sends sig and returns the exit status.
func (p *serveProc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	return p.cmd.ProcessState.ExitCode()
}

// request sends one request with the key as x-api-key and returns the
// status and body.
func (p *serveProc) request(t *testing.T, method, path, key string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

func (p *serveProc) must(t *testing.T, method, path, key string, body, out any) {
	t.Helper()
	status, b := p.request(t, method, path, key, body)
	if status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// SPEC §7: on a data folder with no key, serve generates the admin key,
// prints it once and writes it to <data>/admin.key (0600); /healthz
// answers; SIGTERM and SIGINT shut it down gracefully (exit 0) even while
// a client holds an event stream open, as every worker does; a restart
// keeps the data and the key, and prints no key.
func TestServeBootstrapsTheAdminKeyAndShutsDownGracefully(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memstore serve in a child process")
	}
	data := filepath.Join(t.TempDir(), "data")
	p := serveProcess(t, data, "")

	status, body := p.request(t, "GET", "/healthz", "", nil)
	if status != 200 || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", status, body)
	}
	saved, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(saved))
	if info, _ := os.Stat(filepath.Join(data, "admin.key")); info.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key has mode %v, want 0600", info.Mode().Perm())
	}
	if !strings.HasPrefix(key, "sk-memstore-") || strings.Count(p.stdout.String(), key) != 1 || !strings.Contains(p.stdout.String(), "shown once") {
		t.Fatalf("the generated key %q is not printed exactly once:\n%s", key, p.stdout)
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Fatal("the admin key is in the log")
	}
	if status, _ := p.request(t, "GET", "/v1/memory_stores", "", nil); status != 401 {
		t.Fatalf("no key: %d, want 401", status)
	}
	var st api.MemoryStore
	p.must(t, "POST", "/v1/memory_stores", key, map[string]any{"name": "kept"}, &st)

	// A session's event stream is open while the server is told to stop.
	var env api.Environment
	p.must(t, "POST", "/v1/environments", key, map[string]any{"name": "e"}, &env)
	var ag api.Agent
	p.must(t, "POST", "/v1/agents", key, map[string]any{"name": "a", "model": api.ScriptedModel}, &ag)
	var sess api.Session
	p.must(t, "POST", "/v1/sessions", key, map[string]any{"agent": ag.ID, "environment_id": env.ID}, &sess)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", p.url+"/v1/sessions/"+sess.ID+"/events/stream", nil)
	req.Header.Set("x-api-key", key)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("stream: %v %v", stream, err)
	}
	streamEnd := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		stream.Body.Close()
		streamEnd <- err
	}()

	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM, want 0:\n%s", code, p.stderr)
	}
	if err := <-streamEnd; err != nil {
		t.Fatalf("the event stream was cut instead of ended: %v", err)
	}
	if !strings.Contains(p.stderr.String(), `"msg":"shutting down"`) {
		t.Errorf("no shutdown line in the log:\n%s", p.stderr)
	}

	again := serveProcess(t, data, "")
	if strings.Contains(again.stdout.String(), "sk-memstore-") {
		t.Fatalf("a restart printed a key:\n%s", again.stdout)
	}
	if now, _ := os.ReadFile(filepath.Join(data, "admin.key")); string(now) != string(saved) {
		t.Fatal("a restart rewrote admin.key")
	}
	var got api.MemoryStore
	again.must(t, "GET", "/v1/memory_stores/"+st.ID, key, nil, &got)
	if got.Name != "kept" {
		t.Fatalf("after a restart: %+v", got)
	}
	if code := again.stop(t, os.Interrupt); code != 0 {
		t.Fatalf("serve exited %d after SIGINT, want 0:\n%s", code, again.stderr)
	}
}

// With MEMSTORE_ADMIN_KEY set, that is the admin key: nothing is generated,
// printed or written. --max-memories-per-store sets the per-store limit.
func TestServeTakesTheAdminKeyFromTheEnvironmentAndTheStoreLimitFromAFlag(t *testing.T) {
	data := t.TempDir()
	t.Setenv("MEMSTORE_ADMIN_KEY", "sk-memstore-from-env")
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &testlog.Buffer{}, &testlog.Buffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json", "--max-memories-per-store", "1"}, testStreams(stdout, stderr))
	}()
	p := &serveProc{stdout: stdout, stderr: stderr}
	waitUntil(t, "memstore serve to be ready", p.ready)
	if _, err := os.Stat(filepath.Join(data, "admin.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("admin.key written although MEMSTORE_ADMIN_KEY is set: %v", err)
	}
	if stdout.String() != "" {
		t.Fatalf("serve printed %q although the key came from the environment", stdout)
	}
	var st api.MemoryStore
	p.must(t, "POST", "/v1/memory_stores", "sk-memstore-from-env", map[string]any{"name": "small"}, &st)
	p.must(t, "POST", "/v1/memory_stores/"+st.ID+"/memories", "sk-memstore-from-env", map[string]any{"path": "/one", "content": "1"}, nil)
	status, body := p.request(t, "POST", "/v1/memory_stores/"+st.ID+"/memories", "sk-memstore-from-env", map[string]any{"path": "/two", "content": "2"})
	var env api.ErrorEnvelope
	if json.Unmarshal(body, &env) != nil || status != 400 || env.Error.Type != api.InvalidRequest || !strings.Contains(env.Error.Message, "memory_store_id") || !strings.Contains(env.Error.Message, "1 memories") {
		t.Fatalf("second memory with --max-memories-per-store 1: %d %s", status, body)
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("serve exit %d:\n%s", c, stderr)
	}
}

// The defaults of SPEC §7, as the usage shows them.
func TestServeDefaults(t *testing.T) {
	for _, v := range []string{"MEMSTORE_ADDR", "MEMSTORE_DATA"} {
		t.Setenv(v, "")
	}
	var usage testlog.Buffer
	if c := run(context.Background(), []string{"serve", "-h"}, testStreams(io.Discard, &usage)); c != 0 {
		t.Fatalf("serve -h: exit %d", c)
	}
	for _, want := range []string{`-addr string`, `(default "127.0.0.1:8080")`, `-data string`, `(default "./memstore-data")`} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("serve -h lacks %s:\n%s", want, usage.String())
		}
	}
}

// --metrics-addr on a taken address is refused with the flag to change.
func TestMetricsAddressTakenIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stop, err := workercli.ServeMetrics(ln.Addr().String(), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err == nil {
		stop()
		t.Fatal("serveMetrics on a taken address succeeded")
	}
	if !strings.Contains(err.Error(), "--metrics-addr") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("error = %v; want the address and the flag", err)
	}
}

// The worker verbs take --metrics-addr too: on a taken address they stop
// before serving anything, naming the flag.
func TestWorkerMetricsAddressTakenIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("ANTHROPIC_WORK_SECRET", "secret")
	t.Setenv("ANTHROPIC_SANDBOX", "none")
	dir := t.TempDir()
	local := []string{"--base-url", "http://127.0.0.1:1", "--environment-id", "env_x", "--environment-key", "k", "--workdir", dir, "--mount-root", dir, "--metrics-addr", ln.Addr().String()}
	for _, args := range [][]string{
		append([]string{"worker", "poll"}, local...),
		append([]string{"worker", "run", "--work-id", "work_x", "--session-id", "sesn_x"}, local...),
		append([]string{"worker", "webhook", "--listen", "127.0.0.1:0", "--webhook-secret", "whsec_x"}, local...),
	} {
		var errb bytes.Buffer
		if code := run(context.Background(), args, testStreams(io.Discard, &errb)); code == 0 {
			t.Errorf("%v: exit 0 on a taken metrics address", args[:2])
		}
		if !strings.Contains(errb.String(), "--metrics-addr") || !strings.Contains(errb.String(), ln.Addr().String()) {
			t.Errorf("%v: stderr = %q; want the address and the flag", args[:2], errb.String())
		}
	}
}

// Model settings the Messages API would refuse on every request are
// refused at start, before the data folder is made; good ones reach the
// model runtime.
func TestServeChecksModelSettings(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-max-tokens", "-1"}, "--model-max-tokens -1: give a positive number"},
		{[]string{"--model-thinking-budget", "512"}, "at least 1024 and below --model-max-tokens (8192)"},
		{[]string{"--model-max-tokens", "4096", "--model-thinking-budget", "4096"}, "below --model-max-tokens (4096)"},
		{[]string{"--version-retention", "keep_last=0"}, "keep_last needs a whole number of versions from 1 to 1000000"},
		{[]string{"--version-retention", "keep_some"}, "use keep_all, keep_last=N"},
		{[]string{"--prune-interval", "-1s"}, "--prune-interval -1s: give a positive duration"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, tc.args...)
		if code := run(context.Background(), args, streams{strings.NewReader(""), &out, &errb}); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a refused serve made its data folder (%v)", err)
	}
	cfg := modelConfig(serveOptions{modelMaxTokens: 32000, modelThinkingBudget: 8000}, slog.New(slog.DiscardHandler))
	if cfg.MaxTokens != 32000 || cfg.ThinkingBudget != 8000 {
		t.Fatalf("the runtime got max tokens %d, thinking budget %d", cfg.MaxTokens, cfg.ThinkingBudget)
	}
}

// A served memstore runs its collector at gctarget.Percent, and says so
// when it is ready; GOGC, when set, keeps its say.
func TestServeSetsItsGCTargetUnlessGOGCDoes(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	p := serveProcess(t, t.TempDir(), "")
	if got := p.readyLine["gc_percent"]; got != float64(gctarget.Percent) {
		t.Fatalf("ready line's gc_percent = %v; want %d", got, gctarget.Percent)
	}
	t.Setenv("GOGC", "50")
	p = serveProcess(t, t.TempDir(), "")
	if got := p.readyLine["gc_percent"]; got != float64(50) {
		t.Fatalf("with GOGC=50, ready line's gc_percent = %v; want 50", got)
	}
}
