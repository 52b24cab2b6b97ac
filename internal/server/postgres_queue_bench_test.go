package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testenv"
)

// BenchmarkPostgresQueueThroughput is BenchmarkPostgresWriteThroughput for
// the two other writes a busy deployment makes most: work claims (a
// worker's poll that takes the oldest queued item of its environment) and
// session event appends (a user message sent to a session), over HTTP
// through the real handler on PostgreSQL, beside raw single-row PostgreSQL
// transactions of the same kind on the same database: a claim that takes
// the oldest unclaimed row of a queue table (SELECT … FOR UPDATE SKIP
// LOCKED, then UPDATE) and an INSERT of a 1 KB event row under a unique
// (session, sequence) index. Each client appends to a session of its own.
// Raw and API rounds alternate. Run it with
//
//	go test -run '^$' -bench PostgresQueueThroughput -benchtime 1x ./internal/server/
func BenchmarkPostgresQueueThroughput(b *testing.B) {
	for _, clients := range []int{8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchPostgresQueue(b, clients)
		})
	}
}

func benchPostgresQueue(b *testing.B, clients int) {
	const rounds = 3
	writes := testenv.Scale(max(240, clients*4), 1200) / rounds / clients * clients
	text := strings.Repeat("message ", 1024/8)
	ctx := context.Background()
	url := testenv.PostgresSchema(b) + "&pool_max_conns=32"
	pool, err := pgxpool.New(ctx, url+"&application_name="+rawReferenceApp)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE raw_queue (id bigserial PRIMARY KEY, environment_id text NOT NULL, payload text NOT NULL, claimed_by text, claimed_at timestamptz);
		CREATE INDEX ON raw_queue (environment_id, id) WHERE claimed_by IS NULL;
		CREATE TABLE raw_events (session_id text NOT NULL, seq bigint NOT NULL, payload text NOT NULL, PRIMARY KEY (session_id, seq))`); err != nil {
		b.Fatal(err)
	}
	c := newPostgresBenchClient(b, url+"&application_name="+serverBenchApp, clients)
	// Each iteration (-benchtime Nx) runs the whole benchmark again, on a
	// new environment, new sessions and new rows of the same tables, and the
	// figures printed are those of all iterations together.
	var (
		rawClaims, claims, rawAppends, appends throughput
		rawCPU, appendCPU                      cpuSpent
		rawClaimCPU, claimCPU                  cpuSpent
		iteration                              int
	)
	for b.Loop() {
		iteration++
		var env api.Environment
		c.must("POST", "/v1/environments", api.CreateEnvironmentRequest{Name: "bench"}, &env)
		var key api.EnvironmentKey
		c.must("POST", "/v1/environments/"+env.ID+"/keys", nil, &key)
		var agent api.Agent
		c.must("POST", "/v1/agents", map[string]any{"name": "bench", "model": map[string]string{"id": api.ScriptedModel}}, &agent)
		// Every session queues one work item: as many as the claim
		// rounds take, made before they start.
		sessions := make([]api.Session, writes*rounds)
		if err := concurrently(clients, len(sessions), func(cl, i int) error {
			return c.do("POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &sessions[i*clients+cl])
		}); err.calls != len(sessions) {
			b.Fatalf("made %d sessions, want %d", err.calls, len(sessions))
		}
		// Each iteration's raw items are a queue of their own, as its
		// sessions' items are an environment of their own.
		rawEnv := fmt.Sprint("env-", iteration)
		if _, err := pool.Exec(ctx, `INSERT INTO raw_queue (environment_id, payload) SELECT $1, $2 FROM generate_series(1, $3)`, rawEnv, text, len(sessions)); err != nil {
			b.Fatal(err)
		}
		poll := "/v1/environments/" + env.ID + "/work/poll"
		msg := map[string]any{"events": []api.Event{api.UserMessage(text)}}
		for round := range rounds {
			claimStart := sampleCPU(b, pool)
			rawClaims.add(concurrently(clients, writes, func(cl, i int) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var id int64
					if err := tx.QueryRow(ctx, `SELECT id FROM raw_queue WHERE environment_id = $1 AND claimed_by IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`, rawEnv).Scan(&id); err != nil {
						return fmt.Errorf("raw claim: %w", err)
					}
					_, err := tx.Exec(ctx, `UPDATE raw_queue SET claimed_by = $1, claimed_at = now() WHERE id = $2`, fmt.Sprint("worker-", cl), id)
					return err
				})
			}))
			claimMid := sampleCPU(b, pool)
			stop := profilePhase(b, "claims")
			claims.add(concurrently(clients, writes, func(cl, i int) error {
				var w *api.Work
				if err := c.doAs(key.Key, "GET", poll, nil, &w, "Anthropic-Worker-ID", fmt.Sprint("worker-", cl)); err != nil {
					return err
				}
				if w == nil {
					return fmt.Errorf("round %d: a poll found no work with %d items queued", round, len(sessions))
				}
				return nil
			}))
			stop()
			claimEnd := sampleCPU(b, pool)
			rawClaimCPU.add(claimMid.since(claimStart, rawReferenceApp))
			claimCPU.add(claimEnd.since(claimMid, serverBenchApp))
			before := sampleCPU(b, pool)
			rawAppends.add(concurrently(clients, writes, func(cl, i int) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO raw_events (session_id, seq, payload) VALUES ($1, $2, $3)`, fmt.Sprintf("session-%d-%d", iteration, cl), round*writes+i, text)
					return err
				})
			}))
			mid := sampleCPU(b, pool)
			stop = profilePhase(b, "appends")
			pprof.Do(ctx, pprof.Labels("side", httpClient), func(context.Context) {
				appends.add(concurrently(clients, writes, func(cl, i int) error {
					return c.do("POST", "/v1/sessions/"+sessions[cl].ID+"/events", msg, nil)
				}))
			})
			stop()
			after := sampleCPU(b, pool)
			rawCPU.add(mid.since(before, rawReferenceApp))
			appendCPU.add(after.since(mid, serverBenchApp))
		}
	}
	b.ReportMetric(rawClaims.perSecond(), "raw_postgres_claims/s")
	b.ReportMetric(claims.perSecond(), "claims/s")
	b.ReportMetric(claims.perSecond()/rawClaims.perSecond(), "claims/raw")
	b.ReportMetric(perCall(rawClaims, rawClaimCPU.process), "raw_claim_client_cpu_ms/op")
	b.ReportMetric(perCall(rawClaims, rawClaimCPU.database), "raw_claim_db_cpu_ms/op")
	b.ReportMetric(perCall(claims, claimCPU.process), "claim_server_cpu_ms/op")
	b.ReportMetric(perCall(claims, claimCPU.database), "claim_db_cpu_ms/op")
	b.ReportMetric(rawAppends.perSecond(), "raw_postgres_appends/s")
	b.ReportMetric(appends.perSecond(), "appends/s")
	b.ReportMetric(appends.perSecond()/rawAppends.perSecond(), "appends/raw")
	b.ReportMetric(float64(c.gcPercent), "gc_percent")
	b.ReportMetric(perCall(rawAppends, rawCPU.process), "raw_append_client_cpu_ms/op")
	b.ReportMetric(perCall(rawAppends, rawCPU.database), "raw_append_db_cpu_ms/op")
	b.ReportMetric(perCall(appends, appendCPU.process), "append_server_cpu_ms/op")
	b.ReportMetric(perCall(appends, appendCPU.database), "append_db_cpu_ms/op")
}

// serverBenchApp is the application_name of the connections of the server
// under benchmark, so that its PostgreSQL backends' CPU can be told apart.
const serverBenchApp = "memstore_bench_server"

// cpuSample is the CPU time used so far by this process (the server, its
// HTTP clients and the raw reference's client) and by each PostgreSQL
// backend of the benchmark's connections, by application_name and pid.
type cpuSample struct {
	process  time.Duration
	backends map[string]map[int]time.Duration
}

// cpuSpent is the CPU a phase used: in this process and in the database
// backends of the connections that made its writes.
type cpuSpent struct{ process, database time.Duration }

func (c *cpuSpent) add(d cpuSpent) { c.process += d.process; c.database += d.database }

// perCall is d in milliseconds per call of t.
func perCall(t throughput, d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000 / float64(t.calls)
}

// sampleCPU reads utime + stime from /proc for this process and for the
// backends of the raw reference's and the server's connections (found in
// pg_stat_activity through pool).
func sampleCPU(b *testing.B, pool *pgxpool.Pool) cpuSample {
	s := cpuSample{process: processCPU(), backends: map[string]map[int]time.Duration{}}
	rows, err := pool.Query(context.Background(), `SELECT pid, application_name FROM pg_stat_activity WHERE application_name IN ($1, $2)`, rawReferenceApp, serverBenchApp)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			pid int
			app string
		)
		if err := rows.Scan(&pid, &app); err != nil {
			b.Fatal(err)
		}
		if s.backends[app] == nil {
			s.backends[app] = map[int]time.Duration{}
		}
		s.backends[app][pid] = procCPU(b, strconv.Itoa(pid))
	}
	return s
}

// since is the CPU used from before to s: by this process, and by the
// backends of app (a backend that was not there before counts from zero).
func (s cpuSample) since(before cpuSample, app string) cpuSpent {
	d := cpuSpent{process: s.process - before.process}
	for pid, t := range s.backends[app] {
		d.database += t - before.backends[app][pid]
	}
	return d
}

// procCPU is the CPU process pid has used (testenv.ProcessCPU); 0 for a
// process gone.
func procCPU(b *testing.B, pid string) time.Duration {
	n, err := strconv.Atoi(pid)
	if err != nil {
		b.Fatal(err)
	}
	d, err := testenv.ProcessCPU(n)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		b.Fatal(err)
	}
	return d
}
