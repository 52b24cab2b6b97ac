package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/workercli"
	"github.com/memstore/memstore/memsync"
	"github.com/memstore/memstore/sandbox"
)

// `memstore doctor` checks a worker host before its worker runs: with the
// same flags and variables as `worker poll`, it looks at what a session
// needs from this host and from the server, and says for each what is
// wrong and how to fix it.

func newDoctorCommand(s streams) *cobra.Command {
	var f workercli.Flags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "check that this host can run a worker: mount root, filesystem, sandbox, server, key, clock",
		Long: `memstore doctor checks a worker host: the mount root (exists, writable, owner), its
filesystem (case sensitivity, symlinks refused through openat/O_NOFOLLOW), the sandbox
(bubblewrap), the server (reachable), the environment key (valid for the environment)
and the clock (against the server's). It takes worker poll's flags and variables, so the
same settings are checked; it exits 0 when the host is ready and 1 when it is not.`,
		Example: `  ANTHROPIC_ENVIRONMENT_KEY=$KEY memstore doctor --environment-id $ENV --mount-root /var/lib/memstore-worker/memory
  memstore doctor --base-url https://memstore.example.com --sandbox bwrap`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := doctor{flags: f, now: time.Now}
			return d.report(cmd.Context(), s.stdout)
		},
	}
	f.Register(cmd.Flags())
	return cmd
}

// doctor runs the checks; now is the clock the skew is measured with.
type doctor struct {
	flags workercli.Flags
	now   func() time.Time
}

// finding is the outcome of one check.
type finding struct {
	mark   string // checkOK, checkWarn, checkFail or checkSkip
	name   string
	detail string
	fix    string // what to do; "" when nothing
}

const (
	checkOK   = "✓"
	checkWarn = "!" // works, with a cost worth knowing
	checkFail = "✗"
	checkSkip = "-" // not checked: an earlier check failed
)

func ok(name, detail string) finding { return finding{checkOK, name, detail, ""} }

func warn(name, detail, fix string) finding { return finding{checkWarn, name, detail, fix} }

func fail(name, detail, fix string) finding { return finding{checkFail, name, detail, fix} }

// report prints every finding and returns an error when the host is not
// ready (a ✗).
func (d doctor) report(ctx context.Context, w io.Writer) error {
	failed := 0
	for _, f := range d.checks(ctx) {
		fmt.Fprintf(w, "%s %-16s %s\n", f.mark, f.name, f.detail)
		if f.fix != "" {
			fmt.Fprintf(w, "  %-16s fix: %s\n", "", f.fix)
		}
		if f.mark == checkFail {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "not ready: %d check(s) failed\n", failed)
		return fmt.Errorf("this host is not ready for a worker: %d check(s) failed (above, each with its fix)", failed)
	}
	fmt.Fprintln(w, "ready: a worker can run here with these settings")
	return nil
}

func (d doctor) checks(ctx context.Context) []finding {
	out := d.mountChecks()
	out = append(out, d.sandboxChecks(ctx)...)
	out = append(out, d.envCheck())
	server, date := d.serverCheck(ctx)
	out = append(out, server)
	if server.mark != checkOK {
		return append(out,
			finding{checkSkip, "environment key", "not checked: the server cannot be reached", ""},
			finding{checkSkip, "clock", "not checked: the server cannot be reached", ""})
	}
	return append(out, d.keyCheck(ctx), d.clockCheck(date))
}

// mountChecks looks at the mount root, then, in a scratch folder inside
// it, at what the filesystem does with letter case and symlinks.
func (d doctor) mountChecks() []finding {
	root := d.flags.MountRoot
	abs, err := filepath.Abs(root)
	if err != nil {
		return []finding{fail("mount root", fmt.Sprintf("%s: %v", root, err), "pass an absolute folder with --mount-root")}
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return []finding{fail("mount root", abs+" does not exist",
			fmt.Sprintf("mkdir -p %s && chown %s %s (the worker's user), or pass another folder with --mount-root (ANTHROPIC_MOUNT_ROOT)", abs, currentUser(), abs))}
	case err != nil:
		return []finding{fail("mount root", fmt.Sprintf("%s cannot be looked at: %v", abs, err), "give the worker's user access to it, or pass another folder with --mount-root")}
	case !info.IsDir():
		return []finding{fail("mount root", abs+" is not a folder", "pass a folder with --mount-root")}
	}
	scratch, err := os.MkdirTemp(abs, ".memstore-doctor-")
	if err != nil {
		return []finding{fail("mount root", fmt.Sprintf("%s is not writable by %s: %v", abs, currentUser(), err),
			fmt.Sprintf("chown %s %s, or pass a folder the worker's user may write with --mount-root", currentUser(), abs))}
	}
	defer os.RemoveAll(scratch)
	out := []finding{ownerFinding(abs, info)}
	r, err := confined.Open(scratch)
	if err != nil {
		return append(out, fail("filesystem", fmt.Sprintf("a folder in %s cannot be opened for confined access: %v", abs, err), "put the mount root on a local Linux filesystem (ext4, xfs, btrfs, tmpfs)"))
	}
	insensitive, err := r.CaseInsensitive()
	switch {
	case err != nil:
		out = append(out, fail("letter case", err.Error(), "put the mount root on a local Linux filesystem (ext4, xfs, btrfs, tmpfs)"))
	case insensitive:
		out = append(out, warn("letter case", "the filesystem ignores letter case: two memories such as /Notes.md and /notes.md cannot both be synced",
			"put the mount root on a case-sensitive filesystem"))
	default:
		out = append(out, ok("letter case", "names that differ in case are different files"))
	}
	return append(out, symlinkFinding(r, scratch), leftoverFinding(abs))
}

// leftoverFinding lists the store folders killed workers left in the
// mount root whose files hold edits the server does not have: such a
// folder is adopted when its own session is served again here, and
// recovered by a worker polling on the root against memstore.
func leftoverFinding(root string) finding {
	const name = "leftovers"
	found, err := memsync.FindLeftovers(root)
	if err != nil {
		return warn(name, fmt.Sprintf("the mount root cannot be listed: %v", err), "give the worker's user read access to it")
	}
	var lines []string
	edits, held := 0, 0
	for _, l := range found {
		switch {
		case l.Held:
			held++
		case l.Problem != "":
			lines = append(lines, fmt.Sprintf("%s: %s", l.Dir, l.Problem))
		case len(l.Edits) > 0:
			edits += len(l.Edits)
			lines = append(lines, fmt.Sprintf("%s (memory store %s, session %s): %d file(s) not on the server: %s",
				l.Dir, l.MemoryStoreID, l.SessionID, len(l.Edits), strings.Join(l.Edits, ", ")))
		default:
			lines = append(lines, fmt.Sprintf("%s (memory store %s, session %s): nothing unsaved", l.Dir, l.MemoryStoreID, l.SessionID))
		}
	}
	if len(lines) == 0 {
		return ok(name, fmt.Sprintf("no folder left by a stopped worker (%d served by a running one)", held))
	}
	return warn(name, fmt.Sprintf("%d folder(s) left by a stopped worker, %d file(s) in them not on the server:\n    %s",
		len(lines), edits, strings.Join(lines, "\n    ")),
		"serve the session again on this host (it adopts and uploads the folder), or keep a worker polling on this mount root against memstore (it uploads the folder once the session has stopped); or copy the files you need into the store, then remove the folder and the .<name>.memstore folder beside it")
}

// ownerFinding says who owns the mount root: a worker that does not own
// it can write there (the caller checked) but leaves folders another user
// controls the parent of.
func ownerFinding(dir string, info os.FileInfo) finding {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Getuid() {
		return finding{checkOK, "mount root", dir + ": a folder, writable, owned by " + currentUser(), ""}
	}
	owner := strconv.Itoa(int(st.Uid))
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	return warn("mount root", fmt.Sprintf("%s: a folder, writable, but owned by %s, not %s (the worker's user)", dir, owner, currentUser()),
		fmt.Sprintf("chown %s %s, so no other user controls what the sessions' folders sit in", currentUser(), dir))
}

// symlinkFinding checks that the worker's file access (package confined:
// openat with O_NOFOLLOW at every step) refuses symlinks planted in a
// mount, so an agent cannot make a sync read or write outside it.
func symlinkFinding(r *confined.Root, scratch string) finding {
	const name = "symlinks"
	outside, err := os.MkdirTemp("", "memstore-doctor-outside-")
	if err != nil {
		return fail(name, "cannot make a folder to test with: "+err.Error(), "free space in "+os.TempDir())
	}
	defer os.RemoveAll(outside)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("kept"), 0o600); err != nil {
		return fail(name, "cannot make a file to test with: "+err.Error(), "free space in "+os.TempDir())
	}
	if err := errors.Join(os.Symlink(secret, filepath.Join(scratch, "file-link")), os.Symlink(outside, filepath.Join(scratch, "dir-link"))); err != nil {
		return fail(name, "the filesystem cannot hold symlinks to test with: "+err.Error(), "put the mount root on a local Linux filesystem (ext4, xfs, btrfs, tmpfs)")
	}
	if err := r.WriteFile("note.md", []byte("note"), confined.Precondition{Absent: true}); err != nil {
		return fail(name, "a plain file cannot be written through openat: "+err.Error(), "put the mount root on a local Linux filesystem (ext4, xfs, btrfs, tmpfs)")
	}
	_, readLink := r.ReadFile("file-link", 1<<10)
	writeThrough := r.WriteFile("dir-link/secret", []byte("changed"), confined.Precondition{})
	after, _ := os.ReadFile(secret)
	if readLink == nil || writeThrough == nil || string(after) != "kept" {
		return fail(name, "a symlink in a mount was followed out of it", "run the worker on Linux with a local filesystem for the mount root; do not use a network or FUSE filesystem that ignores O_NOFOLLOW")
	}
	return ok(name, "refused inside mounts (openat with O_NOFOLLOW): a sync cannot be led out of its folder")
}

// sandboxChecks say whether each session's bash can run in a bubblewrap
// sandbox here, what --sandbox makes of that, and, when it can, which
// user the shell runs as.
func (d doctor) sandboxChecks(ctx context.Context) []finding {
	mode, err := sandbox.ParseMode(d.flags.Sandbox)
	if err != nil {
		return []finding{fail("sandbox", err.Error(), "pass --sandbox auto, bwrap or none")}
	}
	if mode == sandbox.None {
		return []finding{warn("sandbox", "none: agents' bash runs unconfined, as the worker's user", "use --sandbox auto (or bwrap) with bubblewrap installed")}
	}
	network, err := sandbox.ParseNetwork(d.flags.SandboxNetwork)
	if err != nil {
		return []finding{fail("sandbox network", "--sandbox-network: "+err.Error(), "")}
	}
	l, err := sandbox.New(ctx, sandbox.Config{Mode: sandbox.Bwrap, Network: network}, slog.New(slog.DiscardHandler))
	switch {
	case err == nil:
		return []finding{ok("sandbox", "bubblewrap works: each session's bash sees only its workdir and its stores"), shellUserFinding(l.ShellUID(), os.Geteuid()), networkFinding(l)}
	case mode == sandbox.Bwrap:
		return []finding{fail("sandbox", "--sandbox bwrap, but "+err.Error(), "")}
	}
	return []finding{warn("sandbox", "--sandbox auto falls back to none: "+err.Error(), "")}
}

// networkFinding says what sandboxed commands reach with
// --sandbox-network, and whether pasta, which makes "on" what it says, is
// there and works.
func networkFinding(l *sandbox.Launcher) finding {
	const name = "sandbox network"
	n, pasta, fallback := l.Network()
	switch {
	case n == sandbox.On:
		return ok(name, "on: each sandbox has a network of its own through pasta ("+pasta+"): the internet, not the host's loopback (the API, the metrics listener)")
	case n == sandbox.Off:
		return ok(name, "off: sandboxed commands reach no network, only a loopback of their own")
	case fallback != nil:
		return warn(name, "on falls back to the host's network, its loopback included (the API, the metrics listener): "+fallback.Error(),
			sandbox.PastaHint+"; or pass --sandbox-network off, or host to say the host's network is meant")
	}
	return warn(name, "host: sandboxed commands share the host's network, its loopback included (the API, the metrics listener)",
		"pass --sandbox-network on (with pasta installed) unless the host's network is meant")
}

// envCheck says which variables an agent's shell gets: the names only
// (the values may be secrets), the allowlist's and --sandbox-env's.
func (d doctor) envCheck() finding {
	const name = "agent env"
	var cfg sandbox.Config
	for _, s := range d.flags.SandboxEnv {
		kv, err := sandbox.ParseEnv(s)
		if err != nil {
			return fail(name, "--sandbox-env: "+err.Error(), "")
		}
		cfg.Env = append(cfg.Env, kv)
	}
	return ok(name, "an agent's shell sees only "+strings.Join(cfg.EnvNames(), ", ")+" (HOME is the session's own folder; pass more with --sandbox-env NAME or NAME=value)")
}

// shellUserFinding says which user the sandboxed shell runs as: nobody
// (sandbox.SandboxUID) in a user namespace of its own, which bubblewrap
// makes where the kernel allows it, even for a worker running as root; or
// else the worker's own user, worth a warning — the more so for root.
func shellUserFinding(shellUID, workerUID int) finding {
	const name = "sandbox user"
	fix := "allow user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0; in a container, a runtime that allows them)"
	switch {
	case shellUID == sandbox.SandboxUID:
		return ok(name, fmt.Sprintf("the shell runs as nobody (uid %d), without capabilities, though the worker runs as uid %d", shellUID, workerUID))
	case workerUID == 0:
		return warn(name, "the shell runs as root: bubblewrap cannot make a user namespace here to drop to nobody, so an agent's command has root's rights on what the sandbox shows it",
			fix+", or run the worker as an unprivileged user")
	}
	return warn(name, fmt.Sprintf("the shell runs as the worker's user (uid %d): bubblewrap cannot make a user namespace here to drop to nobody", shellUID), fix)
}

// serverCheck asks the server's /healthz, and returns the answer's Date
// for the clock check.
func (d doctor) serverCheck(ctx context.Context) (finding, time.Time) {
	base := strings.TrimRight(d.flags.BaseURL, "/")
	fix := "start the server, or point --base-url (ANTHROPIC_BASE_URL) at it"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return fail("server", fmt.Sprintf("--base-url %q: %v", d.flags.BaseURL, err), "pass the server's http:// or https:// URL"), time.Time{}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		reason := err.Error()
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			reason = transportReason(ue.Err)
		}
		return fail("server", fmt.Sprintf("%s cannot be reached (%s)", base, reason), fix), time.Time{}
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<10))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fail("server", fmt.Sprintf("%s/healthz answered %s", base, res.Status), "point --base-url at the server's root (without /v1), and check its log"), time.Time{}
	}
	date, _ := http.ParseTime(res.Header.Get("Date"))
	return ok("server", base+" answers"), date
}

// keyCheck asks the environment's queue statistics with the environment
// key: a read that only a key of that environment may make, and that
// claims nothing.
func (d doctor) keyCheck(ctx context.Context) finding {
	const name = "environment key"
	env, key := d.flags.EnvironmentID, d.flags.EnvKey()
	if env == "" || key == "" {
		return fail(name, "no environment id or no environment key given", "pass --environment-id (ANTHROPIC_ENVIRONMENT_ID) and set ANTHROPIC_ENVIRONMENT_KEY (memstore env key create ENV mints one)")
	}
	c, err := client.New(d.flags.BaseURL, client.WithBearerToken(key), client.WithRetryPolicy(client.RetryPolicy{MaxRetries: 0}))
	if err != nil {
		return fail(name, err.Error(), "pass the server's http:// or https:// URL with --base-url")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.WorkStats(ctx, env)
	var ae *api.Error
	switch {
	case err == nil:
		return ok(name, "valid for "+env)
	case errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized:
		return fail(name, "the server does not know the key (a typo, or revoked): "+ae.Message, "mint a new one with memstore env key create "+env+" and set ANTHROPIC_ENVIRONMENT_KEY to it")
	case errors.As(err, &ae) && (ae.StatusCode == http.StatusForbidden || ae.StatusCode == http.StatusNotFound):
		return fail(name, "not a key of "+env+": "+ae.Message, "check --environment-id, or mint a key of "+env+" with memstore env key create "+env)
	}
	return fail(name, err.Error(), "check the server's log for the request")
}

// maxSkew is the clock difference with the server a worker tolerates:
// leases last a minute and heartbeats are sent well within it.
const maxSkew = 10 * time.Second

// clockCheck compares this host's clock with the server's Date header
// (whole seconds, hence the allowance).
func (d doctor) clockCheck(serverDate time.Time) finding {
	if serverDate.IsZero() {
		return warn("clock", "the server sent no Date header to compare with", "")
	}
	skew := d.now().Sub(serverDate)
	if skew < 0 {
		skew = -skew
	}
	if skew > maxSkew+time.Second {
		dir := "ahead of"
		if d.now().Before(serverDate) {
			dir = "behind"
		}
		return fail("clock", fmt.Sprintf("%s %s the server's", skew.Round(time.Second), dir),
			"synchronise this host's clock (timedatectl set-ntp true, or chrony/ntpd), and the server's")
	}
	return ok("clock", "within "+maxSkew.String()+" of the server's")
}

// currentUser names the user this process runs as.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}
