package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/console"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/workercli"
	"github.com/memstore/memstore/worker"
)

func newUpCommand(s streams) *cobra.Command {
	var o serveOptions
	var f workercli.Flags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "run a server and one worker in one process, ready for real sessions",
		Example: `  memstore up
  MEMSTORE_MODEL_API_KEY=… memstore up --data ~/memstore`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUp(cmd.Context(), o, f, s) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "addr", envOr("MEMSTORE_ADDR", "127.0.0.1:8080"), "listen address (env MEMSTORE_ADDR)")
	fs.StringVar(&o.dataDir, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder: the database, admin.key, up.json and, by default, the worker's folders (env MEMSTORE_DATA)")
	f.RegisterLocal(fs, "default: <data>/workdir", "")
	fs.Lookup("mount-root").Usage += "; default: <data>/memory, which up creates"
	modelFlag(fs, &o)
	workercli.MetricsAddrFlag(fs, &o.metricsAddr)
	return cmd
}

// upState is what up remembers in <data>/up.json between starts, so that a
// restart serves the same environment with the same key.
type upState struct {
	EnvironmentID  string `json:"environment_id"`
	EnvironmentKey string `json:"environment_key"`
}

func runUp(ctx context.Context, o serveOptions, f workercli.Flags, s streams) error {
	stdout, stderr := s.stdout, s.stderr
	o.logFormat = f.LogFormat
	if f.Workdir == "" {
		f.Workdir = filepath.Join(o.dataDir, "workdir")
	}
	if f.MountRoot == "" {
		f.MountRoot = filepath.Join(o.dataDir, "memory")
	}
	logger, err := workercli.NewLogger(stderr, f.LogFormat)
	if err != nil {
		return err
	}
	// The server's access log (a line per long poll, every second) would
	// bury the worker's; up keeps the server's warnings and errors.
	serverLog := slog.New(minLevel{logger.Handler(), slog.LevelWarn})
	rs, err := startServer(ctx, o, serverLog, stdout)
	if err != nil {
		return err
	}
	defer rs.shutdown()

	adminKey, keyWhere, err := upAdminKey(rs, o.dataDir)
	if err != nil {
		return err
	}
	admin, err := client.New(rs.baseURL, client.WithAPIKey(adminKey))
	if err != nil {
		return err
	}
	st, fresh, err := upEnvironment(ctx, admin, o.dataDir)
	if err != nil {
		return err
	}
	for _, dir := range []string{f.Workdir, f.MountRoot} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	f.BaseURL, f.EnvironmentID, f.EnvironmentKey = rs.baseURL, st.EnvironmentID, st.EnvironmentKey
	cfg, err := f.Config(logger)
	if err != nil {
		return err
	}
	// The worker's series go beside the server's, which already hold the
	// process's own (Go runtime, CPU, memory).
	workerMetrics := prometheus.NewRegistry()
	if o.metricsAddr != "" {
		cfg.Metrics = workerMetrics
	}
	tp, stopTracing, err := workercli.TracerProvider(ctx, "memstore-worker")
	if err != nil {
		return err
	}
	defer stopTracing(context.WithoutCancel(ctx))
	cfg.TracerProvider = tp
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	workercli.OnForceQuit(ctx, w.Abandon)
	metricsNote := ""
	if o.metricsAddr != "" {
		url, stopMetrics, err := workercli.ServeMetrics(o.metricsAddr, prometheus.Gatherers{rs.metrics, workerMetrics}, logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
		metricsNote = "\n  metrics          " + url + " (the server's and the worker's)"
	}

	// Like the admin key, the environment key is shown once, when it is
	// made; afterwards the output (which a service manager may keep) only
	// says where it is.
	statePath := filepath.Join(o.dataDir, "up.json")
	envNote, envKey := "reused from "+statePath, "in "+statePath
	if fresh {
		envNote, envKey = "created; saved in "+statePath, st.EnvironmentKey+" (saved in "+statePath+")"
	}
	sandboxNote := "bwrap: each session's bash sees its workdir and its stores at /mnt/memory/…, not this data folder"
	if !w.Sandboxed() {
		sandboxNote = "none: agents' bash runs as this user and can read this data folder, admin.key included (see docs/worker.md#the-sandbox)"
	}
	consoleUser, err := upConsoleUser(ctx, rs.store)
	if err != nil {
		return err
	}
	// The hint is pasted in another terminal, maybe in another folder.
	dataDir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `memstore is up: one server and one worker in this process.
  API              %s
  admin API key    %s
  web console      %s%s: %s
  environment      %s (%s)
  environment key  %s
  worker           works in %s; mounts /mnt/memory/… under %s
  sandbox          %s%s

Next, in another terminal (the CLI finds this server and its admin key through these):%s
  export MEMSTORE_BASE_URL=%s MEMSTORE_DATA=%s
  memstore agent create notes-bot
  memstore store create notes
  memstore session create --env %s --agent <agent id> --store <store id> --message '<script>'
To talk to Claude instead (start up with MEMSTORE_MODEL_API_KEY set):
  memstore agent create claude-notes --model claude-sonnet-4-5
  memstore chat --env %s --agent <agent id> --store <store id>
Stop with Ctrl-C: the worker flushes its session's memory and lets go of it first.
`, rs.baseURL, keyWhere, rs.baseURL, console.Prefix, consoleUser, st.EnvironmentID, envNote, envKey, cfg.Workdir, cfg.MountRoot, sandboxNote, metricsNote, installHint(), rs.baseURL, dataDir, st.EnvironmentID, st.EnvironmentID)
	return w.Run(ctx)
}

// installHint says how to put memstore on the PATH when it is not there,
// as after `go run ./cmd/memstore up`: the next steps call it by name.
func installHint() string {
	if _, err := exec.LookPath("memstore"); err == nil {
		return ""
	}
	return "\n  go install ./cmd/memstore && export PATH=\"$(go env GOPATH)/bin:$PATH\"   # memstore is not on your PATH yet"
}

// upConsoleUser makes the first console user, "admin" with a generated
// password, when there is none, and says how to sign in. The password is
// printed only then; `memstore user passwd admin` sets a new one.
func upConsoleUser(ctx context.Context, store storage.Users) (string, error) {
	users, err := store.ListUsers(ctx)
	if err != nil {
		return "", err
	}
	if len(users) > 0 {
		return "sign in as a console user (memstore user list; memstore user passwd NAME sets a password)", nil
	}
	password := secret.GeneratePassword()
	if _, err := app.NewUsers(store, nil, nil).Create(ctx, "admin", password); err != nil {
		return "", fmt.Errorf("create the first console user: %w", err)
	}
	return "sign in as admin with password " + password + " (shown once; memstore user passwd admin changes it)", nil
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// upAdminKey finds the admin API key: the one startServer just generated
// or was given, else the one saved in <data>/admin.key.
func upAdminKey(rs *runningServer, dataDir string) (key, where string, err error) {
	path := filepath.Join(dataDir, "admin.key")
	if rs.adminKey != "" {
		if os.Getenv("MEMSTORE_ADMIN_KEY") != "" {
			return rs.adminKey, "from MEMSTORE_ADMIN_KEY", nil
		}
		return rs.adminKey, rs.adminKey + " (saved in " + path + ")", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("this data folder already has an admin key, but %s cannot be read (%v); set MEMSTORE_ADMIN_KEY to it", path, err)
	}
	return strings.TrimSpace(string(b)), "in " + path, nil
}

// upEnvironment reuses the environment of up.json when it still exists,
// or creates one with a key and saves both (mode 0600: the key is a
// credential).
func upEnvironment(ctx context.Context, admin *client.Client, dataDir string) (upState, bool, error) {
	path := filepath.Join(dataDir, "up.json")
	var st upState
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return st, false, fmt.Errorf("%s is not what up wrote (%v); remove it to start with a new environment", path, err)
		}
		env, err := admin.GetEnvironment(ctx, st.EnvironmentID)
		if err == nil && env.ArchivedAt == nil {
			return st, false, nil
		}
		if err != nil && !client.IsStatus(err, 404) {
			return st, false, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return st, false, err
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "memstore up"})
	if err != nil {
		return st, false, err
	}
	key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "memstore up worker"})
	if err != nil {
		return st, false, err
	}
	st = upState{EnvironmentID: env.ID, EnvironmentKey: key.Key}
	b, _ = json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return st, false, fmt.Errorf("save the environment and its key to %s: %w", path, err)
	}
	return st, true, nil
}
