package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// workerSetup is a server with an environment, its key, a scripted agent
// and an admin client.
type workerSetup struct {
	rs    *runningServer
	admin *client.Client
	env   *api.Environment
	key   string
	agent *api.Agent
}

func newWorkerSetup(t *testing.T) *workerSetup {
	t.Helper()
	rs, _ := cliServer(t)
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	return &workerSetup{rs: rs, admin: admin, env: ws.Env, key: ws.Key, agent: ws.Agent}
}

func (s *workerSetup) session(t *testing.T, script string, resources ...api.SessionResourceParams) *api.Session {
	t.Helper()
	sess, err := s.admin.CreateSession(context.Background(), api.CreateSessionRequest{
		Agent: api.AgentRef{ID: s.agent.ID}, EnvironmentID: s.env.ID, Resources: resources,
		InitialEvents: []api.Event{api.UserMessage(script)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// results are the texts of the session's tool results, in order.
func (s *workerSetup) results(t *testing.T, sessionID string) (texts []string, errs []bool) {
	t.Helper()
	for e, err := range s.admin.ListAllEvents(context.Background(), sessionID, api.EventListParams{Limit: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == api.EventUserToolResult {
			texts = append(texts, e.Text())
			errs = append(errs, e.IsError != nil && *e.IsError)
		}
	}
	return texts, errs
}

func (s *workerSetup) work(t *testing.T, sessionID string) api.Work {
	t.Helper()
	for w, err := range s.admin.ListAllWork(context.Background(), s.env.ID, api.WorkListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		if w.Data.ID == sessionID {
			return w
		}
	}
	t.Fatalf("no work item for session %s", sessionID)
	return api.Work{}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 60*time.Second, what, cond)
}

// waitWithin is waitUntil with its own limit.
func waitWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workerEnv is the environment of a worker process for s.
func (s *workerSetup) workerEnv(workdir string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"ANTHROPIC_BASE_URL="+s.rs.baseURL,
		"ANTHROPIC_ENVIRONMENT_ID="+s.env.ID,
		"ANTHROPIC_ENVIRONMENT_KEY="+s.key,
		"ANTHROPIC_WORKDIR="+workdir,
		"ANTHROPIC_MAX_IDLE=100ms",
	)
}

// SIGTERM to a real `memstore worker poll` during a long bash call: the
// call is cancelled and its error result posted, what the agent wrote
// before is flushed to the server (no sync was due), the mount folder is
// removed, the item is stopped, and the process exits 0.
func TestWorkerProcessShutsDownGracefullyOnSIGTERM(t *testing.T) {
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	workdir, mountRoot := t.TempDir(), t.TempDir()
	store, err := s.admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.session(t, `{"tool_calls":[`+
		`{"name":"write","input":{"file_path":"/mnt/memory/notes/draft.md","content":"half-way\n"}},`+
		`{"name":"bash","input":{"command":"touch started; sleep 120","timeout_ms":300000}},`+
		`{"name":"bash","input":{"command":"touch after"}}]}`,
		api.SessionResourceParams{Type: api.ResourceMemoryStore, MemoryStoreID: store.ID})

	var out testlog.Buffer
	// Inline sync, so the draft is still local when the signal comes and
	// the flush is what saves it (live sync would have uploaded it at once).
	cmd := exec.Command(bin, "worker", "poll", "--mount-root", mountRoot, "--memory-sync-live=false", "--keep-workdirs")
	cmd.Env = s.workerEnv(workdir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitUntil(t, "the long bash call to start", func() bool {
		_, err := os.Stat(filepath.Join(workdir, sess.ID+".room", "started"))
		return err == nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker exited with %v; output:\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not exit after SIGTERM; output:\n%s", out.String())
	}
	texts, errs := s.results(t, sess.ID)
	if len(texts) != 2 || !errs[1] || !strings.Contains(texts[1], "the worker is shutting down") {
		t.Fatalf("results = %q, want the write and the cancelled call's error", texts)
	}
	m, err := s.admin.ListMemories(context.Background(), store.ID, client.ListMemoriesParams{View: api.ViewFull})
	if err != nil || len(m.Data) != 1 || m.Data[0].Memory.Path != "/draft.md" || *m.Data[0].Memory.Content != "half-way\n" {
		t.Errorf("store after SIGTERM = %+v, %v: want the flushed draft", m, err)
	}
	if entries, _ := os.ReadDir(mountRoot); len(entries) != 0 {
		t.Errorf("the mount folder was left behind")
	}
	if _, err := os.Stat(filepath.Join(workdir, sess.ID+".room", "started")); err != nil {
		t.Errorf("--keep-workdirs did not keep the session's room: %v", err)
	}
	if _, err := os.Stat(filepath.Join(workdir, sess.ID+".room", "after")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a call ran after SIGTERM")
	}
	if st := s.work(t, sess.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped; output:\n%s", st, out.String())
	}
	for _, line := range []string{"session cut short", "session memory finished", "flush_changes=1", "work item stopped"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

// `poll --on-work` hands each item to a script: its JSON with the secret
// on stdin, its identity in ANTHROPIC_* variables, never the environment
// key; a `worker run` inside the script serves it with the secret alone.
func TestOnWorkScriptServesTheItemThroughWorkerRun(t *testing.T) {
	bin := memstoreBinary(t)
	s := newWorkerSetup(t)
	workdir := t.TempDir()
	spool := t.TempDir()
	sess := s.session(t, `{"tool_calls":[{"name":"bash","input":{"command":"echo served"}}],"end":"terminate"}`)

	script := `cat > "$SPOOL/item.json"; env | grep '^ANTHROPIC_' | sort > "$SPOOL/env.txt"; exec "$MEMSTORE" worker run`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testlog.Buffer
	cmd := exec.CommandContext(ctx, bin, "worker", "poll", "--on-work", script)
	cmd.Env = append(s.workerEnv(workdir), "SPOOL="+spool, "MEMSTORE="+bin)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the item to be served and stopped", func() bool {
		return s.work(t, sess.ID).State == api.WorkStopped
	})
	cancel()
	cmd.Wait()

	texts, _ := s.results(t, sess.ID)
	if len(texts) != 1 || strings.TrimSpace(texts[0]) != "served" {
		t.Fatalf("results = %q; output:\n%s", texts, out.String())
	}
	var item api.Work
	b, err := os.ReadFile(filepath.Join(spool, "item.json"))
	if err != nil || json.Unmarshal(b, &item) != nil {
		t.Fatalf("item.json = %s, %v", b, err)
	}
	if item.Data.ID != sess.ID || item.Secret == nil {
		t.Fatalf("the script got %+v, want the item with its secret", item)
	}
	secret, err := api.DecodeWorkSecret(*item.Secret)
	if err != nil || secret.SessionsToken == "" {
		t.Fatalf("secret = %+v, %v", secret, err)
	}
	env, _ := os.ReadFile(filepath.Join(spool, "env.txt"))
	for _, want := range []string{"ANTHROPIC_WORK_ID=" + item.ID, "ANTHROPIC_SESSION_ID=" + sess.ID, "ANTHROPIC_ENVIRONMENT_ID=" + s.env.ID, "ANTHROPIC_BASE_URL=" + s.rs.baseURL, "ANTHROPIC_WORK_SECRET=" + *item.Secret} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("script environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(string(env), "ANTHROPIC_ENVIRONMENT_KEY") || strings.Contains(string(env), s.key) {
		t.Errorf("the script was given the environment key:\n%s", env)
	}
}

// --work-secret-file refuses a file others can read, before anything is
// sent; a private one is used.
func TestWorkSecretFileMustBePrivate(t *testing.T) {
	s := newWorkerSetup(t)
	sess := s.session(t, `{"tool_calls":[{"name":"bash","input":{"command":"echo private"}}],"end":"terminate"}`)
	envKeyClient := s.admin.With(client.WithBearerToken(s.key))
	w, err := envKeyClient.PollWork(context.Background(), s.env.ID, api.WorkPollParams{BlockMS: api.MaxPollBlockMS})
	if err != nil || w == nil {
		t.Fatalf("poll: %v %v", w, err)
	}
	if _, err := envKeyClient.AckWork(context.Background(), s.env.ID, w.ID); err != nil {
		t.Fatal(err)
	}
	secretPath := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretPath, []byte(*w.Secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANTHROPIC_ENVIRONMENT_KEY", "")
	t.Setenv("ANTHROPIC_WORK_SECRET", "")
	args := []string{"worker", "run", "--base-url", s.rs.baseURL, "--environment-id", s.env.ID, "--work-id", w.ID, "--session-id", sess.ID,
		"--workdir", t.TempDir(), "--work-secret-file", secretPath}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, testStreams(&stdout, &stderr)); code != 1 || !strings.Contains(stderr.String(), "chmod 600") {
		t.Fatalf("exit %d, stderr %q: want a refusal naming chmod 600", code, stderr.String())
	}
	if got := s.work(t, sess.ID); got.State != api.WorkStarting {
		t.Fatalf("work state %s: the refusal must come before any request", got.State)
	}
	if err := os.Chmod(secretPath, 0o600); err != nil {
		t.Fatal(err)
	}
	memstoreCLI(t, 0, args...)
	texts, _ := s.results(t, sess.ID)
	if len(texts) != 1 || strings.TrimSpace(texts[0]) != "private" {
		t.Fatalf("results = %q", texts)
	}
	if st := s.work(t, sess.ID).State; st != api.WorkStopped {
		t.Errorf("work state %s, want stopped", st)
	}
}
