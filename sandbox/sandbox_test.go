package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/testlog"
	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/toolset"
	"github.com/memstore/memstore/sandbox"
)

// launcher is a bubblewrap Launcher, or a skip that says why there is none.
func launcher(t *testing.T, cfg sandbox.Config) *sandbox.Launcher {
	t.Helper()
	cfg.Mode = sandbox.Bwrap
	l, err := sandbox.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Skipf("bubblewrap cannot run here, so the sandbox is not tested: %v", err)
	}
	return l
}

// host is a session laid out in real folders, as a worker with a remapped
// mount root has it, next to what its agent must never reach:
//
//	base/data/admin.key        the server's data folder
//	base/work                  the working directory
//	base/mnt/sesn_a/notes      a read-write store, advertised as /mnt/memory/notes
//	base/mnt/sesn_a/policy     a read-only store, advertised as /mnt/memory/policy
//	base/mnt/sesn_b/notes      another session's folder of the same store
type host struct {
	base, work, notes, policy, other, adminKey string
	view                                       sandbox.View
}

func newHost(t *testing.T) *host {
	t.Helper()
	base := t.TempDir()
	h := &host{
		base:     base,
		work:     filepath.Join(base, "work"),
		notes:    filepath.Join(base, "mnt", "sesn_a", "notes"),
		policy:   filepath.Join(base, "mnt", "sesn_a", "policy"),
		other:    filepath.Join(base, "mnt", "sesn_b", "notes"),
		adminKey: filepath.Join(base, "data", "admin.key"),
	}
	for _, d := range []string{h.work, h.notes, h.policy, h.other, filepath.Dir(h.adminKey)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(h.notes, "x.md"), "a memory\n")
	write(t, filepath.Join(h.policy, "rules.md"), "be kind\n")
	write(t, filepath.Join(h.other, "theirs.md"), "not yours\n")
	write(t, h.adminKey, "sk-admin\n")
	h.view = sandbox.View{Workdir: h.work, MemoryRoot: "/mnt/memory", Stores: []sandbox.Store{
		{Dir: h.notes, MountPath: "/mnt/memory/notes"},
		{Dir: h.policy, MountPath: "/mnt/memory/policy", ReadOnly: true},
	}}
	return h
}

// tools is a toolset over the host's session whose shell runs in l, with
// wrap (if any) around the sandbox's command line.
func (h *host) tools(t *testing.T, l *sandbox.Launcher, wrap ...string) *toolset.Toolset {
	t.Helper()
	ts, err := toolset.New(toolset.Config{
		Workdir: h.work, Logger: slog.New(slog.DiscardHandler),
		Mounts: []toolset.Mount{
			{Path: "/mnt/memory/notes", Dir: h.notes},
			{Path: "/mnt/memory/policy", Dir: h.policy, ReadOnly: true},
		},
		WrapShell:  func(argv []string) []string { return append(wrap, handOver(t, l.Command(h.view, argv), wrap)...) },
		StartShell: l.Start,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

// handOver gives nobody the files the sandbox's command line reads
// (bubblewrap's arguments, the seccomp filter) when wrap drops to nobody:
// the worker that made them would be nobody itself.
func handOver(t *testing.T, argv, wrap []string) []string {
	if len(wrap) == 0 {
		return argv
	}
	for _, a := range argv {
		if strings.HasPrefix(a, filepath.Join(os.TempDir(), "memstore-sandbox-")) {
			if err := os.Chown(a, 65534, 65534); err != nil {
				t.Error(err)
			}
		}
	}
	return argv
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func bash(t *testing.T, ts *toolset.Toolset, command string) toolset.Result {
	t.Helper()
	return bashCtx(t, context.Background(), ts, command, 0)
}

func bashCtx(t *testing.T, ctx context.Context, ts *toolset.Toolset, command string, timeoutMs int) toolset.Result {
	t.Helper()
	in := map[string]any{"command": command}
	if timeoutMs > 0 {
		in["timeout_ms"] = timeoutMs
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return ts.Run(ctx, "bash", raw)
}

func wantOut(t *testing.T, res toolset.Result, want string) {
	t.Helper()
	if res.IsError || res.Content != want {
		t.Errorf("bash = %+v, want %q", res, want)
	}
}

func wantFail(t *testing.T, res toolset.Result, substr string) {
	t.Helper()
	if !res.IsError || !strings.Contains(res.Content, substr) {
		t.Errorf("bash = %+v, want a failure saying %q", res, substr)
	}
}

// checkView runs the agent's-eye checks of the sandbox in ts.
func (h *host) checkView(t *testing.T, ts *toolset.Toolset) {
	t.Helper()
	wantOut(t, bash(t, ts, "cat /mnt/memory/notes/x.md"), "a memory\n")
	wantOut(t, bash(t, ts, "ls /mnt/memory"), "notes\npolicy\n")
	wantOut(t, bash(t, ts, "pwd"), h.work+"\n")
	wantOut(t, bash(t, ts, `echo "$HOME" && cd && pwd`), h.work+"\n"+h.work+"\n")
	// The host's secret files are there, but unreadable, even to a shell
	// whose worker is root.
	for _, secret := range []string{"/etc/shadow", "/etc/gshadow"} {
		if _, err := os.Stat(secret); err == nil {
			wantFail(t, bash(t, ts, "cat "+secret), "Permission denied")
		}
	}
	wantOut(t, bash(t, ts, "id -u"), strconv.Itoa(sandbox.SandboxUID)+"\n")
	wantFail(t, bash(t, ts, "echo x > /mnt/memory/policy/y.md"), "Read-only file system")
	wantFail(t, bash(t, ts, "echo x > /mnt/memory/policy/rules.md"), "Read-only file system")
	wantFail(t, bash(t, ts, "mkdir /mnt/memory/another"), "Read-only file system")
	wantFail(t, bash(t, ts, "cat "+h.adminKey), "No such file or directory")
	wantFail(t, bash(t, ts, "ls "+h.other), "No such file or directory")
	wantFail(t, bash(t, ts, "ls "+filepath.Dir(h.notes)), "No such file or directory")
	wantFail(t, bash(t, ts, "touch /new-top-level-file"), "Read-only file system")
	wantOut(t, bash(t, ts, "echo new > /mnt/memory/notes/new.md && echo w > work.txt && echo t > /tmp/t && cat /tmp/t"), "t\n")
	// Its own PID namespace: the sandbox's init is pid 1, the host's
	// processes are not there.
	wantOut(t, bash(t, ts, "test -e /proc/1/cmdline && ! ls /proc | grep -qx "+strconv.Itoa(os.Getpid())+" && echo own"), "own\n")

	// What the shell wrote belongs to the worker's user on the host.
	for _, name := range []string{filepath.Join(h.notes, "new.md"), filepath.Join(h.work, "work.txt")} {
		if fi, err := os.Stat(name); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != owner(t, h.work) {
			t.Errorf("%s: %v; want it written, owned by the workdir's owner (uid %d)", name, err, owner(t, h.work))
		}
	}
	for name, want := range map[string]string{
		filepath.Join(h.notes, "new.md"):                "new\n",
		filepath.Join(h.work, "work.txt"):               "w\n",
		filepath.Join(h.policy, "rules.md"):             "be kind\n",
		filepath.Join(h.other, "theirs.md"):             "not yours\n",
		filepath.Join(h.policy, "y.md"):                 "",
		filepath.Join(filepath.Dir(h.notes), "another"): "",
	} {
		b, err := os.ReadFile(name)
		switch {
		case want == "" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s exists on the host (%v); the sandbox let a write through", name, err)
		case want != "" && string(b) != want:
			t.Errorf("%s on the host = %q, %v; want %q", name, b, err, want)
		}
	}
}

// owner is the uid that owns path.
func owner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// The shell sees the session's workdir and stores at their advertised
// paths, read-only stores refuse writes with EROFS, and the data folder,
// other sessions' folders and the mount root are not there at all.
func TestShellSeesExactlyTheSession(t *testing.T) {
	h := newHost(t)
	h.checkView(t, h.tools(t, launcher(t, sandbox.Config{})))
}

// The same view holds for a worker that is not root: bubblewrap then
// needs user namespaces, which this test checks the kernel allows.
func TestShellSeesExactlyTheSessionAsAnUnprivilegedUser(t *testing.T) {
	// pasta attaches to a namespace only for a root worker; an unprivileged
	// worker's probe finds that and shares the host's network, so this
	// test, whose launcher is probed as root, asks for that network.
	l := launcher(t, sandbox.Config{Network: sandbox.Host})
	if os.Geteuid() != 0 {
		h := newHost(t)
		h.checkView(t, h.tools(t, l))
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed, so this root test cannot drop to another user")
	}
	const nobody = "65534"
	drop := []string{setpriv, "--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "--"}
	var stderr bytes.Buffer
	probe := exec.Command(drop[0], append(drop[1:], handOver(t, l.Command(sandbox.View{Workdir: "/"}, []string{"true"}), drop)...)...)
	probe.Stderr = &stderr
	wait, err := l.Start(probe)
	if err == nil {
		err = wait()
	}
	if err != nil {
		t.Skipf("the kernel refuses bubblewrap to an unprivileged user (user namespaces), so the sandbox would fall back to none for one: %v: %s", err, stderr.String())
	}
	h := newHost(t)
	// The test's folders are root's; the unprivileged worker's own would
	// be its.
	if err := filepath.Walk(h.base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(h.base); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.checkView(t, h.tools(t, l, drop...))
}

// hostPids finds the host pids of the processes whose command line holds
// tag: inside the sandbox's PID namespace a command cannot name them.
func hostPids(t *testing.T, tag string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte(tag)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGone waits (bounded) for pids to stop running; a zombie runs
// nothing and counts as gone.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break
			}
			if s := string(stat); strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Timeouts, cancellation, the output cap and the shell's exit keep working
// inside the sandbox, and a kill reaches everything a command started,
// even a process that left the shell's process group.
func TestShellControlsWorkInsideTheSandbox(t *testing.T) {
	h := newHost(t)
	ts := h.tools(t, launcher(t, sandbox.Config{}))
	wantOut(t, bash(t, ts, "export KEPT=1"), "")

	tag := "4242.1" + strconv.Itoa(os.Getpid())
	res := bashCtx(t, context.Background(), ts, "sleep "+tag+" & setsid sleep "+tag+" & echo started; sleep "+tag, 1500)
	wantFail(t, res, "[timed out after 1.5s")
	if !strings.HasPrefix(res.Content, "started\n") {
		t.Errorf("timed-out output = %q", res.Content)
	}
	waitGone(t, hostPids(t, tag))
	wantOut(t, bash(t, ts, `echo "[$KEPT]"`), "[]\n")

	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan toolset.Result)
	go func() { done <- bashCtx(t, ctx, ts, "echo started > started; sleep "+tag, 0) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(h.work, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	cancel(errors.New("worker shutting down"))
	wantFail(t, <-done, "[cancelled (worker shutting down)")
	waitGone(t, hostPids(t, tag))

	got := bash(t, ts, "seq 1 100000")
	if got.IsError || !strings.HasPrefix(got.Content, "1\n2\n") || !strings.HasSuffix(got.Content, "99999\n100000\n") || !strings.Contains(got.Content, "bytes of output cut") {
		t.Errorf("capped output = %.40q…", got.Content)
	}
	wantFail(t, bash(t, ts, "(exit 7)"), "exit code: 7")
	wantFail(t, bash(t, ts, "exit 3"), "[the shell exited with status 3")
	wantOut(t, bash(t, ts, "echo again"), "again\n")
}

// With the network off the shell has only a loopback device.
func TestNetworkOff(t *testing.T) {
	h := newHost(t)
	ts := h.tools(t, launcher(t, sandbox.Config{Network: sandbox.Off}))
	wantOut(t, bash(t, ts, "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"), "lo\n")
}

// Extra binds show host folders at the paths given, read-only when asked.
func TestExtraBinds(t *testing.T) {
	h := newHost(t)
	tool := filepath.Join(h.base, "tool")
	if err := os.Mkdir(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tool, "v"), "1\n")
	ro, err := sandbox.ParseBind(tool + ":/opt/tool:ro")
	if err != nil {
		t.Fatal(err)
	}
	ts := h.tools(t, launcher(t, sandbox.Config{Binds: []sandbox.Bind{ro}}))
	wantOut(t, bash(t, ts, "cat /opt/tool/v"), "1\n")
	wantFail(t, bash(t, ts, "echo 2 > /opt/tool/v"), "Read-only file system")
}

// Without a working bubblewrap, auto falls back to no sandbox with one
// warning that says how to install it, and bwrap refuses to start.
func TestMissingOrRefusedBubblewrap(t *testing.T) {
	refuser := filepath.Join(t.TempDir(), "bwrap")
	write(t, refuser, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
	if err := os.Chmod(refuser, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, program, says string }{
		{"missing", filepath.Join(t.TempDir(), "no-bwrap-here"), "is not installed"},
		{"refused", refuser, "No permissions to create new namespace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs, bwrapLogs testlog.Buffer
			l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Auto, Program: c.program}, logs.Text())
			if l != nil || err != nil {
				t.Fatalf("auto = %v, %v; want no sandbox and no error", l, err)
			}
			line := logs.String()
			if strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=WARN") || !strings.Contains(line, c.says) || !strings.Contains(line, "apt-get install bubblewrap") {
				t.Errorf("auto's warning = %q", line)
			}
			l, err = sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Program: c.program}, bwrapLogs.Text())
			if l != nil || err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "--sandbox none") {
				t.Errorf("bwrap = %v, %v; want a refusal that says why and what to do", l, err)
			}
			if bwrapLogs.String() != "" {
				t.Errorf("bwrap logged %q; its error says it all", bwrapLogs.String())
			}
		})
	}
	if l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.None, Program: refuser}, slog.New(slog.DiscardHandler)); l != nil || err != nil {
		t.Errorf("none = %v, %v", l, err)
	}
	_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Auto, Binds: []sandbox.Bind{{Src: "/no/such/folder", Dst: "/x"}}}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "/no/such/folder") {
		t.Errorf("a bind of a missing folder = %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want sandbox.Bind
		err  string
	}{
		{in: "/a:/b", want: sandbox.Bind{Src: "/a", Dst: "/b"}},
		{in: "/a/:/b/c/..:ro", want: sandbox.Bind{Src: "/a", Dst: "/b", ReadOnly: true}},
		{in: "/a:/b:rw", want: sandbox.Bind{Src: "/a", Dst: "/b"}},
		{in: "/a", err: "SRC:DST"},
		{in: "/a:/b:rx", err: "SRC:DST"},
		{in: "a:/b", err: "absolute"},
		{in: "/a:b", err: "absolute"},
	} {
		got, err := sandbox.ParseBind(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseBind(%q) = %v, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseBind(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, m := range []string{"auto", "bwrap", "none"} {
		if got, err := sandbox.ParseMode(m); err != nil || string(got) != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := sandbox.ParseMode("docker"); err == nil || !strings.Contains(err.Error(), "auto") {
		t.Errorf("ParseMode(docker) = %v", err)
	}
}

// A mask file that is not empty and unreadable (someone else's, or
// changed) is refused, not shown in place of the host's secrets, and left
// as it was.
func TestTamperedMaskFileIsRefused(t *testing.T) {
	launcher(t, sandbox.Config{}) // skips without bubblewrap
	t.Setenv("TMPDIR", t.TempDir())
	mask := filepath.Join(os.TempDir(), "memstore-sandbox-mask-"+strconv.Itoa(os.Geteuid()))
	write(t, mask, "root:$6$planted\n")
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap}, slog.New(slog.DiscardHandler))
	if l != nil || err == nil || !strings.Contains(err.Error(), mask) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("New = %v, %v; want a refusal naming %s and the fix", l, err, mask)
	}
	if b, err := os.ReadFile(mask); err != nil || string(b) != "root:$6$planted\n" {
		t.Errorf("the refused file was changed: %q, %v", b, err)
	}
}

// Inside the sandbox the shell can make no namespace of its own (no root
// in a nested user namespace, no mount namespace, no new network), cannot
// mount, trace or use the kernel's keyrings; everyday work (pipes,
// subshells, background jobs) runs; and bubblewrap's command line, which
// every process there reads as /proc/1/cmdline, names none of the host's
// folders, and the files it read them from are gone.
func TestShellCannotEscalateNorSeeHostPaths(t *testing.T) {
	h := newHost(t)
	ts := h.tools(t, launcher(t, sandbox.Config{}))
	for _, cmd := range []string{
		"unshare -Ur true",
		"unshare -r true",
		"unshare -m true",
		"unshare -n true",
		"unshare -U true",
		"mount -t tmpfs none /tmp",
	} {
		if res := bash(t, ts, cmd); !res.IsError {
			t.Errorf("%q worked inside the sandbox: %q", cmd, res.Content)
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		// ptrace (even of the shell, its parent) and the keyrings
		// (keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING)).
		for what, call := range map[string]string{
			"ptrace(PTRACE_ATTACH)": "l.ptrace(16, os.getppid(), 0, 0)",
			"keyctl":                "l.syscall(" + strconv.Itoa(unix.SYS_KEYCTL) + ", 0, -4, 0)",
		} {
			res := bash(t, ts, `python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=`+call+`; print(r, ctypes.get_errno())'`)
			if res.IsError || strings.TrimSpace(res.Content) != "-1 1" {
				t.Errorf("%s = %q, want -1 EPERM", what, res.Content)
			}
		}
	}
	wantOut(t, bash(t, ts, "(echo a; sleep 0.01 & wait) | tr a b"), "b\n")

	res := bash(t, ts, `tr '\0' '\n' < /proc/1/cmdline`)
	if res.IsError || !strings.Contains(res.Content, "--args") {
		t.Fatalf("/proc/1/cmdline = %q, %v", res.Content, res.IsError)
	}
	for _, p := range []string{h.base, h.work, h.notes, os.TempDir() + "/"} {
		if strings.Contains(res.Content, p) {
			t.Errorf("/proc/1/cmdline %q names the host's %s", res.Content, p)
		}
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "memstore-sandbox-args-*"))
	left2, _ := filepath.Glob(filepath.Join(os.TempDir(), "memstore-sandbox-seccomp-*"))
	if len(left)+len(left2) != 0 {
		t.Errorf("the files bubblewrap read its arguments from are left: %v %v", left, left2)
	}
}

// The filter is built for this machine's architecture: a program of
// whole 8-byte instructions that ends by denying.
func TestSeccompProgramShape(t *testing.T) {
	p, err := sandbox.SeccompProgram()
	if err != nil {
		t.Skip(err)
	}
	if len(p)%8 != 0 || len(p)/8 > 256 || len(p) < 8*10 {
		t.Fatalf("program of %d bytes", len(p))
	}
}
