package toolset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBashKeepsStateBetweenCalls(t *testing.T) {
	f := newFixture(t)
	mustMkdir(t, filepath.Join(f.work, "sub"))
	if got := wantOK(t, f.run(t, "bash", in("command", "pwd"))); got != f.work+"\n" {
		t.Fatalf("the shell starts in %q, want the working directory %s", got, f.work)
	}
	wantOK(t, f.run(t, "bash", in("command", "cd sub && export GREETING=hi && greet() { echo \"$GREETING $1\"; }")))
	if got := wantOK(t, f.run(t, "bash", in("command", "pwd; greet there"))); got != filepath.Join(f.work, "sub")+"\nhi there\n" {
		t.Fatalf("state did not carry over: %q", got)
	}
	// stdout and stderr both reach the agent.
	if got := wantOK(t, f.run(t, "bash", in("command", "echo out; echo err >&2"))); got != "out\nerr\n" {
		t.Fatalf("output = %q", got)
	}
	if got := wantOK(t, f.run(t, "bash", in("command", "true"))); got != "" {
		t.Fatalf("silent command = %q", got)
	}
}

func TestBashReportsFailures(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "bash", in("command", "echo partial; (exit 3)"))
	wantErr(t, res)
	if res.Content != "partial\nexit code: 3" {
		t.Fatalf("failed command = %q", res.Content)
	}
	if res := f.run(t, "bash", in("command", "false")); res.Content != "exit code: 1" || !res.IsError {
		t.Fatalf("false = %+v", res)
	}
	// A syntax error is a failed command, not a shell stuck waiting for the
	// closing quote; the shell keeps its state.
	wantOK(t, f.run(t, "bash", in("command", "export KEPT=yes")))
	wantErr(t, f.run(t, "bash", in("command", `echo "unterminated`)), "unexpected EOF", "exit code: 2")
	if got := wantOK(t, f.run(t, "bash", in("command", "echo $KEPT"))); got != "yes\n" {
		t.Fatalf("state after a syntax error = %q", got)
	}
	// A command that reads stdin gets EOF instead of hanging or eating the
	// next command.
	if got := wantOK(t, f.run(t, "bash", in("command", `cat; read -r line; echo "[$line]"`))); got != "[]\n" {
		t.Fatalf("stdin reader = %q", got)
	}
}

func TestBashShellExitStartsAFreshShell(t *testing.T) {
	f := newFixture(t)
	wantOK(t, f.run(t, "bash", in("command", "cd /; export GONE=1")))
	wantErr(t, f.run(t, "bash", in("command", "echo bye; exit 4")), "bye\n", "the shell exited with status 4", "new shell")
	if got := wantOK(t, f.run(t, "bash", in("command", "pwd; echo \"[$GONE]\""))); got != f.work+"\n[]\n" {
		t.Fatalf("after exit: %q", got)
	}
	// exit 0 is not an error.
	if res := f.run(t, "bash", in("command", "exit 0")); res.IsError {
		t.Fatalf("exit 0 = %+v", res)
	}
}

func TestBashRestart(t *testing.T) {
	f := newFixture(t)
	wantOK(t, f.run(t, "bash", in("command", "export X=1; cd /")))
	if got := wantOK(t, f.run(t, "bash", in("restart", true))); got != "bash session restarted" {
		t.Fatalf("restart = %q", got)
	}
	if got := wantOK(t, f.run(t, "bash", in("command", "echo \"[$X]\"; pwd"))); got != "[]\n"+f.work+"\n" {
		t.Fatalf("after restart: %q", got)
	}
	wantOK(t, f.run(t, "bash", in("command", "export X=2")))
	if got := wantOK(t, f.run(t, "bash", in("restart", true, "command", "echo \"[$X]\""))); got != "[]\n" {
		t.Fatalf("restart with a command: %q", got)
	}
}

// pidsFrom reads whitespace-separated pids a command wrote to a file.
func pidsFrom(t *testing.T, name string) []int {
	t.Helper()
	var pids []int
	for _, field := range strings.Fields(readString(t, name)) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// gone reports whether pid no longer runs (a zombie waiting for init to reap
// it counts as gone: it runs nothing).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	s := string(stat)
	return strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z")
}

// waitGone waits (bounded) for the kernel to finish killing pids.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// waitFile waits (bounded) for a command to create a file.
func waitFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(name); err == nil && strings.HasSuffix(string(data), "\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// longCommand records the shell's pid, starts a background sleeper and
// records its pid, says "started", then sleeps in the foreground.
func longCommand(pidFile string) string {
	return fmt.Sprintf("sleep 300 & echo $$ $! > %s; echo started; sleep 300", pidFile)
}

func TestBashTimeoutKillsEverythingTheCommandStarted(t *testing.T) {
	f := newFixture(t)
	wantOK(t, f.run(t, "bash", in("command", "export BEFORE=1")))
	pidFile := filepath.Join(f.base, "pids")
	// Long enough for a loaded machine to get the command going; the pids
	// it records are what the test checks.
	res := f.run(t, "bash", in("command", longCommand(pidFile), "timeout_ms", 1500))
	wantErr(t, res, "started\n", "[timed out after 1.5s: the command and everything it started were killed, and the shell was restarted")
	waitGone(t, pidsFrom(t, pidFile))
	// The next call gets a fresh shell in the working directory.
	if got := wantOK(t, f.run(t, "bash", in("command", `echo "[$BEFORE]"; pwd`))); got != "[]\n"+f.work+"\n" {
		t.Fatalf("after a timeout: %q", got)
	}
}

func TestBashTimeoutInput(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.BashTimeout = 250 * time.Millisecond
		c.MaxBashTimeout = 400 * time.Millisecond
	})
	wantErr(t, f.run(t, "bash", in("command", "sleep 5")), "[timed out after 250ms:")
	wantErr(t, f.run(t, "bash", in("command", "sleep 5", "timeout", 0.3)), "[timed out after 300ms:")
	wantErr(t, f.run(t, "bash", in("command", "sleep 5", "timeout_ms", 60_000)), "[timed out after 400ms, the longest a call may run:")
	wantErr(t, f.run(t, "bash", in("command", "echo", "timeout_ms", 100, "timeout", 1)), "not both")
	wantErr(t, f.run(t, "bash", in("command", "echo", "timeout_ms", -1)), "must not be negative")
}

func TestBashCancellationKillsTheCommandAndReturnsAResult(t *testing.T) {
	f := newFixture(t)
	pidFile := filepath.Join(f.base, "pids")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan Result)
	go func() { done <- f.runCtx(t, ctx, "bash", in("command", longCommand(pidFile))) }()
	waitFile(t, pidFile)
	cancel(errors.New("worker shutting down"))
	res := <-done
	wantErr(t, res, "[cancelled (worker shutting down): the command and everything it started were killed")
	waitGone(t, pidsFrom(t, pidFile))
	if got := wantOK(t, f.run(t, "bash", in("command", "echo again"))); got != "again\n" {
		t.Fatalf("after a cancellation: %q", got)
	}

	// A call whose context is already over runs nothing.
	marker := filepath.Join(f.base, "ran")
	wantErr(t, f.runCtx(t, ctx, "bash", in("command", "touch "+marker)), "not run")
	mustNotExist(t, marker)
}

func TestBashCloseKillsTheShell(t *testing.T) {
	f := newFixture(t)
	pidFile := filepath.Join(f.base, "pids")
	done := make(chan Result)
	go func() { done <- f.run(t, "bash", in("command", longCommand(pidFile))) }()
	waitFile(t, pidFile)
	if err := f.ts.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, <-done, "shut down while the command ran")
	waitGone(t, pidsFrom(t, pidFile))
	wantErr(t, f.run(t, "bash", in("command", "echo")), "closed")
	// The file tools hold nothing open and keep working.
	wantOK(t, f.run(t, "write", in("file_path", "after-close.txt", "content", "x")))
}

func TestBashOutputKeepsHeadAndTail(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxOutputBytes = 1000 })
	got := wantOK(t, f.run(t, "bash", in("command", "seq 1 100000")))
	if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "99999\n100000\n") {
		t.Fatalf("capped output lost its head or tail: %q…%q", got[:20], got[len(got)-20:])
	}
	total := len(strings.Join(func() []string {
		var s []string
		for i := 1; i <= 100000; i++ {
			s = append(s, strconv.Itoa(i))
		}
		return s
	}(), "\n")) + 1
	note := fmt.Sprintf("\n[... %d bytes of output cut ...]\n", total-1000)
	if !strings.Contains(got, note) || len(got) != 1000+len(note) {
		t.Fatalf("capped output is %d bytes, want 1000 plus the note %q", len(got), note)
	}
	// A failed command's status survives the cap.
	wantErr(t, f.run(t, "bash", in("command", "seq 1 100000; (exit 7)")), "\nexit code: 7")
	// Multi-byte characters are never cut in half.
	got = wantOK(t, f.run(t, "bash", in("command", `for i in $(seq 1 2000); do printf 'é'; done`)))
	if strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("output cut inside a character: %q", got)
	}
}

func TestBashKeepsCredentialsOutOfTheShell(t *testing.T) {
	t.Setenv("ANTHROPIC_ENVIRONMENT_KEY", "sk-secret")
	t.Setenv("MEMSTORE_ADMIN_KEY", "sk-memstore-secret")
	t.Setenv("TOOLSET_TEST_VISIBLE", "visible")
	f := newFixture(t)
	if got := wantOK(t, f.run(t, "bash", in("command", `echo "[$ANTHROPIC_ENVIRONMENT_KEY][$MEMSTORE_ADMIN_KEY][$TOOLSET_TEST_VISIBLE]"`))); got != "[][][visible]\n" {
		t.Fatalf("environment = %q", got)
	}
	g := newFixture(t, func(c *Config) { c.BashEnv = []string{"PATH=" + os.Getenv("PATH"), "ONLY=this"} })
	if got := wantOK(t, g.run(t, "bash", in("command", `echo "[$ONLY][$TOOLSET_TEST_VISIBLE]"`))); got != "[this][]\n" {
		t.Fatalf("BashEnv did not replace the environment: %q", got)
	}
}

// Nothing a command prints can pass for the end of its output.
func TestBashCompletionMarkerCannotBeForged(t *testing.T) {
	f := newFixture(t)
	got := wantOK(t, f.run(t, "bash", in("command", "echo __MEMSTORE_DONE_0000000000000000__0; set -xv; echo traced; set +xv; echo after")))
	if !strings.Contains(got, "__MEMSTORE_DONE_0000000000000000__0\n") || !strings.HasSuffix(got, "after\n") {
		t.Fatalf("output = %q", got)
	}
	if got := wantOK(t, f.run(t, "bash", in("command", "echo next"))); got != "next\n" {
		t.Fatalf("the call after a trace = %q", got)
	}
}
