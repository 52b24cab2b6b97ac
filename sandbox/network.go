package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Network says what sandboxed commands reach (--sandbox-network).
type Network string

const (
	// On gives each sandbox a network namespace of its own, connected to
	// the outside through pasta (package passt): the internet and the
	// host's network, but not the host's loopback, where the API and the
	// worker's metrics listener are. Without pasta it falls back to Host
	// after a warning.
	On Network = "on"
	// Off gives each sandbox an empty network namespace: its own loopback
	// only.
	Off Network = "off"
	// Host shares the host's network, loopback included: the operator's
	// choice, on purpose.
	Host Network = "host"
)

// ParseNetwork reads a --sandbox-network value.
func ParseNetwork(s string) (Network, error) {
	switch n := Network(s); n {
	case On, Off, Host:
		return n, nil
	}
	return "", fmt.Errorf("sandbox network %q: use on, off or host: on (the internet, not the host's loopback), off (no network), host (the host's network, loopback included)", s)
}

// PastaHint says how to get pasta; it ends every message about it missing.
const PastaHint = "install passt, which provides pasta (Debian/Ubuntu: apt-get install passt; Fedora: dnf install passt)"

// infoFD is the descriptor bubblewrap writes its JSON status to
// (--info-fd) when the launcher attaches pasta: 3 and 4 are taken by the
// seccomp filter and the argument file that Command's script opens.
const infoFD = 5

// readyTimeout bounds the wait for bubblewrap's status and for pasta to
// configure the namespace.
const readyTimeout = 10 * time.Second

// pipeWaitDelay bounds how long a sandbox's pipes may stay open after
// bubblewrap has exited (see Start).
const pipeWaitDelay = 2 * time.Second

// Start starts cmd, a command line made by Command, in place of
// cmd.Start and returns what waits for it. With network On served by
// pasta, it reads the sandbox's pid from bubblewrap's status, attaches
// pasta to that sandbox's network namespace, waits until the namespace has
// its default route, and returns a wait that stops pasta once the sandbox
// has exited; if pasta cannot attach, the sandbox is killed and the error
// says why, so no command runs with a network other than the one asked
// for. Otherwise (and on a nil Launcher) it is cmd.Start and cmd.Wait.
func (l *Launcher) Start(cmd *exec.Cmd) (wait func() error, err error) {
	if l == nil || l.pasta == "" {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd.Wait, nil
	}
	info, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer info.Close()
	cmd.ExtraFiles = make([]*os.File, infoFD-2)
	cmd.ExtraFiles[infoFD-3] = infoW
	if cmd.WaitDelay == 0 {
		// Every process of a sandbox ends with it, so its pipes close
		// when it exits, but for a sandbox ended before its command ran
		// (fail below): this bounds Wait there. Set before Start, which
		// may hand it to the goroutine that watches cmd's context.
		cmd.WaitDelay = pipeWaitDelay
	}
	err = cmd.Start()
	infoW.Close()
	if err != nil {
		return nil, err
	}
	// fail ends the sandbox before its command runs. bubblewrap's child
	// asks to die with bubblewrap (--die-with-parent) only some way into
	// its setup, so killing bubblewrap alone can leave it running,
	// orphaned, with the command's pipes open and Wait blocked on them
	// for good (seen: a worker stuck at start, its pasta probe's cat
	// reading a stdin no one would close). Killing the child, the first
	// process of the sandbox's PID namespace, ends every process in it;
	// the WaitDelay bounds Wait where the child is not known.
	fail := func(first *os.Process, err error) (func() error, error) {
		if first != nil {
			first.Kill()
			first.Release()
		}
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("sandbox network: %w; pass --sandbox-network off or host to run without pasta", err)
	}
	pid, err := childPid(info)
	if err != nil {
		return fail(nil, err)
	}
	// A handle on the child, taken while bubblewrap still waits for it
	// (a pidfd where the kernel has them), so that the kill above cannot
	// reach another process given its pid later.
	first, err := os.FindProcess(pid)
	if err != nil {
		return fail(nil, err)
	}
	stop, err := l.attachPasta(pid)
	if err != nil {
		return fail(first, err)
	}
	first.Release()
	return func() error {
		err := cmd.Wait()
		stop()
		return err
	}, nil
}

// childPid reads the pid of the sandbox's first process from bubblewrap's
// --info-fd status; EOF means bubblewrap failed before it got there (what
// it said goes to the command's stderr).
func childPid(info *os.File) (int, error) {
	info.SetReadDeadline(time.Now().Add(readyTimeout))
	var status struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&status); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("bubblewrap exited before the sandbox started")
		}
		return 0, fmt.Errorf("read bubblewrap's status: %w", err)
	}
	if status.ChildPid <= 0 {
		return 0, errors.New("bubblewrap's status names no child pid")
	}
	return status.ChildPid, nil
}

// pastaArgs attach pasta to the network namespace it inherits as file
// descriptor 3: it copies the host's addresses and routes into it
// (--config-net), forwards no port either way, and does not map the
// gateway's address to the host (--no-map-gw), which is what would
// otherwise open the host's loopback to the sandbox. It runs in the
// foreground as the worker's child, as root when the worker is root (it
// would drop to nobody and then not be allowed to enter the namespace).
// The namespace is handed over open because pasta, having dropped its
// capabilities, may not open another user's /proc/PID/ns/net (the shell
// is nobody); this pasta cannot join bubblewrap's user namespace either,
// so a worker that is not root falls back (see New).
func pastaArgs() []string {
	a := []string{"--foreground", "--quiet", "--config-net", "--no-map-gw",
		"--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none"}
	if os.Geteuid() == 0 {
		a = append(a, "--runas", "0:0")
	}
	return append(a, "--netns", "/proc/self/fd/3")
}

// attachPasta starts pasta for the sandbox whose first process is pid and
// waits until its namespace has a default route; stop ends pasta. pasta
// is killed with the worker too (Pdeathsig), so it never outlives it.
func (l *Launcher) attachPasta(pid int) (stop func(), err error) {
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's network namespace: %w", err)
	}
	defer ns.Close()
	var stderr bytes.Buffer
	p := exec.Command(l.pasta, pastaArgs()...)
	p.Stdout, p.Stderr = &stderr, &stderr
	p.ExtraFiles = []*os.File{ns}
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start pasta: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		p.Wait()
		close(exited)
	}()
	stop = func() {
		p.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		if hasDefaultRoute(pid) {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("pasta exited (%v) before the sandbox's network was up: %s", p.ProcessState, pastaSaid(stderr.String()))
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("pasta did not set up the sandbox's network within %s: %s", readyTimeout, pastaSaid(stderr.String()))
		}
	}
}

// pastaSaid is pasta's output without its complaints about syslog, which
// a container often lacks.
func pastaSaid(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "Failed to send") {
			keep = append(keep, line)
		}
	}
	if len(keep) == 0 {
		return "(it said nothing)"
	}
	return strings.Join(keep, "; ")
}

// hasDefaultRoute says whether the network namespace of pid has an IPv4
// default route, read from the host's /proc (the namespace's routing
// table is /proc/PID/net/route).
func hasDefaultRoute(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/route")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 2 && fields[0] != "lo" && fields[1] == "00000000" {
			return true
		}
	}
	return false
}

// probePasta runs `cat` in an empty sandbox with a network namespace of
// its own and attaches pasta to it, so that a pasta that cannot work here
// is found at start, not by the first session.
func (l *Launcher) probePasta(ctx context.Context) error {
	catPath, err := exec.LookPath("cat")
	if err != nil {
		return fmt.Errorf("no 'cat' command on PATH to try pasta with: %v", err)
	}
	args := []string{"--die-with-parent", "--unshare-pid", "--unshare-net", "--info-fd", strconv.Itoa(infoFD)}
	if l.ownUser {
		args = append(args, userArgs...)
	}
	cmd := exec.CommandContext(ctx, l.program, append(args, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", catPath)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	wait, err := l.Start(cmd)
	if err != nil {
		if why := strings.TrimSpace(stderr.String()); why != "" {
			err = fmt.Errorf("%w (bubblewrap: %s)", err, why)
		}
		return err
	}
	stdin.Close()
	return wait()
}

// setNetwork settles what the shell reaches. For On it finds pasta and
// tries it once; the error says why On falls back to the host's network.
func (l *Launcher) setNetwork(ctx context.Context, cfg Config) error {
	if cfg.Network == Off || cfg.Network == Host {
		return nil
	}
	program := cfg.Pasta
	if program == "" {
		program = "pasta"
	}
	path, err := exec.LookPath(program)
	if err != nil {
		l.fallback = fmt.Errorf("pasta (%s) is not installed or not on PATH", program)
		return l.fallback
	}
	l.pasta = path
	if err := l.probePasta(ctx); err != nil {
		l.pasta = ""
		l.fallback = fmt.Errorf("pasta (%s) cannot connect a sandbox's network namespace here: %w", path, err)
		return l.fallback
	}
	return nil
}

// networkAttr is Network as the session's log line says it.
func (l *Launcher) networkAttr() string {
	switch n, _, fallback := l.Network(); {
	case n == On:
		return "on (pasta: the internet, not the host's loopback)"
	case fallback != nil:
		return "host (on, without pasta)"
	default:
		return string(n)
	}
}

// Network says what the shell reaches: On only where pasta connects each
// sandbox's namespace (then pasta's path), Off or Host; for On fallen back
// to the host's network, Host and why.
func (l *Launcher) Network() (n Network, pasta string, fallback error) {
	switch {
	case l.pasta != "":
		return On, l.pasta, nil
	case l.cfg.Network == Off || l.cfg.Network == Host:
		return l.cfg.Network, "", nil
	}
	return Host, "", l.fallback
}
