package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/directseed"
	"github.com/memstore/memstore/internal/loadgen"
)

// benchFlags are the settings of `memstore bench`.
type benchFlags struct {
	duration    time.Duration
	requests    int64
	rate        float64
	concurrency int
	followers   int
	mix         string
	seed        string
	reuseSeed   int
	contentSize int
	// direct writes --seed into the database of --data or --database
	// instead of through a server's API.
	direct   bool
	database string
}

// directWritesPerTx is how many memory writes a --direct seed commits at
// once: a thousand make the commit's cost vanish without holding SQLite's
// write lock for long.
const directWritesPerTx = 1000

// newBenchCommand is `memstore bench`: a load generator an operator points
// at any memstore server, to learn what their deployment does under a mix
// of the real operations (the engine is internal/loadgen).
func newBenchCommand(s streams) *cobra.Command {
	cli := &cliContext{streams: s}
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "load a server with a timed mix of real operations and report throughput and latency",
		Long: `memstore bench: load a memstore server with a timed, bounded mix of its real
operations (memory create/update/get/list, version list, change-feed long
polls, snapshots, session event appends with SSE followers, work claims) and
report throughput, p50/p95/p99 latency and errors by status per operation.

The run ends at --duration or after --requests requests, whichever comes
first. Without --seed it makes a small store of its own, and removes it, its
sessions and environments afterwards; --seed builds a data set of the given
shape first and keeps it. A live progress line goes to stderr on a terminal.

--seed with --direct writes the data set straight into the database of
--data (SQLite) or --database (PostgreSQL) through the storage layer, a
thousand writes a transaction, with no server, and exits: seed a large
data set that way, then measure it with --reuse-seed against a server on
that database.`,
		Example: `  memstore bench --duration 10s                       # flat out, for 10 s or 10,000 requests
  memstore bench --rate 200 --duration 1m --output json
  memstore bench --seed 10x1000x5 --content-size 2048  # 10 stores × 1,000 memories × 5 versions
  memstore bench --mix memory.get=8,memory.update=2
  memstore bench --seed 10000x100x5 --direct --data ./scale-data  # no server: into the SQLite file`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, cli, f) },
	}
	fs := cmd.Flags()
	cli.conn.register(fs)
	cli.registerOutput(fs)
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long the measured phase runs at most")
	fs.Int64Var(&f.requests, "requests", 10_000, "how many requests the measured phase makes at most")
	fs.Float64Var(&f.rate, "rate", 0, "target requests per second over all workers (0: flat out)")
	fs.IntVar(&f.concurrency, "concurrency", 8, "requests in flight at most")
	fs.IntVar(&f.followers, "followers", 4, "SSE followers of the sessions event.append writes to")
	fs.StringVar(&f.mix, "mix", mixString(loadgen.DefaultMix), "operations and their weights")
	fs.StringVar(&f.seed, "seed", "", "build a data set first, STORESxMEMORIESxVERSIONS (such as 10x1000x5), and keep it")
	fs.IntVar(&f.reuseSeed, "reuse-seed", 0, "measure on up to this many stores an earlier --seed left, instead of making any")
	fs.IntVar(&f.contentSize, "content-size", 512, "bytes of content per memory write")
	fs.BoolVar(&f.direct, "direct", false, "with --seed: write the data set straight into the database of --data or --database, without a server, then exit")
	fs.StringVar(&f.database, "database", envOr("MEMSTORE_DATABASE_URL", ""), "with --direct: the PostgreSQL URL to seed instead of the SQLite file in --data (env MEMSTORE_DATABASE_URL)")
	cli.explainErrors(cmd)
	return cmd
}

func mixString(m loadgen.Mix) string {
	var parts []string
	for _, w := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", w.Op, w.Weight))
	}
	return strings.Join(parts, ",")
}

func runBench(cmd *cobra.Command, cli *cliContext, f benchFlags) error {
	// Every setting is checked before the first request.
	mix, err := loadgen.ParseMix(f.mix)
	if err != nil {
		return usageError{Err: fmt.Errorf("--mix: %w", err)}
	}
	cfg := loadgen.Config{Duration: f.duration, Requests: f.requests, Rate: f.rate, Concurrency: f.concurrency,
		Followers: f.followers, Mix: mix, ContentBytes: f.contentSize, ReuseSeed: f.reuseSeed}
	if f.seed != "" {
		shape, err := loadgen.ParseShape(f.seed, f.contentSize)
		if err != nil {
			return usageError{Err: fmt.Errorf("--seed: %w", err)}
		}
		cfg.Seed = &shape
	}
	switch {
	case f.duration <= 0:
		return usageError{Err: fmt.Errorf("--duration %v: give a positive duration, such as 30s", f.duration)}
	case f.requests <= 0:
		return usageError{Err: fmt.Errorf("--requests %d: give a positive number", f.requests)}
	case f.rate < 0:
		return usageError{Err: fmt.Errorf("--rate %v: give 0 (flat out) or a positive number of requests per second", f.rate)}
	case f.concurrency < 1:
		return usageError{Err: fmt.Errorf("--concurrency %d: give 1 or more", f.concurrency)}
	case f.followers < 0:
		return usageError{Err: fmt.Errorf("--followers %d: give 0 or more", f.followers)}
	case f.reuseSeed < 0:
		return usageError{Err: fmt.Errorf("--reuse-seed %d: give how many seeded stores to measure on", f.reuseSeed)}
	case f.reuseSeed > 0 && f.seed != "":
		return usageError{Err: errors.New("--seed and --reuse-seed: give one, a new data set or the one an earlier --seed left")}
	case f.contentSize < 1 || f.contentSize > api.MaxContentBytes:
		return usageError{Err: fmt.Errorf("--content-size %d: give between 1 and %d bytes (the API's limit per memory)", f.contentSize, api.MaxContentBytes)}
	case f.direct && cfg.Seed == nil:
		return usageError{Err: errors.New("--direct: give --seed STORESxMEMORIESxVERSIONS, the data set to write into the database")}
	case !f.direct && cmd.Flags().Changed("database"):
		return usageError{Err: errors.New("--database: only --direct writes into a database; without it bench talks to the server at --base-url")}
	}
	if f.direct {
		return runDirectSeed(cmd, cli, f, *cfg.Seed)
	}
	format, err := cli.format(cli.stdout)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	cfg.Client = c
	if file, ok := cli.stderr.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		cfg.Progress = progressLine(cli.stderr)
	}
	rep, err := loadgen.Run(cmd.Context(), cfg)
	if cfg.Progress != nil {
		fmt.Fprint(cli.stderr, "\r\033[K")
	}
	if rep == nil {
		return err
	}
	if perr := printBench(cli.stdout, format, rep); perr != nil {
		return perr
	}
	return err // a cleanup that failed, after the report
}

// progressLine rewrites one stderr line with the run so far.
func progressLine(w io.Writer) func(loadgen.Progress) {
	return func(p loadgen.Progress) {
		line := fmt.Sprintf("%s %5.1fs  %d/%d", p.Phase, p.Elapsed.Seconds(), p.Done, p.Total)
		if p.Phase == "run" {
			rate := 0.0
			if s := p.Elapsed.Seconds(); s > 0 {
				rate = float64(p.Done) / s
			}
			line = fmt.Sprintf("run %5.1fs of %v  %d/%d requests  %.0f/s  %d errors", p.Elapsed.Seconds(), p.Deadline, p.Done, p.Total, rate, p.Errors)
		}
		fmt.Fprintf(w, "\r\033[K%s", line)
	}
}

// printBench writes the report: the JSON or YAML of loadgen.Report, or a
// table per operation with a summary and the errors by status.
func printBench(w io.Writer, format string, rep *loadgen.Report) error {
	switch format {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case outputYAML:
		return printYAML(w, rep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tCOUNT\tPER_SEC\tP50_MS\tP95_MS\tP99_MS\tMAX_MS\tERRORS")
	for _, op := range rep.Operations {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", op.Name, op.Count, op.PerSecond, op.P50MS, op.P95MS, op.P99MS, op.MaxMS, op.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rate := "flat out"
	if rep.TargetRate > 0 {
		rate = fmt.Sprintf("target %g/s", rep.TargetRate)
	}
	fmt.Fprintf(w, "\n%d requests in %.2fs (%.1f/s, %s, concurrency %d) against %s; stopped by %s; %d errors\n",
		rep.Requests, rep.ElapsedSeconds, float64(rep.Requests)/max(rep.ElapsedSeconds, 0.001), rate, rep.Concurrency, rep.BaseURL, rep.StoppedBy, rep.Errors)
	if rep.Seed != nil {
		fmt.Fprintf(w, "seeded %d stores × %d memories × %d versions of %d bytes, kept: %s\n",
			rep.Seed.Stores, rep.Seed.Memories, rep.Seed.Versions, rep.Seed.ContentBytes, strings.Join(rep.StoreIDs, " "))
	}
	for _, op := range rep.Operations {
		if len(op.ErrorsByStatus) == 0 {
			continue
		}
		var parts []string
		for _, s := range slices.Sorted(maps.Keys(op.ErrorsByStatus)) {
			parts = append(parts, fmt.Sprintf("%s×%d", s, op.ErrorsByStatus[s]))
		}
		fmt.Fprintf(w, "errors of %s by status: %s\n", op.Name, strings.Join(parts, ", "))
	}
	return nil
}

// runDirectSeed is `bench --seed --direct`: the data set written into the
// database itself (package directseed), reported like a seed through the
// API.
func runDirectSeed(cmd *cobra.Command, cli *cliContext, f benchFlags, shape loadgen.Shape) error {
	format, err := cli.format(cli.stdout)
	if err != nil {
		return err
	}
	o := serveOptions{dataDir: cli.conn.dataDir, database: f.database}
	if o.database == "" {
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			return fmt.Errorf("make the data folder %s: %w", o.dataDir, err)
		}
	}
	db, name, err := openStore(cmd.Context(), o)
	if err != nil {
		return err
	}
	defer db.Close()
	seeder, ok := db.(directseed.Database)
	if !ok {
		return fmt.Errorf("the database %s cannot take a direct seed", name)
	}
	opts := directseed.Options{Shape: shape, Writers: f.concurrency, WritesPerTx: directWritesPerTx}
	if file, ok := cli.stderr.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		opts.Progress = progressLine(cli.stderr)
		defer fmt.Fprint(cli.stderr, "\r\033[K")
	}
	res, err := directseed.Seed(cmd.Context(), seeder, opts)
	if res == nil {
		return err
	}
	rep := struct {
		Database string        `json:"database"`
		Seed     loadgen.Shape `json:"seed"`
		*directseed.Result
	}{name, shape, res}
	switch format {
	case outputJSON:
		enc := json.NewEncoder(cli.stdout)
		enc.SetIndent("", "  ")
		if perr := enc.Encode(rep); perr != nil {
			return perr
		}
	case outputYAML:
		if perr := printYAML(cli.stdout, rep); perr != nil {
			return perr
		}
	default:
		// An interrupted seed says how far it got: whole stores but the last
		// one of each writer.
		fmt.Fprintf(cli.stdout, "seeded %d of %d stores × %d memories × %d versions of %d bytes into %s: %d writes in %.1fs (%.0f/s), named %s…\n",
			len(res.StoreIDs), shape.Stores, shape.Memories, shape.Versions, shape.ContentBytes, name, res.Writes, res.ElapsedSeconds,
			float64(res.Writes)/max(res.ElapsedSeconds, 0.001), res.Name)
	}
	return err
}
