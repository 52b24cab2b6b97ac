package workercli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
	"github.com/memstore/memstore/sandbox"
	"github.com/memstore/memstore/worker"
)

// NewCommand is `worker` and its verbs (poll, run, webhook), the same in
// the memstore binary and in memstore-worker.
func NewCommand(stderr io.Writer) *cobra.Command {
	return NewNoun("worker", "environment worker: poll a queue and serve its sessions, or run one claimed item",
		newPollCommand(stderr), newRunCommand(stderr), newWebhookCommand(stderr))
}

// Flags are the flags of SPEC §7 shared by poll, run, webhook, up and
// doctor. Each falls back to an ANTHROPIC_* variable, so a sandbox can be
// configured through its environment alone.
type Flags struct {
	BaseURL        string
	EnvironmentID  string
	EnvironmentKey string
	Workdir        string
	MountRoot      string
	SyncInterval   string
	SyncDeletions  string
	SyncLive       string
	MaxIdle        string
	LeaseTTL       string
	LogFormat      string
	Sandbox        string
	SandboxNetwork string
	SandboxBinds   []string
	SandboxEnv     []string
	MaxSessions    string
	MaxStarting    string
	KeepWorkdirs   bool
}

// Register adds every worker flag.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.BaseURL, "base-url", EnvOr("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080"), "API base URL: a memstore server or https://api.anthropic.com (env ANTHROPIC_BASE_URL)")
	fs.StringVar(&f.EnvironmentID, "environment-id", os.Getenv("ANTHROPIC_ENVIRONMENT_ID"), "environment to serve, env_… (env ANTHROPIC_ENVIRONMENT_ID)")
	// No default from the environment: a usage text would print the key.
	fs.StringVar(&f.EnvironmentKey, "environment-key", "", "the environment's key; prefer the variable, command lines are visible to other users (default: env ANTHROPIC_ENVIRONMENT_KEY)")
	f.RegisterLocal(fs, "default: the current directory", api.DefaultMountPrefix)
}

// RegisterLocal adds the flags about this host and the sessions, not the
// connection; up has its own defaults for the two folders.
func (f *Flags) RegisterLocal(fs *pflag.FlagSet, workdirDefault, mountRootDefault string) {
	fs.StringVar(&f.Workdir, "workdir", os.Getenv("ANTHROPIC_WORKDIR"), "sessions' working directory: where relative paths and bash start (env ANTHROPIC_WORKDIR; "+workdirDefault+")")
	fs.StringVar(&f.MountRoot, "mount-root", EnvOr("ANTHROPIC_MOUNT_ROOT", mountRootDefault), "folder that replaces /mnt/memory in every store's mount path; it must exist and be writable (env ANTHROPIC_MOUNT_ROOT)")
	fs.StringVar(&f.SyncInterval, "memory-sync-interval", EnvOr("ANTHROPIC_MEMORY_SYNC_INTERVAL", "15s"), "how often memory syncs while a session runs, checked after each tool call; at least 5s; negative disables memory (env ANTHROPIC_MEMORY_SYNC_INTERVAL)")
	fs.StringVar(&f.SyncDeletions, "memory-sync-deletions", EnvOr("ANTHROPIC_MEMORY_SYNC_DELETIONS", "enabled"), "what a file deleted in a mount does on the server: enabled, log_only or disabled (env ANTHROPIC_MEMORY_SYNC_DELETIONS)")
	fs.StringVar(&f.SyncLive, "memory-sync-live", EnvOr("ANTHROPIC_MEMORY_SYNC_LIVE", "true"), "sync beside the agent: upload each write and edit at once and follow the server's change feed; false runs each due sync before the next tool call (env ANTHROPIC_MEMORY_SYNC_LIVE)")
	fs.StringVar(&f.MaxIdle, "max-idle", EnvOr("ANTHROPIC_MAX_IDLE", "60s"), "release a session that stays idle this long after its turn; 0 never releases it (env ANTHROPIC_MAX_IDLE)")
	fs.StringVar(&f.LeaseTTL, "lease-ttl", "0", "the lease each heartbeat asks for, in whole seconds (the server grants 5s to 600s); a shorter lease hands a crashed worker's sessions to another worker sooner; 0 leaves it to the server (60s on memstore)")
	fs.StringVar(&f.LogFormat, "log-format", EnvOr("ANTHROPIC_LOG_FORMAT", "text"), "log format: text or json (env ANTHROPIC_LOG_FORMAT)")
	fs.StringVar(&f.Sandbox, "sandbox", EnvOr("ANTHROPIC_SANDBOX", string(sandbox.Auto)), "run each session's bash in a bubblewrap sandbox that shows only its workdir and stores: auto (when bubblewrap works here, else none with a warning), bwrap (required) or none (env ANTHROPIC_SANDBOX)")
	fs.StringVar(&f.SandboxNetwork, "sandbox-network", EnvOr("ANTHROPIC_SANDBOX_NETWORK", "on"), "what sandboxed commands reach: on (the internet through pasta, not the host's loopback; the host's network with a warning where pasta is not installed), off (a loopback of their own only) or host (the host's network, its loopback included) (env ANTHROPIC_SANDBOX_NETWORK)")
	fs.StringArrayVar(&f.SandboxBinds, "sandbox-bind", nil, "also show a host folder or file in every sandbox, SRC:DST (read-write) or SRC:DST:ro; repeat for more")
	fs.StringArrayVar(&f.SandboxEnv, "sandbox-env", nil, "also give every session's shell this variable: NAME (the worker's value) or NAME=value; repeat for more (the shell otherwise gets only PATH, LANG, LANGUAGE, LC_*, TERM, TZ, and its own HOME and USER)")
	fs.StringVar(&f.MaxSessions, "max-sessions", EnvOr("ANTHROPIC_MAX_SESSIONS", "0"), fmt.Sprintf("how many sessions to serve at once; 1 serves one at a time; 0 is two per CPU, at least 2 and at most 64 (%d here) (env ANTHROPIC_MAX_SESSIONS)", worker.DefaultMaxSessions()))
	fs.StringVar(&f.MaxStarting, "max-starting", EnvOr("MEMSTORE_MAX_STARTING", "0"), fmt.Sprintf("how many claimed sessions to start (mount) at once; claims wait for a free start, so the rest stay queued for other workers; 0 is one per CPU, at least 2 (%d here) (env MEMSTORE_MAX_STARTING)", worker.DefaultMaxStarting()))
	fs.BoolVar(&f.KeepWorkdirs, "keep-workdirs", false, "keep each session's room (<workdir>/<session id>.room, its working directory and HOME) when the session ends, for inspection; by default it is removed")
}

// EnvKey is --environment-key, else ANTHROPIC_ENVIRONMENT_KEY.
func (f *Flags) EnvKey() string {
	return cmp.Or(f.EnvironmentKey, os.Getenv("ANTHROPIC_ENVIRONMENT_KEY"))
}

// Config turns the flags into a worker configuration logging to logger;
// every error names the flag.
func (f *Flags) Config(logger *slog.Logger) (worker.Config, error) {
	var cfg worker.Config
	interval, err := time.ParseDuration(f.SyncInterval)
	if n, nerr := strconv.Atoi(f.SyncInterval); err != nil && nerr == nil && n < 0 {
		// Any negative value disables memory, so its unit does not
		// matter: take the -1 the docs and the log lines suggest.
		interval, err = -1, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("--memory-sync-interval %q: a duration such as 15s or 1m (negative, such as -1, disables memory)", f.SyncInterval)
	}
	deletions, err := memsync.ParseDeletionMode(f.SyncDeletions)
	if err != nil {
		return cfg, fmt.Errorf("--memory-sync-deletions: %w", err)
	}
	live := true
	if f.SyncLive != "" {
		if live, err = strconv.ParseBool(f.SyncLive); err != nil {
			return cfg, fmt.Errorf("--memory-sync-live %q: true or false", f.SyncLive)
		}
	}
	maxIdle, err := time.ParseDuration(f.MaxIdle)
	if err != nil || maxIdle < 0 {
		return cfg, fmt.Errorf("--max-idle %q: a duration such as 60s, or 0 to keep idle sessions", f.MaxIdle)
	}
	if maxIdle == 0 {
		maxIdle = -1 // the package's "never"
	}
	leaseTTL, err := time.ParseDuration(f.LeaseTTL)
	if f.LeaseTTL == "" || f.LeaseTTL == "0" {
		leaseTTL, err = 0, nil
	}
	if err != nil || leaseTTL < 0 {
		return cfg, fmt.Errorf("--lease-ttl %q: a duration such as 10s, or 0 to leave it to the server", f.LeaseTTL)
	}
	mode, err := sandbox.ParseMode(f.Sandbox)
	if err != nil {
		return cfg, fmt.Errorf("--sandbox: %w", err)
	}
	network, err := sandbox.ParseNetwork(f.SandboxNetwork)
	if err != nil {
		return cfg, fmt.Errorf("--sandbox-network: %w", err)
	}
	binds := make([]sandbox.Bind, len(f.SandboxBinds))
	for i, s := range f.SandboxBinds {
		if binds[i], err = sandbox.ParseBind(s); err != nil {
			return cfg, fmt.Errorf("--sandbox-bind: %w", err)
		}
	}
	envs := make([]string, len(f.SandboxEnv))
	for i, s := range f.SandboxEnv {
		if envs[i], err = sandbox.ParseEnv(s); err != nil {
			return cfg, fmt.Errorf("--sandbox-env: %w", err)
		}
	}
	maxSessions, err := strconv.Atoi(cmp.Or(f.MaxSessions, "0"))
	if err != nil || maxSessions < 0 {
		return cfg, fmt.Errorf("--max-sessions %q: a whole number of sessions, 1 or more (0: the default, %d here)", f.MaxSessions, worker.DefaultMaxSessions())
	}
	if maxSessions == 0 {
		maxSessions = worker.DefaultMaxSessions()
	}
	maxStarting, err := strconv.Atoi(cmp.Or(f.MaxStarting, "0"))
	if err != nil || maxStarting < 0 {
		return cfg, fmt.Errorf("--max-starting %q: a whole number of sessions, 1 or more (0: the default, %d here)", f.MaxStarting, worker.DefaultMaxStarting())
	}
	// One connection pool for every session: each holds an event stream
	// and beats, syncs and posts beside it, so the pool keeps enough idle
	// connections to the server for all of them.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 4 * maxSessions
	c, err := client.New(f.BaseURL, client.WithLogger(logger), client.WithUserAgent("memstore-worker ("+runtime.Version()+")"),
		client.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		return cfg, fmt.Errorf("--base-url: %w", err)
	}
	return worker.Config{
		Client:              c,
		EnvironmentID:       f.EnvironmentID,
		EnvironmentKey:      f.EnvKey(),
		Workdir:             f.Workdir,
		KeepWorkdirs:        f.KeepWorkdirs,
		MaxSessions:         maxSessions,
		MaxStarting:         maxStarting,
		MountRoot:           f.MountRoot,
		MemorySyncInterval:  interval,
		MemorySyncDeletions: deletions,
		MemorySyncInline:    !live,
		MaxIdle:             maxIdle,
		LeaseTTL:            leaseTTL,
		FaultPoint:          FaultPoint(logger),
		Sandbox:             sandbox.Config{Mode: mode, Network: network, Binds: binds, Env: envs},
		Logger:              logger,
	}, nil
}

// workerGCPercent is the garbage collector's target (GOGC) in a process
// that is a worker, unless GOGC is set. A worker's live heap is mostly what
// it knows of each mounted file (about 1 KB a file: 16 MB for 8 stores of
// 2,000) and Go's default of 100 lets the heap grow to twice that before
// it collects; a worker mostly waits on the network, so it collects twice
// as often instead (the mount of those 8 stores spends about 7% of its CPU
// in the collector), for a peak 12 MB lower.
const workerGCPercent = 50

// newWorker builds the worker of poll, run or webhook. With a metricsAddr
// it serves the worker's metrics, with the process's own, there until
// stop.
func (f *Flags) newWorker(stderr io.Writer, onWork, metricsAddr string) (w *worker.Worker, stop func(), err error) {
	logger, err := NewLogger(stderr, f.LogFormat)
	if err != nil {
		return nil, nil, err
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(workerGCPercent)
	}
	cfg, err := f.Config(logger)
	if err != nil {
		return nil, nil, err
	}
	if onWork != "" {
		cfg.OnWork = onWorkScript(onWork, cfg.Client.BaseURL(), stderr)
	}
	reg := prometheus.NewRegistry()
	if metricsAddr != "" {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Metrics = reg // left nil otherwise: a nil *Registry would not be
	}
	tp, stopTracing, err := TracerProvider(context.Background(), "memstore-worker")
	if err != nil {
		return nil, nil, err
	}
	cfg.TracerProvider = tp
	if w, err = worker.New(cfg); err != nil {
		return nil, nil, err
	}
	flush := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopTracing(ctx)
	}
	if metricsAddr == "" {
		return w, flush, nil
	}
	_, stopMetrics, err := ServeMetrics(metricsAddr, reg, logger)
	return w, func() { stopMetrics(); flush() }, err
}

func newPollCommand(stderr io.Writer) *cobra.Command {
	var f Flags
	var onWork, metricsAddr string
	cmd := &cobra.Command{
		Use:   "poll",
		Short: "claim and serve an environment's sessions until stopped",
		Example: `  ANTHROPIC_ENVIRONMENT_KEY=$KEY memstore worker poll --environment-id $ENV --mount-root /tmp/mnt/memory
  memstore worker poll --environment-id $ENV --on-work 'docker run -i … my-sandbox memstore worker run'`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return workerPoll(cmd.Context(), &f, onWork, metricsAddr, stderr)
		},
	}
	f.Register(cmd.Flags())
	MetricsAddrFlag(cmd.Flags(), &metricsAddr)
	cmd.Flags().StringVar(&onWork, "on-work", "", "instead of serving each claimed item here, run this command (with /bin/sh -c) with the item's JSON, secret included, on stdin and its identity in ANTHROPIC_* variables; typically it starts a sandbox that runs 'memstore worker run'")
	return cmd
}

func workerPoll(ctx context.Context, f *Flags, onWork, metricsAddr string, stderr io.Writer) error {
	w, stopMetrics, err := f.newWorker(stderr, onWork, metricsAddr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	OnForceQuit(ctx, w.Abandon)
	return w.Run(ctx)
}

// onWorkGrace is how long an on-work script may take to finish after the
// worker asked it to stop (SIGTERM): long enough for a `worker run` inside
// it to flush its memory (two 30 s steps) and stop its item.
const onWorkGrace = 75 * time.Second

// onWorkScript runs script for each claimed item, waiting for it: the item
// JSON (with its secret) on stdin, and ANTHROPIC_WORK_ID,
// ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_SESSION_ID, ANTHROPIC_BASE_URL and
// ANTHROPIC_WORK_SECRET in its environment — what `memstore worker run`
// and the official SDK's HandleItem read. The environment key is removed
// from the script's environment: a sandbox holding it could claim every
// other session of the environment, and the sessions token in the secret
// is all an item needs.
func onWorkScript(script, baseURL string, stderr io.Writer) func(ctx context.Context, work api.Work) error {
	return func(ctx context.Context, work api.Work) error {
		body, err := json.Marshal(work)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
		cmd.Stdin = bytes.NewReader(body)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.Env = []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "ANTHROPIC_ENVIRONMENT_KEY=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		secret := ""
		if work.Secret != nil {
			secret = *work.Secret
		}
		cmd.Env = append(cmd.Env,
			"ANTHROPIC_WORK_ID="+work.ID,
			"ANTHROPIC_ENVIRONMENT_ID="+work.EnvironmentID,
			"ANTHROPIC_SESSION_ID="+work.Data.ID,
			"ANTHROPIC_BASE_URL="+baseURL,
			"ANTHROPIC_WORK_SECRET="+secret,
		)
		// On shutdown the script gets SIGTERM, not SIGKILL, so a worker
		// inside it can post its cancelled call and flush its memory.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = onWorkGrace
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("on-work command %q: %w", script, err)
		}
		return nil
	}
}

func newRunCommand(stderr io.Writer) *cobra.Command {
	var f Flags
	var r runFlags
	var metricsAddr string
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "serve one already-claimed work item (inside a per-session sandbox)",
		Example: `  ANTHROPIC_WORK_SECRET=… memstore worker run --environment-id $ENV --work-id $WORK --session-id $SESSION`,
		Args:    NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return workerRun(cmd.Context(), &f, r, metricsAddr, stderr)
		},
	}
	fs := cmd.Flags()
	f.Register(fs)
	fs.StringVar(&r.workID, "work-id", os.Getenv("ANTHROPIC_WORK_ID"), "the claimed work item, work_… (env ANTHROPIC_WORK_ID)")
	fs.StringVar(&r.sessionID, "session-id", os.Getenv("ANTHROPIC_SESSION_ID"), "the item's session, sesn_… (env ANTHROPIC_SESSION_ID)")
	fs.StringVar(&r.secretFile, "work-secret-file", "", "file holding the work secret, readable by its owner only (default: env ANTHROPIC_WORK_SECRET)")
	MetricsAddrFlag(fs, &metricsAddr)
	fs.StringVar(&r.lastHeartbeat, "last-heartbeat", os.Getenv("ANTHROPIC_WORK_LAST_HEARTBEAT"), "continue a lease another process started: its last heartbeat's last_heartbeat (env ANTHROPIC_WORK_LAST_HEARTBEAT)")
	return cmd
}

// runFlags are the flags of worker run beyond the worker's own: which
// claimed item to serve.
type runFlags struct {
	workID, sessionID, secretFile, lastHeartbeat string
}

func workerRun(ctx context.Context, f *Flags, r runFlags, metricsAddr string, stderr io.Writer) error {
	for _, req := range []struct{ flag, env, val string }{
		{"--work-id", "ANTHROPIC_WORK_ID", r.workID},
		{"--environment-id", "ANTHROPIC_ENVIRONMENT_ID", f.EnvironmentID},
		{"--session-id", "ANTHROPIC_SESSION_ID", r.sessionID},
	} {
		if req.val == "" {
			return fmt.Errorf("%s is required (or set %s): 'worker run' serves one item someone already claimed", req.flag, req.env)
		}
	}
	secret := os.Getenv("ANTHROPIC_WORK_SECRET")
	if r.secretFile != "" {
		s, err := readSecretFile(r.secretFile)
		if err != nil {
			return err
		}
		secret = s
	}
	if secret == "" && f.EnvKey() == "" {
		return errors.New("no credential for the item: set ANTHROPIC_WORK_SECRET or --work-secret-file to the work secret the poll returned (or, for a session without memory stores, --environment-key)")
	}
	w, stopMetrics, err := f.newWorker(stderr, "", metricsAddr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	OnForceQuit(ctx, w.Abandon)
	work := api.Work{ID: r.workID, EnvironmentID: f.EnvironmentID, Data: api.WorkData{Type: "session", ID: r.sessionID}}
	if secret != "" {
		work.Secret = &secret
	}
	if err := w.RunItem(ctx, worker.Item{Work: work, LastHeartbeat: r.lastHeartbeat}); err != nil {
		return fmt.Errorf("work item %s failed: %w", r.workID, err)
	}
	return nil
}

// readSecretFile reads a work secret from a file that only its owner can
// read or write: the secret is the session's credential, and a file others
// can read has leaked it already.
func readSecretFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--work-secret-file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("--work-secret-file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("--work-secret-file %s is accessible to group or others (mode %04o); it holds the session's credential, so restrict it with 'chmod 600 %s' (and get a new secret if others could read it)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--work-secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("--work-secret-file %s is empty; it must hold the work secret the poll returned", path)
	}
	return s, nil
}
