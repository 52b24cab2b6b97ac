// Package sandbox runs a session's shell inside a bubblewrap (bwrap)
// sandbox, so that it sees what the agent's system prompt describes and
// nothing else: the working directory, each memory store at its advertised
// mount path (read-only stores mounted read-only, so a write fails with
// EROFS as in the cloud), the host's system folders read-only, a private
// /tmp, /proc and /dev, and its own PID namespace; the host's secret files
// in /etc are masked, and the shell runs as an unprivileged user (nobody)
// where a user namespace can be made, even under a root worker. The
// worker's data, its credentials, other sessions' folders and the mount
// roots are not in the view at all: the sandbox starts from an empty root
// and binds in only those folders.
//
// bubblewrap is what Flatpak and Anthropic's sandbox runtime use on Linux.
// It works as root and, where the kernel allows user namespaces, as any
// user; [New] checks that it works here before any session relies on it.
//
// It is a public package, unlike the file tools and confined I/O under
// internal/, because an embedder configures it: worker.Config.Sandbox is a
// [Config].
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mode says whether sessions' shells run in a sandbox.
type Mode string

const (
	// Auto uses bubblewrap when it is installed and works here, else runs
	// unconfined after one warning that says how to install it.
	Auto Mode = "auto"
	// Bwrap requires bubblewrap: New fails when it cannot be used.
	Bwrap Mode = "bwrap"
	// None runs the shell unconfined, as the worker's user: for a worker
	// that already runs in a sandbox of its own (a container), or that
	// serves only agents it trusts.
	None Mode = "none"
)

// ParseMode reads a --sandbox value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Bwrap, None:
		return m, nil
	}
	return "", fmt.Errorf("sandbox mode %q: use auto (bubblewrap when it works here), bwrap (require it) or none (no sandbox)", s)
}

// Bind is an extra folder or file of the host shown inside every sandbox,
// for tools the agent needs (a toolchain under /opt, a cache).
type Bind struct {
	Src, Dst string
	ReadOnly bool
}

// ParseBind reads a --sandbox-bind value, SRC:DST or SRC:DST:ro, both
// absolute.
func ParseBind(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	b := Bind{}
	switch {
	case len(parts) == 3 && parts[2] == "ro":
		b.ReadOnly = true
	case len(parts) == 3 && parts[2] == "rw":
	case len(parts) != 2:
		return b, fmt.Errorf("sandbox bind %q: write SRC:DST or SRC:DST:ro, two absolute paths", s)
	}
	b.Src, b.Dst = parts[0], parts[1]
	if !filepath.IsAbs(b.Src) || !filepath.IsAbs(b.Dst) {
		return b, fmt.Errorf("sandbox bind %q: both paths must be absolute (SRC:DST or SRC:DST:ro)", s)
	}
	b.Src, b.Dst = filepath.Clean(b.Src), filepath.Clean(b.Dst)
	return b, nil
}

func (b Bind) String() string {
	if b.ReadOnly {
		return b.Src + ":" + b.Dst + ":ro"
	}
	return b.Src + ":" + b.Dst
}

// Config configures the sandbox of every session of a worker. The zero
// value is no sandbox.
type Config struct {
	// Mode is Auto, Bwrap or None; empty means None.
	Mode Mode
	// Network is what sandboxed commands reach: On (empty means On), Off
	// or Host.
	Network Network
	// Pasta is the pasta executable that connects On's namespaces; empty
	// finds "pasta" on PATH.
	Pasta string
	// Binds are shown in every sandbox, after the system folders.
	Binds []Bind
	// Program is the bwrap executable; empty finds "bwrap" on PATH.
	Program string
	// Env is what the operator passes to every shell besides the
	// allowlist (ShellEnv), as NAME=value entries (ParseEnv); it applies
	// without bubblewrap too.
	Env []string
}

// Launcher starts commands inside sandboxes. A nil *Launcher means no
// sandbox: its methods then describe and run commands unconfined.
type Launcher struct {
	program string
	cfg     Config
	// ownUser says the shell runs as SandboxUID in a user namespace of its
	// own (bubblewrap and the kernel allow it), not as the worker's user.
	ownUser bool
	// mask is an empty file no one may read, bound over the host's secret
	// files.
	mask string
	// seccomp is the filter program (SeccompProgram); nil on an
	// architecture without one.
	seccomp []byte
	// disableUserns: bubblewrap can keep the shell from making user
	// namespaces of its own (--disable-userns, bwrap 0.8 and later).
	disableUserns bool
	// pasta is the pasta executable attached to each sandbox's network
	// namespace (network On); "" when the network is Off, Host, or On
	// fallen back to the host's.
	pasta string
	// fallback says why network On fell back to the host's.
	fallback error
}

// SandboxUID is the user (and group) the sandboxed shell runs as, where a
// user namespace can be made: "nobody", without capabilities, even when
// the worker is root. The namespace maps it to the worker's user, so the
// files it writes in the workdir and the stores belong to the worker's
// user on the host, and the files of the worker's user are its own.
const SandboxUID = 65534

// InstallHint says how to get bubblewrap; it ends every message about it
// being missing or refused.
const InstallHint = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) or pass --sandbox none to run agents' commands unconfined"

// New resolves cfg.Mode: nil for None; for Bwrap a Launcher, or an error
// that says why bubblewrap cannot be used here and what to do; for Auto a
// Launcher when bubblewrap works, else nil after one warning on log.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Launcher, error) {
	switch cfg.Mode {
	case "", None:
		return nil, nil
	case Auto, Bwrap:
	default:
		return nil, fmt.Errorf("sandbox: unknown mode %q: use auto, bwrap or none", cfg.Mode)
	}
	if _, err := ParseNetwork(string(cfg.Network)); cfg.Network != "" && err != nil {
		return nil, err
	}
	for _, b := range cfg.Binds {
		if _, err := os.Stat(b.Src); err != nil {
			return nil, fmt.Errorf("sandbox bind %s: its source cannot be used (%v); fix the path or drop the bind", b, err)
		}
	}
	program, err := probe(ctx, cfg.Program)
	if err == nil {
		mask, err := maskFile()
		if err != nil {
			return nil, err
		}
		l := &Launcher{program: program, cfg: cfg, mask: mask}
		l.ownUser = probeRun(ctx, program, userArgs) == nil
		if !l.ownUser {
			log.Warn("the sandboxed shell runs as the worker's user: bubblewrap cannot make a user namespace here, so it cannot drop to an unprivileged one; the host's secret files in /etc stay masked",
				"uid", os.Geteuid(), "fix", "allow user namespaces (sysctl user.max_user_namespaces > 0), or run the worker as an unprivileged user")
		} else {
			l.disableUserns = probeRun(ctx, program, append(slices.Clip(userArgs), "--disable-userns")) == nil
		}
		if err := l.setNetwork(ctx, cfg); err != nil {
			log.Warn("--sandbox-network on shares the host's network: sandboxed commands reach the host's loopback too (the API, the worker's metrics listener, local databases)",
				"reason", err.Error(), "fix", PastaHint+"; or pass --sandbox-network off to cut the network, or --sandbox-network host to say the host's network is meant")
		}
		if l.seccomp, err = SeccompProgram(); err != nil {
			log.Warn("the sandboxed shell runs without a seccomp filter: it may make namespaces of its own, mount and trace", "reason", err.Error())
		}
		return l, nil
	}
	if cfg.Mode == Bwrap {
		return nil, err
	}
	log.Warn("no sandbox: agents' bash runs unconfined, as the worker's user, and sees every file that user can; because:", "reason", err.Error())
	return nil, nil
}

// probe finds bwrap and runs one empty sandbox with it, so that a kernel
// that refuses namespaces is found before the first session, not by it.
func probe(ctx context.Context, program string) (string, error) {
	if program == "" {
		program = "bwrap"
	}
	path, err := exec.LookPath(program)
	if err != nil {
		return "", fmt.Errorf("bubblewrap (%s) is not installed or not on PATH; %s", program, InstallHint)
	}
	if err := probeRun(ctx, path, nil); err != nil {
		return "", fmt.Errorf("bubblewrap (%s) cannot create a sandbox here (%v): if the worker does not run as root, the kernel must allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0), and in a container the runtime must allow them; or %s",
			path, err, InstallHint)
	}
	return path, nil
}

// userArgs make the sandboxed shell SandboxUID in a user namespace.
var userArgs = []string{"--unshare-user", "--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxUID)}

// probeRun runs `true` in an empty sandbox made by bwrap with extra
// arguments, masking a folder as Command masks one (a bwrap too old for
// that is refused here, not by every session); the error holds what bwrap
// said.
func probeRun(ctx context.Context, bwrap string, extra []string) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("no 'true' command on PATH to try bubblewrap with: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	args := append([]string{"--die-with-parent", "--unshare-pid"}, extra...)
	cmd := exec.CommandContext(ctx, bwrap, append(args, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--perms", "0000", "--tmpfs", "/tmp", "--", truePath)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if why := strings.TrimSpace(stderr.String()); why != "" {
			return errors.New(why)
		}
		return err
	}
	return nil
}

// maskFile returns the empty, mode 0000 file bound over the host's secret
// files: one per user in the temporary folder, made once and reused (the
// sticky temporary folder keeps others from replacing it). A file of that
// name that is not such a file is refused rather than trusted.
func maskFile() (string, error) {
	path := filepath.Join(os.TempDir(), "memstore-sandbox-mask-"+strconv.Itoa(os.Geteuid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0)
	if err == nil {
		return path, f.Close()
	}
	if !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: create %s, the empty file shown in place of the host's secret files: %w (set TMPDIR to a writable folder)", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("sandbox: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0 || fi.Size() != 0 || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("sandbox: %s is not the empty, mode 0000 file of this user the sandbox shows in place of the host's secret files (%v, %d bytes); remove it and start again", path, fi.Mode(), fi.Size())
	}
	return path, nil
}

// secretsRoot is the host folder whose unreadable entries are masked.
const secretsRoot = "/etc"

// secrets lists what under /etc others may not read: password and group
// shadows, private keys, database access rules. The sandbox shows them
// through the read-only /etc, and its shell, running as the worker's user
// or mapped to it, would otherwise read them as their owner.
func secrets() (files, dirs []string) {
	filepath.WalkDir(secretsRoot, func(path string, d fs.DirEntry, err error) error {
		if d == nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, ierr := d.Info()
		if ierr != nil {
			return nil
		}
		switch perm := fi.Mode().Perm(); {
		case d.IsDir() && perm&0o005 != 0o005:
			dirs = append(dirs, path)
			return filepath.SkipDir
		case d.IsDir() && err != nil:
			return filepath.SkipDir
		case fi.Mode().IsRegular() && perm&0o004 == 0:
			files = append(files, path)
		}
		return nil
	})
	return files, dirs
}

// Store is one memory store as a session's sandbox shows it.
type Store struct {
	// Dir is the folder on the host; MountPath is where the agent sees it.
	Dir, MountPath string
	ReadOnly       bool
}

// View is what one session's shell may see besides the system folders.
type View struct {
	// Workdir is bound read-write at its own path, and the shell starts in
	// it.
	Workdir string
	// MemoryRoot is the folder the stores' mount paths are under
	// (/mnt/memory); it is an empty, read-only folder apart from them, so
	// its listing names exactly the attached stores.
	MemoryRoot string
	Stores     []Store
	// ReadOnly are folders inside Workdir the shell may read but not
	// change (the session's skills), bound read-only at their own path.
	ReadOnly []string
}

// systemDirs are the host folders every sandbox shows read-only: programs,
// libraries and /etc (users, name resolution, certificates); anything else
// (/opt, a home folder) is added with Config.Binds. A symbolic
// link among them (/bin -> usr/bin on merged-/usr systems) is shown as the
// same link.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// Command is the command line that runs argv inside v; start it with
// Start. On a nil Launcher it is argv. Otherwise it is a /bin/sh that opens the files
// holding bubblewrap's arguments and the seccomp filter, removes them, and
// execs bwrap --args FD -- argv: bwrap's command line, which every process
// in the sandbox can read as /proc/1/cmdline, names none of the host's
// folders (the workdir, the mount root, the store folders). A file that
// cannot be written gives a command that says so and fails.
//
// The sandbox starts from an empty root, binds in the system folders
// read-only, gives it fresh /proc, /dev and /tmp, binds the working
// directory read-write and each store at its mount path (read-only ones
// read-only), adds the configured binds, then makes the memory root and the
// root itself read-only. What under /etc others may not read (the password
// shadows, private keys) is masked: files by an empty file no one may
// read, folders by an empty one. HOME is the working directory, the one
// folder of the agent's own. It has its own PID, IPC and UTS namespaces
// (and network, when NoNetwork), a user namespace where the shell is
// SandboxUID when one can be made (and can make no other), the seccomp
// filter, and dies with its parent; the process group is the caller's, so
// killing the group kills everything in it.
func (l *Launcher) Command(v View, argv []string) []string {
	if l == nil {
		return argv
	}
	args, err := l.writeArgs(l.bwrapArgs(v))
	if err != nil {
		return failing("sandbox: " + err.Error())
	}
	// With pasta, bubblewrap writes its status to a descriptor only
	// Start opens; without it, the number could be one of bubblewrap's own.
	guard := ""
	if l.pasta != "" {
		guard = `{ : >&` + strconv.Itoa(infoFD) + `; } 2>/dev/null || { echo 'sandbox: this command must be started by Launcher.Start, which connects its network' >&2; exit 126; }; `
	}
	if l.seccomp == nil {
		script := guard + `exec 4<"$1" && rm -f -- "$1" && shift && exec "$0" --args 4 -- "$@"`
		return append([]string{"/bin/sh", "-c", script, l.program, args}, argv...)
	}
	seccomp, err := writeTemp("memstore-sandbox-seccomp-*", l.seccomp)
	if err != nil {
		os.Remove(args)
		return failing("sandbox: " + err.Error())
	}
	script := guard + `exec 3<"$1" 4<"$2" && rm -f -- "$1" "$2" && shift 2 && exec "$0" --args 4 -- "$@"`
	return append([]string{"/bin/sh", "-c", script, l.program, seccomp, args}, argv...)
}

// failing is a command that prints why the sandbox could not start and
// fails, so the agent's call reports it and nothing runs unconfined.
func failing(why string) []string {
	return []string{"/bin/sh", "-c", `printf '%s\n' "$0" >&2; exit 126`, why}
}

// writeArgs writes bubblewrap's arguments, NUL-separated, to a file only
// the worker's user can read (they name the host's folders).
func (l *Launcher) writeArgs(args []string) (string, error) {
	var b []byte
	for _, a := range args {
		b = append(append(b, a...), 0)
	}
	return writeTemp("memstore-sandbox-args-*", b)
}

func writeTemp(pattern string, b []byte) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("write the sandbox's arguments to a temporary file: %w (set TMPDIR to a writable folder)", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write the sandbox's arguments to %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// bwrapArgs are bubblewrap's options for v (see Command); the seccomp
// filter is read from file descriptor 3.
func (l *Launcher) bwrapArgs(v View) []string {
	a := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if l.ownUser {
		a = append(a, userArgs...)
		if l.disableUserns {
			a = append(a, "--disable-userns")
		}
	}
	if l.seccomp != nil {
		a = append(a, "--seccomp", "3")
	}
	if l.cfg.Network == Off {
		a = append(a, "--unshare-net")
	}
	if l.pasta != "" {
		a = append(a, "--unshare-net", "--info-fd", strconv.Itoa(infoFD))
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	files, dirs := secrets()
	for _, f := range files {
		a = append(a, "--ro-bind", l.mask, f)
	}
	for _, d := range dirs {
		a = append(a, "--perms", "0000", "--tmpfs", d, "--remount-ro", d)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	a = append(a, "--bind", v.Workdir, v.Workdir)
	for _, d := range v.ReadOnly {
		a = append(a, "--ro-bind", d, d)
	}
	if v.MemoryRoot != "" {
		a = append(a, "--tmpfs", v.MemoryRoot)
	}
	for _, s := range v.Stores {
		a = append(a, bindArg(s.ReadOnly), s.Dir, s.MountPath)
	}
	for _, b := range l.cfg.Binds {
		a = append(a, bindArg(b.ReadOnly), b.Src, b.Dst)
	}
	if v.MemoryRoot != "" {
		a = append(a, "--remount-ro", v.MemoryRoot)
	}
	return append(a, "--remount-ro", "/", "--chdir", v.Workdir, "--setenv", "HOME", v.Workdir)
}

func bindArg(readOnly bool) string {
	if readOnly {
		return "--ro-bind"
	}
	return "--bind"
}

// LogAttrs describe what a session's shell can reach, for the one line the
// worker logs per session.
func (l *Launcher) LogAttrs(v View) []any {
	if l == nil {
		return []any{"sandbox", string(None), "workdir", v.Workdir,
			"note", "bash runs unconfined, as the worker's user: it sees every file that user can, and /mnt/memory is the host's"}
	}
	var rw, ro, binds []string
	for _, s := range v.Stores {
		if s.ReadOnly {
			ro = append(ro, s.MountPath)
		} else {
			rw = append(rw, s.MountPath)
		}
	}
	for _, b := range l.cfg.Binds {
		binds = append(binds, b.String())
	}
	return []any{"sandbox", string(Bwrap), "workdir", v.Workdir, "stores", rw, "read_only_stores", ro,
		"binds", binds, "network", l.networkAttr(), "uid", l.ShellUID()}
}

// ShellUID is the user the shell runs as: SandboxUID when a user namespace
// can be made here, else the worker's own (without a sandbox too).
func (l *Launcher) ShellUID() int {
	if l != nil && l.ownUser {
		return SandboxUID
	}
	return os.Geteuid()
}
