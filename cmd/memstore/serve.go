package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/console"
	"github.com/memstore/memstore/internal/gctarget"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/sealbox"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/workercli"
)

func newServeCommand(s streams) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the API server (embedded SQLite, or PostgreSQL with --database)",
		Example: `  memstore serve
  memstore serve --addr 0.0.0.0:8080 --data /var/lib/memstore --log-format json
  MEMSTORE_DATABASE_URL=postgres://… memstore serve`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), o, s) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "addr", envOr("MEMSTORE_ADDR", "127.0.0.1:8080"), "listen address (env MEMSTORE_ADDR)")
	fs.StringVar(&o.dataDir, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder: the SQLite database and admin.key (env MEMSTORE_DATA)")
	fs.StringVar(&o.database, "database", envOr("MEMSTORE_DATABASE_URL", ""), "PostgreSQL URL (postgres://user:password@host/db?sslmode=…&pool_max_conns=…&statement_timeout=…) for running several replicas; default: SQLite in the data folder (env MEMSTORE_DATABASE_URL)")
	fs.IntVar(&o.maxMemories, "max-memories-per-store", 0, "memory count limit per store (default 10000)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.publicURL, "public-url", envOr("MEMSTORE_PUBLIC_URL", ""), "base URL workers reach this server at, sent in every work secret (env MEMSTORE_PUBLIC_URL; default: the listen address)")
	fs.StringVar(&o.mountPrefix, "mount-prefix", envOr("MEMSTORE_MOUNT_PREFIX", ""), "folder under which sessions mount their memory stores, in each mount_path (env MEMSTORE_MOUNT_PREFIX; default /mnt/memory)")
	modelFlag(fs, &o)
	fs.DurationVar(&o.bodyReadTimeout, "body-read-timeout", server.DefaultBodyReadTimeout, "longest a client may take to send a request body (answered 408 after)")
	fs.IntVar(&o.maxPerAddress, "max-requests-per-address", server.DefaultMaxRequestsPerAddress, "requests in flight from one client address (answered 429 over it; -1: no limit)")
	fs.IntVar(&o.maxPerKey, "max-requests-per-key", server.DefaultMaxRequestsPerKey, "requests in flight with one key or token (answered 429 over it; -1: no limit)")
	workercli.MetricsAddrFlag(fs, &o.metricsAddr)
	fs.StringVar(&o.versionRetention, "version-retention", envOr("MEMSTORE_VERSION_RETENTION", retention.KindKeepAll), "versions kept of each memory in stores without a policy of their own: keep_all, keep_last=N or max_age=DURATION (e.g. 720h); the newest version and redaction records always stay (env MEMSTORE_VERSION_RETENTION; see docs/operations.md)")
	fs.DurationVar(&o.pruneInterval, "prune-interval", defaultPruneInterval, "how often the background pruner deletes the versions retention lets go")
	fs.BoolVar(&o.webhooksAllowPrivate, "webhooks-allow-private", false, "let webhook URLs point at addresses that are not globally reachable (loopback, private, link-local, carrier-grade NAT, …), and use plain HTTP (development and tests only: otherwise a webhook could make the server call what only it can reach; see docs/security.md)")
	fs.BoolVar(&o.mcpAllowPrivate, "mcp-allow-private", false, "let agents' MCP server URLs point at addresses that are not globally reachable (loopback, private, link-local, …), and use plain HTTP (development and tests only; see docs/runtime.md)")
	return cmd
}

// serveOptions configures a server started by serve, demo or up.
type serveOptions struct {
	addr    string
	dataDir string
	// database is a postgres:// URL; "" means the SQLite file in dataDir.
	database    string
	maxMemories int
	logFormat   string
	// publicURL is the base URL workers are told to use (the work secret's
	// api_base_url); "" means the URL the server listens on.
	publicURL string
	// mountPrefix replaces /mnt/memory in the mount_path sessions advertise.
	mountPrefix string
	// modelBaseURL is the Messages API that model-backed agents call; ""
	// is Anthropic's.
	modelBaseURL string
	// modelMaxTokens caps each model reply (0: the default);
	// modelThinkingBudget, when not 0, turns extended thinking on with that
	// many of them.
	modelMaxTokens, modelThinkingBudget int64
	// bodyReadTimeout, maxPerAddress and maxPerKey are the server's doors:
	// see server.Config (zero takes its defaults).
	bodyReadTimeout          time.Duration
	maxPerAddress, maxPerKey int
	// webhooksAllowPrivate lets webhook URLs point at loopback, link-local
	// and private addresses, over plain HTTP too (development and tests).
	webhooksAllowPrivate bool
	// mcpAllowPrivate does the same for agents' MCP servers.
	mcpAllowPrivate bool
	// metricsAddr is where /metrics is served; "" serves none.
	metricsAddr string
	// versionRetention is the default retention policy in retention.Parse's
	// form; "" keeps all.
	versionRetention string
	// pruneInterval is how often the pruner runs (0: defaultPruneInterval).
	pruneInterval time.Duration
}

// defaultPruneInterval is serve --prune-interval's default: pruning is
// housekeeping, a minute late costs a minute of disk.
const defaultPruneInterval = time.Minute

// modelFlag registers the model runtime's flags on fs.
func modelFlag(fs *pflag.FlagSet, o *serveOptions) {
	fs.StringVar(&o.modelBaseURL, "model-base-url", envOr("ANTHROPIC_BASE_URL", ""), "Messages API that agents with a real model call: Anthropic's, or any compatible proxy or gateway (env ANTHROPIC_BASE_URL; the key comes from "+agent.ModelKeyVar+", then "+agent.FallbackModelKeyVar+")")
	fs.Int64Var(&o.modelMaxTokens, "model-max-tokens", agent.DefaultMaxTokens, "longest model reply in tokens; a reply cut off there is continued up to 3 times")
	fs.Int64Var(&o.modelThinkingBudget, "model-thinking-budget", 0, "tokens of each reply the model may think with (extended thinking: at least 1024 and below --model-max-tokens); 0: no thinking")
}

// checkModelFlags refuses model settings the Messages API would refuse on
// every request.
func checkModelFlags(o serveOptions) error {
	limit := o.modelMaxTokens
	if limit == 0 {
		limit = agent.DefaultMaxTokens
	}
	switch b := o.modelThinkingBudget; {
	case limit < 0:
		return usageError{Err: fmt.Errorf("--model-max-tokens %d: give a positive number of tokens (default %d)", limit, agent.DefaultMaxTokens)}
	case b != 0 && (b < 1024 || b >= limit):
		return usageError{Err: fmt.Errorf("--model-thinking-budget %d: give 0 (no thinking) or at least 1024 and below --model-max-tokens (%d)", b, limit)}
	}
	return nil
}

// SecretsKeyVar holds the key that seals vault credentials, base64 of 32
// bytes; the same on every replica sharing a PostgreSQL database.
const SecretsKeyVar = "MEMSTORE_SECRETS_KEY"

// secretsKey is the key that seals vault credentials: $MEMSTORE_SECRETS_KEY,
// else secrets.key in the data folder, made at the first start.
func secretsKey(dataDir string, logger *slog.Logger) ([]byte, error) {
	if v := os.Getenv(SecretsKeyVar); v != "" {
		k, err := sealbox.ParseKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SecretsKeyVar, err)
		}
		return k, nil
	}
	path := filepath.Join(dataDir, "secrets.key")
	k, generated, err := sealbox.KeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("the key that seals vault credentials: %w (set %s instead)", err, SecretsKeyVar)
	}
	if generated {
		logger.Info("made the key that seals vault credentials; keep it with the database (a backup of one is useless without the other), and give every replica the same one with "+SecretsKeyVar, "path", path)
	}
	return k, nil
}

// modelConfig is the model runtime's upstream: o's URL and the key from the
// environment (never a flag, so it stays out of process listings). The log
// line says which variable the key came from, or that only scripted agents
// can run.
func modelConfig(o serveOptions, logger *slog.Logger) agent.ClaudeConfig {
	cfg := agent.ClaudeConfig{BaseURL: o.modelBaseURL, MaxTokens: o.modelMaxTokens, ThinkingBudget: o.modelThinkingBudget}
	upstream := o.modelBaseURL
	if upstream == "" {
		upstream = "https://api.anthropic.com"
	}
	for _, name := range []string{agent.ModelKeyVar, agent.FallbackModelKeyVar} {
		if v := os.Getenv(name); v != "" {
			cfg.APIKey = v
			logger.Info("agents with a real model call the Messages API", "model_base_url", upstream, "key_from", name)
			return cfg
		}
	}
	logger.Info("no model API key: only scripted agents can run; set "+agent.ModelKeyVar+" (or "+agent.FallbackModelKeyVar+") to run agents with a real model", "model_base_url", upstream)
	return cfg
}

func runServe(ctx context.Context, o serveOptions, s streams) error {
	logger, err := workercli.NewLogger(s.stderr, o.logFormat)
	if err != nil {
		return err
	}
	rs, err := startServer(ctx, o, logger, s.stdout)
	if err != nil {
		return err
	}
	if o.metricsAddr != "" {
		_, stopMetrics, err := workercli.ServeMetrics(o.metricsAddr, rs.metrics, logger)
		if err != nil {
			rs.shutdown()
			return err
		}
		defer stopMetrics()
	}
	<-ctx.Done()
	logger.Info("shutting down", "addr", rs.addr)
	return rs.shutdown()
}

// runningServer is a started server: its address, admin key and shutdown.
type runningServer struct {
	addr     string // host:port actually bound
	baseURL  string
	adminKey string // "" unless generated or given by MEMSTORE_ADMIN_KEY
	// store is the server's database (up makes the first console user in it).
	store storage.Store
	// metrics are the server's metrics.
	metrics  prometheus.Gatherer
	shutdown func() error
}

// startServer opens the data folder, bootstraps the admin key, and serves
// until shutdown is called. It returns once the listener is bound, so
// /healthz answers as soon as it returns.
func startServer(ctx context.Context, o serveOptions, logger *slog.Logger, stdout io.Writer) (*runningServer, error) {
	if err := checkModelFlags(o); err != nil {
		return nil, err
	}
	var defaultRetention retention.Policy
	if o.versionRetention != "" {
		p, err := retention.Parse(o.versionRetention)
		if err != nil {
			return nil, usageError{Err: fmt.Errorf("--version-retention %w", err)}
		}
		defaultRetention = p
	}
	if o.pruneInterval < 0 {
		return nil, usageError{Err: fmt.Errorf("--prune-interval %s: give a positive duration such as 1m", o.pruneInterval)}
	}
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder %s: %w (choose another with --data)", o.dataDir, err)
	}
	db, dbName, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("listen on %s: %w (pick a free address with --addr)", o.addr, err)
	}
	baseURL := "http://" + ln.Addr().String()
	publicURL := o.publicURL
	if publicURL == "" {
		publicURL = baseURL
	}
	secretsKey, err := secretsKey(o.dataDir, logger)
	if err != nil {
		ln.Close()
		db.Close()
		return nil, err
	}
	a := app.New(app.Config{Store: db, Logger: logger, MaxMemoriesPerStore: o.maxMemories, Model: modelConfig(o, logger),
		Webhooks: app.WebhooksConfig{AllowPrivate: o.webhooksAllowPrivate}, DefaultRetention: defaultRetention,
		MCP: app.MCPConfig{AllowPrivate: o.mcpAllowPrivate}, SecretsKey: secretsKey})
	tp, stopTracing, err := workercli.TracerProvider(ctx, "memstore-server")
	if err != nil {
		ln.Close()
		a.Close()
		db.Close()
		return nil, err
	}
	srv := server.New(server.Config{App: a, PublicBaseURL: publicURL, MountPrefix: o.mountPrefix,
		BodyReadTimeout: o.bodyReadTimeout, MaxRequestsPerAddress: o.maxPerAddress, MaxRequestsPerKey: o.maxPerKey,
		SpoolDir: o.dataDir, TracerProvider: tp})

	key, generated, err := a.Credentials.BootstrapAdminKey(ctx, os.Getenv("MEMSTORE_ADMIN_KEY"))
	if err != nil {
		ln.Close()
		a.Close()
		db.Close()
		return nil, err
	}
	if generated {
		keyPath := filepath.Join(o.dataDir, "admin.key")
		if err := os.WriteFile(keyPath, []byte(key+"\n"), 0o600); err != nil {
			ln.Close()
			a.Close()
			db.Close()
			return nil, fmt.Errorf("save the generated admin key to %s: %w", keyPath, err)
		}
		fmt.Fprintf(stdout, "Generated the admin API key (shown once, saved to %s):\n  %s\n", keyPath, key)
	}

	// Beside the server: sessions pick up where their event logs say they
	// were, and other replicas' writes wake this one's streams and long
	// polls.
	listenCtx, stopListening := context.WithCancel(context.WithoutCancel(ctx))
	if err := a.Start(listenCtx); err != nil {
		stopListening()
		ln.Close()
		a.Close()
		db.Close()
		return nil, fmt.Errorf("start the sessions' runtimes and the wake-ups from other replicas: %w", err)
	}

	// Webhook deliveries go out from every replica; each is sent once.
	webhooksDone := make(chan struct{})
	go func() {
		a.RunWebhooks(listenCtx, time.Second)
		close(webhooksDone)
	}()

	// The pruner deletes, in small batches, the versions retention lets go.
	pruneDone := make(chan struct{})
	go func() {
		a.RunRetention(listenCtx, cmp.Or(o.pruneInterval, defaultPruneInterval))
		close(pruneDone)
	}()

	con, err := console.New(console.Config{App: a, Closing: srv.Closing(), ImportDir: filepath.Join(o.dataDir, "imports"), MountPrefix: o.mountPrefix})
	if err != nil {
		stopListening()
		<-webhooksDone
		<-pruneDone
		ln.Close()
		a.Close()
		db.Close()
		return nil, err
	}
	hs := &http.Server{Handler: srv.HandlerWithConsole(con.Handler()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	// Shutdown waits for every handler to return; event streams only
	// return when told to.
	hs.RegisterOnShutdown(srv.CloseStreams)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	gcPercent := gctarget.Apply() // a server's GC target, unless GOGC says otherwise
	logger.Info("memstore server ready", "addr", ln.Addr().String(), "base_url", baseURL, "database", dbName, "console", baseURL+console.Prefix, "gc_percent", gcPercent)

	return &runningServer{
		addr:     ln.Addr().String(),
		baseURL:  baseURL,
		adminKey: key,
		store:    db,
		metrics:  srv.Metrics(),
		shutdown: func() error {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := hs.Shutdown(sctx)
			if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
				err = serr
			}
			stopListening()
			<-webhooksDone
			<-pruneDone
			a.Close()
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			stopTracing(sctx)
			return err
		},
	}, nil
}

// openStore opens the database o names: PostgreSQL when o.database is set,
// otherwise the SQLite file in the data folder. It returns the store and a
// name for it that carries no password, for the logs.
func openStore(ctx context.Context, o serveOptions) (storage.Store, string, error) {
	if o.database != "" {
		db, err := postgres.Open(ctx, o.database, postgres.Options{})
		if err != nil {
			return nil, "", err
		}
		return db, postgres.Redact(o.database), nil
	}
	dbPath := filepath.Join(o.dataDir, "memstore.db")
	db, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	return db, dbPath, err
}
