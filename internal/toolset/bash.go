package toolset

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

type bashInput struct {
	Command string `json:"command"`
	Restart bool   `json:"restart"`
	// TimeoutMs is the SDK's field (milliseconds).
	TimeoutMs int64 `json:"timeout_ms"`
	// Timeout is the SPEC's spelling, in seconds, for hand-written scripts.
	Timeout float64 `json:"timeout"`
}

// bash runs a command in the persistent shell. A command that exits non-zero
// is an error result ending in "exit code: N", as in the SDK. A command that
// runs out of time, or whose ctx is cancelled, is killed with everything it
// started (the shell's whole process group) and the shell is restarted, since
// a half-finished command would otherwise write into the next call's output.
func (t *Toolset) bash(ctx context.Context, input json.RawMessage) Result {
	var in bashInput
	if res, ok := decode("bash", input, &in, `{"command": string, "timeout_ms"?: integer, "timeout"?: seconds, "restart"?: boolean}`); !ok {
		return res
	}
	timeout, capped, err := t.bashTimeout(in)
	if err != nil {
		return failf("bash: %v", err)
	}
	if strings.IndexByte(in.Command, 0) >= 0 {
		return failf("bash: command contains a NUL byte, which a shell cannot run")
	}

	t.bashMu.Lock()
	defer t.bashMu.Unlock()
	if t.isClosed() {
		return failf("bash: the toolset has been closed")
	}
	if in.Restart {
		t.dropShell(nil, "restart requested")
		if in.Command == "" {
			return okf("bash session restarted")
		}
	}
	if in.Command == "" {
		return failf("bash: command is required")
	}
	if err := context.Cause(ctx); err != nil {
		return failf("bash: not run: the call was cancelled before it started (%v)", err)
	}
	sh, err := t.shell()
	if err != nil {
		return failf("bash: %v", err)
	}
	run := sh.run(ctx, in.Command, timeout)
	out := run.output
	switch run.end {
	case endDone:
		if run.code != 0 {
			return Result{Content: appendLine(out, fmt.Sprintf("exit code: %d", run.code)), IsError: true}
		}
		return Result{Content: out}
	case endTimeout:
		t.dropShell(sh, "timeout")
		limit := ""
		if capped {
			limit = ", the longest a call may run"
		}
		return Result{Content: appendLine(out, fmt.Sprintf("[timed out after %s%s: %s]", timeout, limit, killedNote)), IsError: true}
	case endCancelled:
		t.dropShell(sh, "cancelled")
		return Result{Content: appendLine(out, fmt.Sprintf("[cancelled (%v): %s]", context.Cause(ctx), killedNote)), IsError: true}
	default: // endExited
		t.dropShell(sh, "exited")
		if t.isClosed() {
			return Result{Content: appendLine(out, "[bash was shut down while the command ran; it was killed]"), IsError: true}
		}
		return Result{
			Content: appendLine(out, fmt.Sprintf("[the shell exited with status %d; the next command starts a new shell in the working directory]", run.code)),
			IsError: run.code != 0,
		}
	}
}

const killedNote = "the command and everything it started were killed, and the shell was restarted, so its working directory, variables and background jobs are reset"

func appendLine(out, line string) string {
	if out == "" || strings.HasSuffix(out, "\n") {
		return out + line
	}
	return out + "\n" + line
}

// bashTimeout picks the call's timeout: timeout_ms or timeout if given,
// else the default, never more than the maximum (capped says it was cut).
func (t *Toolset) bashTimeout(in bashInput) (d time.Duration, capped bool, err error) {
	switch {
	case in.TimeoutMs < 0 || in.Timeout < 0:
		return 0, false, errors.New("timeout must not be negative")
	case in.TimeoutMs > 0 && in.Timeout > 0:
		return 0, false, errors.New("give timeout_ms (milliseconds) or timeout (seconds), not both")
	case in.TimeoutMs > 0:
		d = time.Duration(min(in.TimeoutMs, int64(t.cfg.MaxBashTimeout/time.Millisecond)+1)) * time.Millisecond
	case in.Timeout > 0:
		d = time.Duration(min(in.Timeout, t.cfg.MaxBashTimeout.Seconds()+1) * float64(time.Second))
	default:
		return t.cfg.BashTimeout, false, nil
	}
	if d > t.cfg.MaxBashTimeout {
		return t.cfg.MaxBashTimeout, true, nil
	}
	return d, false, nil
}

func (t *Toolset) isClosed() bool {
	t.shellMu.Lock()
	defer t.shellMu.Unlock()
	return t.closed
}

// shell returns the running shell, starting one in the working directory if
// there is none.
func (t *Toolset) shell() (*shell, error) {
	t.shellMu.Lock()
	defer t.shellMu.Unlock()
	if t.closed {
		return nil, errors.New("the toolset has been closed")
	}
	if t.sh != nil {
		select {
		case <-t.sh.exited:
			// It died between calls (killed from outside, or after the
			// marker of its last command); start afresh.
			t.sh.kill()
			t.sh = nil
		default:
			return t.sh, nil
		}
	}
	env := t.cfg.BashEnv
	if env == nil {
		env = scrubbedEnv()
	}
	// The working directory as configured, not as resolved, so that pwd
	// shows the path the agent was told about. PWD must match it (later
	// entries win): os/exec only sets it when Env is nil, and an inherited
	// one names the worker's own directory.
	dir := t.areas[0].prefixes[0]
	env = append(slices.Clip(env), "PWD="+dir)
	bashPath, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("cannot start the shell: %w", err)
	}
	argv := []string{bashPath, "--noprofile", "--norc"}
	if t.cfg.WrapShell != nil {
		argv = t.cfg.WrapShell(argv)
	}
	sh, err := startShell(argv, dir, env, t.cfg.MaxOutputBytes, t.cfg.StartShell)
	if err != nil {
		return nil, fmt.Errorf("cannot start the shell: %w", err)
	}
	t.log.Info("bash shell started", slog.Int("pid", sh.cmd.Process.Pid))
	t.sh = sh
	return sh, nil
}

// dropShell kills sh (nil: the current shell) and forgets it, so the next
// command starts a fresh one.
func (t *Toolset) dropShell(sh *shell, why string) {
	t.shellMu.Lock()
	if sh == nil {
		sh = t.sh
	}
	if t.sh == sh {
		t.sh = nil
	}
	t.shellMu.Unlock()
	if sh != nil {
		sh.kill()
		t.log.Info("bash shell stopped", slog.Int("pid", sh.cmd.Process.Pid), slog.String("reason", why))
	}
}

// credentialPrefixes name the variables the shell never inherits: the
// worker's ANTHROPIC_* (environment key, work secret) and memstore's own
// MEMSTORE_* (the admin key under 'memstore up'). The shell is driven by the
// model, so a credential in its environment is a credential handed to it.
var credentialPrefixes = []string{"ANTHROPIC_", "MEMSTORE_"}

// scrubbedEnv is the worker's environment without the credentialPrefixes
// variables.
func scrubbedEnv() []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range credentialPrefixes {
			if strings.HasPrefix(strings.ToUpper(kv), p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// shell is one bash process reading commands from a pipe. Its stdout and
// stderr share one pipe, so their lines interleave as they would on a
// terminal. It leads its own process group, so a kill reaches every process
// a command started (unless one left the group on purpose, with setsid).
type shell struct {
	cmd    *exec.Cmd
	limit  int // output kept per command, head and tail together
	stdin  *os.File
	out    *os.File
	exited chan struct{} // closed once the shell process has been reaped
	read   chan struct{} // closed when the output pipe reaches EOF or is closed

	killOnce sync.Once

	mu     sync.Mutex
	cur    *capture      // the running command's output; nil between commands
	notify chan struct{} // a wake-up after each delivery (capacity 1)
}

// startShell starts argv (bash, perhaps wrapped in a sandbox) in dir,
// with start (when set) in place of exec.Cmd's Start and Wait.
func startShell(argv []string, dir string, env []string, limit int, start func(*exec.Cmd) (func() error, error)) (*shell, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if start == nil {
		start = func(cmd *exec.Cmd) (func() error, error) { return cmd.Wait, cmd.Start() }
	}
	wait, err := start(cmd)
	// The child holds its own copies; ours would keep the output pipe from
	// ever reaching EOF.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	s := &shell{
		cmd: cmd, stdin: inW, out: outR, limit: limit,
		exited: make(chan struct{}), read: make(chan struct{}), notify: make(chan struct{}, 1),
	}
	go func() {
		_ = wait()
		close(s.exited)
	}()
	go s.drain()
	return s, nil
}

// drain hands the shell's output to the running command's capture; output
// written between commands (a background job's) belongs to no call and is
// dropped.
func (s *shell) drain() {
	defer close(s.read)
	buf := make([]byte, 32*1024)
	for {
		n, err := s.out.Read(buf)
		if n > 0 {
			s.mu.Lock()
			if s.cur != nil {
				s.cur.feed(buf[:n])
			}
			s.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

type runEnd int

const (
	endDone runEnd = iota
	endTimeout
	endCancelled
	endExited
)

type runResult struct {
	output string
	code   int // the command's exit status, or the shell's for endExited
	end    runEnd
}

// run writes command into the shell and waits for its completion marker,
// the timeout, ctx or the shell's exit.
//
// The command travels as a quoted here-document into a variable that the
// shell then evals: the command runs in the shell itself (so cd and export
// persist), a syntax error in it is an ordinary failed command instead of a
// shell left waiting for a closing quote, and its stdin is /dev/null so a
// command that reads stdin gets EOF instead of swallowing the next command.
// The completion marker carries a random nonce and is printed in two pieces,
// so neither the command nor a shell trace (set -x, set -v) can forge it.
func (s *shell) run(ctx context.Context, command string, timeout time.Duration) runResult {
	nonce := newNonce()
	marker := "__MEMSTORE_DONE_" + nonce + "__"
	c := newCapture(marker, s.limit)
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
	}()

	delim := "__MEMSTORE_EOF_" + nonce
	script := "IFS= builtin read -r -d '' __memstore_cmd <<'" + delim + "'\n" + command + "\n" + delim + "\n" +
		"builtin eval \"$__memstore_cmd\" </dev/null\n" +
		"builtin printf '\\n%s%s%d\\n' '__MEMSTORE_DONE_' '" + nonce + "__' \"$?\"\n"
	// A write into a shell that stopped reading would block; the timeout
	// and ctx still end the call, and the kill closes the pipe under it.
	go func() { _, _ = s.stdin.WriteString(script) }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-s.notify:
			s.mu.Lock()
			done, out, code := c.done, c.text(), c.code
			s.mu.Unlock()
			if done {
				return runResult{output: out, code: code, end: endDone}
			}
		case <-s.exited:
			s.kill()
			s.mu.Lock()
			done, out, code := c.done, c.text(), c.code
			s.mu.Unlock()
			if done { // it finished, then the shell died: the result stands
				return runResult{output: out, code: code, end: endDone}
			}
			return runResult{output: out, code: s.cmd.ProcessState.ExitCode(), end: endExited}
		case <-timer.C:
			s.kill()
			return runResult{output: s.finalText(c), end: endTimeout}
		case <-ctx.Done():
			s.kill()
			return runResult{output: s.finalText(c), end: endCancelled}
		}
	}
}

func (s *shell) finalText(c *capture) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.text()
}

// kill ends the shell's whole process group, waits for the shell to be
// reaped and for the output still in the pipe to be read, then closes the
// pipes. A process that escaped the group may hold the output pipe open, so
// that wait is bounded.
func (s *shell) kill() {
	s.killOnce.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
		select {
		case <-s.read:
		case <-time.After(time.Second):
		}
		s.stdin.Close()
		s.out.Close()
		<-s.read
	})
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// capture collects one command's output up to its completion marker, keeping
// the first and the last limit/2 bytes: the start says what the command did
// and the end how it finished, which is what an agent needs from a long log.
type capture struct {
	marker     []byte
	headCap    int
	tailCap    int
	head, tail []byte
	total      int
	pending    []byte // bytes that may be the start of the marker
	done       bool
	code       int
}

func newCapture(marker string, limit int) *capture {
	return &capture{marker: []byte(marker), headCap: limit / 2, tailCap: limit - limit/2}
}

// feed takes a chunk of output. The marker line is "\n<marker><status>\n";
// the leading newline was added by the marker's printf and is not output.
func (c *capture) feed(p []byte) {
	if c.done {
		return
	}
	c.pending = append(c.pending, p...)
	if i := bytes.Index(c.pending, c.marker); i >= 0 {
		rest := c.pending[i+len(c.marker):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return // the status is still on its way
		}
		code, err := strconv.Atoi(string(rest[:nl]))
		if err != nil {
			code = -1
		}
		c.keep(bytes.TrimSuffix(c.pending[:i], []byte("\n")))
		c.pending, c.done, c.code = nil, true, code
		return
	}
	// Hold back enough to contain a marker that has only partly arrived,
	// plus the newline before it.
	if hold := len(c.marker) + 1; len(c.pending) > hold {
		c.keep(c.pending[:len(c.pending)-hold])
		c.pending = append(c.pending[:0], c.pending[len(c.pending)-hold:]...)
	}
}

func (c *capture) keep(p []byte) {
	c.total += len(p)
	if room := c.headCap - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailCap {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailCap:]...)
	}
}

// text is the output so far: all of it if it fits, else head, a note of how
// much was cut, and tail, each cut on a character boundary.
func (c *capture) text() string {
	head, tail, seen := c.head, c.tail, c.total
	if !c.done {
		tail = append(slices.Clip(tail), c.pending...)
		seen += len(c.pending)
	}
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	if seen == len(head)+len(tail) {
		return strings.ToValidUTF8(string(head)+string(tail), "\uFFFD")
	}
	if i := lastRuneStart(head); i >= 0 && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	cut := seen - len(head) - len(tail)
	return strings.ToValidUTF8(fmt.Sprintf("%s\n[... %d bytes of output cut ...]\n%s", head, cut, tail), "\uFFFD")
}

// lastRuneStart is the index of the last byte of b that starts a character,
// or -1.
func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i >= 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}
