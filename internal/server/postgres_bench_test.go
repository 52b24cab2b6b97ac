package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/gctarget"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// BenchmarkPostgresWriteThroughput is BenchmarkWriteThroughput on
// PostgreSQL: memory creates and guarded updates over HTTP through the real
// handler, beside raw single-row INSERT transactions of the same 4 KB on
// the same database (a table with a unique (store_id, path) index), with 8
// and 64 clients, on one store and spread over 100. Raw and API rounds
// alternate, so the shared machine's load weighs on both alike. Run it with
//
//	go test -run '^$' -bench PostgresWriteThroughput -benchtime 1x ./internal/server/
func BenchmarkPostgresWriteThroughput(b *testing.B) {
	for _, clients := range []int{8, 64} {
		for _, stores := range []int{1, 100} {
			b.Run(fmt.Sprintf("clients=%d/stores=%d", clients, stores), func(b *testing.B) {
				benchPostgresWrites(b, clients, stores)
			})
		}
	}
}

func benchPostgresWrites(b *testing.B, clients, stores int) {
	const rounds = 4
	writes := testenv.Scale(max(400, clients*4), 2000) / rounds
	body := strings.Repeat("memory ", 4096/7)
	ctx := context.Background()
	// Both pools together stay within PostgreSQL's default 100 connections.
	url := testenv.PostgresSchema(b) + "&pool_max_conns=32"
	// Both sides' connections are named, so pg_stat_activity tells their
	// backends apart (docs/postgresql-performance.md); the process id keeps
	// another run of this benchmark, beside this one, out of its figures.
	rawApp := fmt.Sprintf("%s_%d", rawReferenceApp, os.Getpid())
	serverApp := fmt.Sprintf("memstore_bench_writes_%d", os.Getpid())
	pool, err := pgxpool.New(ctx, url+"&application_name="+rawApp)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE raw_rows (id bigserial PRIMARY KEY, store_id text NOT NULL, path text NOT NULL, content text NOT NULL, UNIQUE (store_id, path))`); err != nil {
		b.Fatal(err)
	}
	c := newPostgresBenchClient(b, url+"&application_name="+serverApp, clients)
	// Each iteration (-benchtime Nx) runs the whole benchmark again, on new
	// stores and new rows of the same tables, and the figures printed are
	// those of all iterations together: more iterations, steadier figures.
	var (
		raw, creates, updates        throughput
		rawCPU, createCPU, updateCPU cpuSpent
		iteration                    int
	)
	for b.Loop() {
		iteration++
		sts := make([]api.MemoryStore, stores)
		for i := range sts {
			c.must("POST", "/v1/memory_stores", map[string]any{"name": fmt.Sprint("bench-", i)}, &sts[i])
		}
		raws := backends{b: b, pool: pool, app: rawApp}
		servers := backends{b: b, pool: pool, app: serverApp}
		// Each client updates memories of its own, one per store it
		// writes to (client c, store c%stores), guarded by its last hash.
		mems := make([]api.Memory, clients)
		for k := range mems {
			c.must("POST", "/v1/memory_stores/"+sts[k%stores].ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/hot/%d.md", k), Content: "v0"}, &mems[k])
		}
		rawInserts := func(round, n int) throughput {
			return concurrently(clients, n, func(cl, i int) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO raw_rows (store_id, path, content) VALUES ($1, $2, $3)`, fmt.Sprint("store-", (cl+i)%stores), fmt.Sprintf("/i%d/c%d/r%d/m%d.md", iteration, cl, round, i), body)
					return err
				})
			})
		}
		apiCreates := func(round, n int) throughput {
			return concurrently(clients, n, func(cl, i int) error {
				return c.do("POST", "/v1/memory_stores/"+sts[(cl+i)%stores].ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/c%d/r%d/m%d.md", cl, round, i), Content: body}, nil)
			})
		}
		apiUpdates := func(round, n int) throughput {
			return concurrently(clients, n, func(cl, i int) error {
				m := &mems[cl]
				return c.do("POST", "/v1/memory_stores/"+m.MemoryStoreID+"/memories/"+m.ID, map[string]any{
					"content":      fmt.Sprintf("version %d.%d\n%s", round, i, body),
					"precondition": map[string]string{"type": "content_sha256", "content_sha256": m.ContentSHA256},
				}, m)
			})
		}
		kinds := []struct {
			name, side string
			db         backends
			t          *throughput
			cpu        *cpuSpent
			run        func(round, n int) throughput
		}{
			{"raw", rawClient, raws, &raw, &rawCPU, rawInserts},
			{"creates", httpClient, servers, &creates, &createCPU, apiCreates},
			{"updates", httpClient, servers, &updates, &updateCPU, apiUpdates},
		}
		// An untimed round first opens both pools' connections and
		// prepares their statements, which would otherwise be charged to
		// whichever kind ran first.
		var untimed cpuSpent
		for _, k := range kinds {
			measured(ctx, k.side, k.db, &throughput{}, &untimed, func() throughput { return k.run(-1, clients*2) })
		}
		// Each round starts with another kind, so none always runs first
		// (after the others' dirty pages and WAL).
		for round := range rounds {
			for i := range kinds {
				k := kinds[(round+i)%len(kinds)]
				stop := profilePhase(b, k.name)
				measured(ctx, k.side, k.db, k.t, k.cpu, func() throughput { return k.run(round, writes) })
				stop()
			}
		}
	}
	// The test process's CPU per write: for memstore's writes the server
	// and its HTTP clients, for the raw inserts their pgx client only; and
	// the CPU of the PostgreSQL backends of the connections that wrote.
	b.ReportMetric(perCall(creates, createCPU.process), "process_ms/create")
	b.ReportMetric(perCall(updates, updateCPU.process), "process_ms/update")
	b.ReportMetric(perCall(raw, rawCPU.process), "process_ms/raw")
	b.ReportMetric(perCall(creates, createCPU.database), "db_cpu_ms/create")
	b.ReportMetric(perCall(updates, updateCPU.database), "db_cpu_ms/update")
	b.ReportMetric(perCall(raw, rawCPU.database), "db_cpu_ms/raw")
	b.ReportMetric(raw.perSecond(), "raw_postgres_inserts/s")
	b.ReportMetric(creates.perSecond(), "creates/s")
	b.ReportMetric(updates.perSecond(), "guarded_updates/s")
	b.ReportMetric(creates.perSecond()/raw.perSecond(), "creates/raw")
	b.ReportMetric(updates.perSecond()/raw.perSecond(), "updates/raw")
	b.ReportMetric(float64(c.gcPercent), "gc_percent")
}

// Profile labels of the benchmark's client goroutines (and the HTTP
// transport's, which they start), so a CPU profile of the run tells the
// clients' cost from the server's: go tool pprof -tagignore side=client shows
// the server (and the runtime's background work) alone.
const (
	httpClient = "http-client"
	rawClient  = "raw-client"
)

// profilePhase starts a CPU profile of one timed phase of a benchmark when
// MEMSTORE_BENCH_PROFILE names a folder, and returns what stops it. A
// profile of the whole run (-cpuprofile) mixes the phase's work with the
// setup's (thousands of sessions made before the appends) and the other
// phases'; each phase's rounds go to files of their own, which pprof
// merges: go tool pprof -top server.test folder/*appends*.prof
func profilePhase(b *testing.B, phase string) (stop func()) {
	dir := os.Getenv("MEMSTORE_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.CreateTemp(dir, strings.NewReplacer("/", "_", "=", "").Replace(b.Name())+"-"+phase+"-*.prof")
	if err != nil {
		b.Fatalf("MEMSTORE_BENCH_PROFILE: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("MEMSTORE_BENCH_PROFILE: %v (run without -cpuprofile)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatalf("MEMSTORE_BENCH_PROFILE: %v", err)
		}
	}
}

// measured runs one round of the benchmark with its goroutines labelled
// side, adds it to t and the CPU time it took to cpu: the test process's,
// and that of the backends of the connections that wrote.
func measured(ctx context.Context, side string, db backends, t *throughput, cpu *cpuSpent, round func() throughput) {
	before, dbBefore := processCPU(), db.cpu()
	pprof.Do(ctx, pprof.Labels("side", side), func(context.Context) { t.add(round()) })
	after := db.cpu()
	d := cpuSpent{process: processCPU() - before}
	for pid, t := range after {
		d.database += t - dbBefore[pid] // a backend opened in the round counts from zero
	}
	cpu.add(d)
}

// backends are the PostgreSQL backends of the connections named app, found
// in pg_stat_activity through pool.
type backends struct {
	b    *testing.B
	pool *pgxpool.Pool
	app  string
}

// cpu is the CPU time each backend has used, by pid.
func (bk backends) cpu() map[int]time.Duration {
	rows, err := bk.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, bk.app)
	if err != nil {
		bk.b.Fatalf("list the benchmark's backends: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		bk.b.Fatalf("list the benchmark's backends: %v", err)
	}
	used := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		used[pid] = procCPU(bk.b, strconv.Itoa(pid))
	}
	return used
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawReferenceApp is the application_name of the raw reference's
// connections.
const rawReferenceApp = "memstore_bench_raw"

// postgresBenchClient calls a server on PostgreSQL with the admin key.
type postgresBenchClient struct {
	b    *testing.B
	url  string
	key  string
	http *http.Client
	// gcPercent is the collector's target the server runs at, as
	// memstore serve sets it (gctarget): the test process's, shared with
	// the raw reference's client. Each benchmark prints it (gc_percent).
	gcPercent int
}

func newPostgresBenchClient(b *testing.B, url string, clients int) *postgresBenchClient {
	ctx := context.Background()
	db, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelError}))})
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "sk-memstore-bench-admin")
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(server.New(server.Config{App: a}).Handler())
	b.Cleanup(func() {
		ts.Close()
		a.Close()
		db.Close()
	})
	// One kept-alive connection per client.
	return &postgresBenchClient{b: b, url: ts.URL, key: key, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}, gcPercent: gctarget.Apply()}
}

func (c *postgresBenchClient) do(method, path string, body, out any) error {
	return c.doAs("", method, path, body, out)
}

// doAs calls with cred as a Bearer token instead of the admin key when it
// is not empty (an environment key), and the header pairs in hdr.
func (c *postgresBenchClient) doAs(cred, method, path string, body, out any, hdr ...string) error {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	} else {
		req.Header.Set("x-api-key", c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d: %s", method, path, res.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *postgresBenchClient) must(method, path string, body, out any) {
	if err := c.do(method, path, body, out); err != nil {
		c.b.Fatal(err)
	}
}

// BenchmarkPostgresReplicaWrites measures what a second server behind the
// same PostgreSQL database adds: memory creates and guarded updates over
// HTTP through one replica, then through two at once (half the clients
// each), the same number of clients in all, on one store and spread over
// 100. Stores are locked by their row in the database, so the replicas'
// writes to one store still queue on one another; writes to other stores
// do not. Rounds alternate, as in BenchmarkPostgresWriteThroughput. Run it
// with
//
//	go test -run '^$' -bench PostgresReplicaWrites -benchtime 1x ./internal/server/
func BenchmarkPostgresReplicaWrites(b *testing.B) {
	for _, stores := range []int{1, 100} {
		b.Run(fmt.Sprintf("clients=16/stores=%d", stores), func(b *testing.B) {
			benchPostgresReplicas(b, 16, stores)
		})
	}
}

func benchPostgresReplicas(b *testing.B, clients, stores int) {
	const rounds = 4
	writes := testenv.Scale(max(400, clients*4), 2000) / rounds
	body := strings.Repeat("memory ", 4096/7)
	// Two pools within PostgreSQL's default 100 connections, shared with
	// whatever else runs.
	url := testenv.PostgresSchema(b) + "&pool_max_conns=24"
	replicas := []*postgresBenchClient{newPostgresBenchClient(b, url, clients), newPostgresBenchClient(b, url, clients)}
	c := replicas[0]
	// Each iteration (-benchtime Nx) runs again on new stores, and the
	// figures printed are those of all iterations together.
	var oneCreates, oneUpdates, twoCreates, twoUpdates throughput
	for b.Loop() {
		sts := make([]api.MemoryStore, stores)
		for i := range sts {
			c.must("POST", "/v1/memory_stores", map[string]any{"name": fmt.Sprint("bench-", i)}, &sts[i])
		}
		mems := make([]api.Memory, clients)
		for k := range mems {
			c.must("POST", "/v1/memory_stores/"+sts[k%stores].ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/hot/%d.md", k), Content: "v0"}, &mems[k])
		}
		// through picks the replica a client calls: the first, or the
		// client's half.
		run := func(through func(cl int) *postgresBenchClient, round int, tag string) (creates, updates throughput) {
			creates = concurrently(clients, writes, func(cl, i int) error {
				return through(cl).do("POST", "/v1/memory_stores/"+sts[(cl+i)%stores].ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/%s/c%d/r%d/m%d.md", tag, cl, round, i), Content: body}, nil)
			})
			updates = concurrently(clients, writes, func(cl, i int) error {
				m := &mems[cl]
				return through(cl).do("POST", "/v1/memory_stores/"+m.MemoryStoreID+"/memories/"+m.ID, map[string]any{
					"content":      fmt.Sprintf("version %s.%d.%d\n%s", tag, round, i, body),
					"precondition": map[string]string{"type": "content_sha256", "content_sha256": m.ContentSHA256},
				}, m)
			})
			return creates, updates
		}
		// An untimed round through both replicas opens their pools first,
		// which would otherwise be charged to the first rounds.
		run(func(cl int) *postgresBenchClient { return replicas[cl%2] }, -1, "warm")
		for round := range rounds {
			cr, up := run(func(int) *postgresBenchClient { return replicas[0] }, round, "one")
			oneCreates.add(cr)
			oneUpdates.add(up)
			cr, up = run(func(cl int) *postgresBenchClient { return replicas[cl%2] }, round, "two")
			twoCreates.add(cr)
			twoUpdates.add(up)
		}
	}
	b.ReportMetric(oneCreates.perSecond(), "one_replica_creates/s")
	b.ReportMetric(twoCreates.perSecond(), "two_replicas_creates/s")
	b.ReportMetric(oneUpdates.perSecond(), "one_replica_updates/s")
	b.ReportMetric(twoUpdates.perSecond(), "two_replicas_updates/s")
	b.ReportMetric(twoCreates.perSecond()/oneCreates.perSecond(), "creates_two/one")
	b.ReportMetric(twoUpdates.perSecond()/oneUpdates.perSecond(), "updates_two/one")
	b.ReportMetric(float64(replicas[0].gcPercent), "gc_percent")
}
