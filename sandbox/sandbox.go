// Package sandbox runs a session's shell inside a bubblewrap (bwrap)
// sandbox, so that it sees what the agent's system prompt describes and
// nothing else: the working directory, each memory store at its advertised
// mount path (read-only stores mounted read-only, so a write fails with
// EROFS as in the cloud), the host's system folders read-only, a private
// /tmp, /proc and /dev, and its own PID namespace. The worker's data, its
// credentials, other sessions' folders and the mount roots are not in the
// view at all: the sandbox starts from an empty root and binds in only
// those folders.
//
// bubblewrap is what Flatpak and Anthropic's sandbox runtime use on Linux.
// It works as root and, where the kernel allows user namespaces, as any
// user; [New] checks that it works here before any session relies on it.
package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// NoNetwork gives each sandbox its own empty network namespace (only a
	// loopback device), so commands cannot reach the network.
	NoNetwork bool
	// Binds are shown in every sandbox, after the system folders.
	Binds []Bind
	// Program is the bwrap executable; empty finds "bwrap" on PATH.
	Program string
}

// Launcher starts commands inside sandboxes. A nil *Launcher means no
// sandbox: its methods then describe and run commands unconfined.
type Launcher struct {
	program string
	cfg     Config
}

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
	for _, b := range cfg.Binds {
		if _, err := os.Stat(b.Src); err != nil {
			return nil, fmt.Errorf("sandbox bind %s: its source cannot be used (%v); fix the path or drop the bind", b, err)
		}
	}
	program, err := probe(ctx, cfg.Program)
	if err == nil {
		return &Launcher{program: program, cfg: cfg}, nil
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
	truePath, err := exec.LookPath("true")
	if err != nil {
		return "", fmt.Errorf("sandbox check: no 'true' command on PATH to try bubblewrap with: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", truePath)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		return "", fmt.Errorf("bubblewrap (%s) cannot create a sandbox here (%s): if the worker does not run as root, the kernel must allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0), and in a container the runtime must allow them; or %s",
			path, why, InstallHint)
	}
	return path, nil
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
}

// systemDirs are the host folders every sandbox shows read-only: programs,
// libraries and /etc (users, name resolution, certificates); anything else
// (/opt, a home folder) is added with Config.Binds. A symbolic
// link among them (/bin -> usr/bin on merged-/usr systems) is shown as the
// same link.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// Command is the command line that runs argv inside v: bwrap and its
// arguments, then argv. On a nil Launcher it is argv.
//
// The sandbox starts from an empty root, binds in the system folders
// read-only, gives it fresh /proc, /dev and /tmp, binds the working
// directory read-write and each store at its mount path (read-only ones
// read-only), adds the configured binds, then makes the memory root and the
// root itself read-only. It has its own PID, IPC and UTS namespaces (and
// network, when NoNetwork), and dies with its parent; the process group is
// the caller's, so killing the group kills everything in it.
func (l *Launcher) Command(v View, argv []string) []string {
	if l == nil {
		return argv
	}
	a := []string{l.program, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if l.cfg.NoNetwork {
		a = append(a, "--unshare-net")
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
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	a = append(a, "--bind", v.Workdir, v.Workdir)
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
	a = append(a, "--remount-ro", "/", "--chdir", v.Workdir, "--")
	return append(a, argv...)
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
	network := "on"
	if l.cfg.NoNetwork {
		network = "off"
	}
	return []any{"sandbox", string(Bwrap), "workdir", v.Workdir, "stores", rw, "read_only_stores", ro,
		"binds", binds, "network", network}
}
