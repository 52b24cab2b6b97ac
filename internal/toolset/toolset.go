// Package toolset runs the agent tools of a self-hosted session — the
// agent_toolset_20260401 set: read, write, edit, bash, glob and grep — on
// behalf of the worker.
//
// The tools behave the way the official SDK's local executors do, so an agent
// served by memstore's worker has the same experience as one served by the
// SDK's EnvironmentWorker: the same input field names, the same result texts
// and errors reported as results with is_error set (their text starts with
// the tool's name, "edit: old_string not found in notes.md"), never as Go
// errors or panics.
//
// # The tools
//
//   - read {file_path, view_range?}: the file's text exactly as stored, no
//     line numbers. view_range [start, end] is 1-based and inclusive (an end
//     of 0 or less means the end of the file) and returns those lines joined
//     by "\n". A file over Config.MaxReadBytes must be read with view_range.
//     Only UTF-8 text is returned.
//   - write {file_path, content}: replaces or creates the file, and its
//     missing folders. Result: "wrote N bytes to <file_path>".
//   - edit {file_path, old_string, new_string, replace_all?}: old_string must
//     occur exactly once unless replace_all is set. Result:
//     "edited <file_path> (N replacement(s))".
//   - bash {command, timeout_ms?, timeout?, restart?}: runs command in the
//     persistent shell; the result is its stdout and stderr, interleaved, and
//     a failed command is an error ending in "exit code: N". See [Toolset.Run]
//     for timeouts and cancellation.
//   - glob {pattern, path?}: paths under path (default: the working
//     directory) matching pattern, one absolute path a line, newest first.
//     "**" matches any number of folders; other segments use [path.Match]
//     syntax. "no matches" when there are none.
//   - grep {pattern, path?}: lines matching pattern, a Go regular expression
//     (RE2 syntax: "(?i)" for case-insensitive; no backreferences or
//     lookaround), as "path:line:text" in path then line order; path may be
//     a folder or a file. Skips .git, node_modules, binary files and files
//     over 8 MiB.
//
// Results that would be too long are cut and say so: bash keeps the head and
// the tail of its output, glob and grep list the first results and say how
// many more there were.
//
// # Where the file tools may go
//
// The file tools (read, write, edit, glob, grep) reach only the session's
// working directory and its mounted memory stores. A relative path resolves
// against the working directory. A memory store may be named by its advertised
// mount path (/mnt/memory/<slug>, what the agent's system prompt says) or by
// the folder it really lives in (the worker's --mount-root can move it), and
// both name the same files; results and errors use the agent's own spelling,
// so a remapped store's real folder is never revealed. ".." is resolved
// lexically and a path that ends up outside every allowed root is refused.
//
// Symbolic links are never followed by the file tools, inside or outside the
// roots: a path whose component is a link is refused, and glob and grep skip
// links. The memory stores require it (a link would let two memories share a
// file, or a write land somewhere the sync never looks), and refusing them
// everywhere keeps one rule an agent can learn from a single error message.
// Every read, write and walk, in the working directory and in the stores
// alike, goes through package confined, the I/O the memory sync uses: it
// walks every component without following a link, so even a link swapped
// in by a racing process cannot lead a tool out of its root. In a memory
// store's folder it also refuses files with several hard links (a hard
// link to a file outside the folder would leak or publish it); the
// working directory allows them, as projects use them.
//
// write and edit refuse every path inside a read-only store with an error
// that names the store's mount path: it is the only memory error an agent
// ever sees, and it is better to see it at write time than to find the change
// silently never synced. They also refuse the store's marker file. Files and
// folders the tools create are owner-only (0600 and 0700, as the memory
// folders require and as the SDK does everywhere); an existing file in the
// working directory keeps its mode. Writes are atomic (a temporary file beside the target, then a
// rename), so the sync never uploads half a file.
//
// # bash
//
// bash is one persistent shell per Toolset, started on first use in the
// working directory: cwd, variables and functions carry over between calls.
// It runs without a terminal, reads commands from a pipe, and gives each
// command /dev/null as stdin. It does not get the worker's ANTHROPIC_* or
// MEMSTORE_* variables (credentials). It is confined only by
// Config.WrapShell: the worker runs it in a bubblewrap sandbox that shows the
// same working directory and stores as the file tools, and nothing else.
//
// POSIX only.
package toolset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"sync"
	"time"
)

// Result is what a tool call produced: the text the agent sees, and whether
// it is an error — what the worker posts as the text content and is_error of
// the user.tool_result event.
type Result struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error"`
	// Wrote names the memory store files the call wrote, each by its
	// advertised mount path (/mnt/memory/<slug>/<file>), whichever spelling
	// the agent used: the toolset knows what it changed, so the worker
	// uploads exactly that instead of guessing it from the tool's input.
	// Set by a successful write or edit inside a writable store; files of
	// the working directory, and whatever bash changes, are not listed
	// (the sync's scan finds those). The agent never sees it.
	Wrote []string `json:"-"`
}

// Mount is one memory store as the toolset sees it.
type Mount struct {
	// Path is the advertised mount path the agent was told about, e.g.
	// /mnt/memory/notes. Absolute.
	Path string
	// Dir is the folder on disk that holds the store's files. It is the same
	// as Path unless the worker remapped the mount root.
	Dir string
	// ReadOnly makes write and edit refuse every path inside the store.
	ReadOnly bool
}

// Config configures a Toolset. Zero limits select the defaults below.
type Config struct {
	// Workdir is the session's working directory: relative paths resolve
	// against it, the file tools may read and write in it, and bash starts
	// in it. It must exist.
	Workdir string
	// Mounts are the session's memory stores.
	Mounts []Mount

	// MaxReadBytes caps the size of a file read or edit loads whole
	// (default 256 KiB, the SDK's cap). A larger file can still be read
	// with view_range, with the cap applying to the selected lines.
	MaxReadBytes int64
	// MaxOutputBytes caps what bash and grep return (default 100 KiB, the
	// SDK's cap). bash keeps the head and the tail of a longer output and
	// says how much it cut; grep stops and says how many lines it left out.
	MaxOutputBytes int
	// MaxGlobResults caps how many paths glob lists (default 200, the SDK's
	// cap); the result says how many more matched.
	MaxGlobResults int

	// BashTimeout is the time a bash call may run when it asks for no
	// timeout (default 120 s, the SDK's default).
	BashTimeout time.Duration
	// MaxBashTimeout caps the timeout a bash call may ask for (default 10
	// minutes), so one call cannot hold a session's lease forever.
	MaxBashTimeout time.Duration
	// BashEnv, when non-nil, is the whole environment of the shell
	// ("KEY=value" entries). When nil the shell inherits the worker's
	// environment without its ANTHROPIC_* and MEMSTORE_* variables, which
	// hold the environment key, the work secret and the admin key and have
	// no business in a shell the model drives.
	BashEnv []string
	// WrapShell, when set, turns the shell's command line (bash and its
	// arguments) into the one started instead: the same shell inside a
	// sandbox (package sandbox). The wrapped command must stay in the
	// process group the toolset makes it lead, pass stdin and output
	// through, and exit with the shell's status, so that timeouts, the
	// output cap and the kill of everything a command started keep working.
	WrapShell func(argv []string) []string
	// StartShell, when set, starts the shell's command (already wrapped)
	// in place of cmd.Start and returns what waits for it: the sandbox
	// starts the helper that connects its network beside the shell, and
	// stops it once the shell has exited.
	StartShell func(cmd *exec.Cmd) (wait func() error, err error)

	// Logger receives the toolset's own events (shell started, killed).
	// Default: slog.Default(). The worker passes one already carrying
	// session_id and work_id.
	Logger *slog.Logger
}

// Defaults for the zero values of Config.
const (
	DefaultMaxReadBytes   = 256 * 1024
	DefaultMaxOutputBytes = 100 * 1024
	DefaultMaxGlobResults = 200
	DefaultBashTimeout    = 120 * time.Second
	DefaultMaxBashTimeout = 10 * time.Minute
)

// Toolset runs the tools of one session. Its methods are safe to call from
// several goroutines; bash calls run one at a time.
type Toolset struct {
	cfg   Config
	log   *slog.Logger
	areas []*area

	// bashMu serialises bash calls: there is one shell, and two commands
	// written into it at once would interleave their output.
	bashMu sync.Mutex
	// shellMu guards sh and closed. It is separate from bashMu so that Close
	// can kill the shell while a bash call holds bashMu and waits on it.
	shellMu sync.Mutex
	sh      *shell
	closed  bool
}

// New checks cfg and returns a Toolset. It starts nothing: the shell starts
// on the first bash call.
func New(cfg Config) (*Toolset, error) {
	if cfg.Workdir == "" {
		return nil, errors.New("toolset: Config.Workdir is required")
	}
	info, err := os.Stat(cfg.Workdir)
	if err != nil {
		return nil, fmt.Errorf("toolset: working directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("toolset: working directory %s is not a directory", cfg.Workdir)
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = DefaultMaxReadBytes
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxGlobResults <= 0 {
		cfg.MaxGlobResults = DefaultMaxGlobResults
	}
	if cfg.MaxBashTimeout <= 0 {
		cfg.MaxBashTimeout = DefaultMaxBashTimeout
	}
	if cfg.BashTimeout <= 0 {
		cfg.BashTimeout = DefaultBashTimeout
	}
	cfg.BashTimeout = min(cfg.BashTimeout, cfg.MaxBashTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	areas, err := buildAreas(cfg.Workdir, cfg.Mounts)
	if err != nil {
		return nil, err
	}
	return &Toolset{cfg: cfg, log: cfg.Logger, areas: areas}, nil
}

// Run runs the tool called name with its JSON input and returns its result.
// An unknown tool, malformed input or any failure is an error result; Run
// never panics on what the agent sends.
//
// Only bash watches ctx (the file tools are short and bounded by their own
// limits): cancelling it kills the running command's whole process group,
// restarts the shell and returns an error result promptly, so a worker
// shutting down on SIGTERM cancels ctx and still has a result to post. The bash input takes the SDK's timeout_ms (milliseconds),
// or timeout (seconds, as a number) for scripts written by hand; zero or
// absent means Config.BashTimeout, and no call may exceed
// Config.MaxBashTimeout.
func (t *Toolset) Run(ctx context.Context, name string, input json.RawMessage) (res Result) {
	start := time.Now()
	// A bug here must cost one tool call, not the worker's whole session
	// loop; it is logged loudly so it gets fixed.
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("tool panicked", slog.String("tool", name), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			res = failf("%s: internal error in the tool; the call did nothing useful and can be retried", name)
		}
	}()
	switch name {
	case "read":
		res = t.read(input)
	case "write":
		res = t.write(input)
	case "edit":
		res = t.edit(input)
	case "glob":
		res = t.glob(input)
	case "grep":
		res = t.grep(input)
	case "bash":
		res = t.bash(ctx, input)
	default:
		res = failf("unknown tool %q: this worker runs read, write, edit, bash, glob and grep", name)
	}
	t.log.Debug("tool call", slog.String("tool", name), slog.Bool("is_error", res.IsError),
		slog.Duration("duration", time.Since(start)))
	return res
}

// Close kills the shell and everything it started, and makes later bash
// calls fail. A bash call running at the time returns an error result. The
// file tools keep working: they hold nothing open between calls.
func (t *Toolset) Close() error {
	t.shellMu.Lock()
	sh := t.sh
	t.sh = nil
	t.closed = true
	t.shellMu.Unlock()
	if sh != nil {
		sh.kill()
	}
	return nil
}

// okf and failf build results.
func okf(format string, a ...any) Result { return Result{Content: fmt.Sprintf(format, a...)} }

func failf(format string, a ...any) Result {
	return Result{Content: fmt.Sprintf(format, a...), IsError: true}
}

// decode unmarshals a tool's input. An absent or null input decodes as {},
// so the tool reports the missing field by name instead of a JSON error.
func decode(tool string, input json.RawMessage, v any, shape string) (Result, bool) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, v); err != nil {
		return failf("%s: invalid input: %v; expected %s", tool, err, shape), false
	}
	return Result{}, true
}
