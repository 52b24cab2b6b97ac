package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresVar names the database the PostgreSQL tests use. CI (.ci/run)
// starts a local server and sets it; without it those tests skip.
const PostgresVar = "MEMSTORE_TEST_POSTGRES_URL"

// RequirePostgresVar, set to 1, turns a PostgreSQL test's skip into a
// failure: CI sets it, so that a lost PostgresVar cannot silently leave
// the second storage backend unchecked.
const RequirePostgresVar = "MEMSTORE_REQUIRE_POSTGRES"

// noPostgres says once per test binary (a package) that its PostgreSQL
// tests do not run: a local run without a database otherwise passes as if
// the second backend had been checked.
var noPostgres sync.Once

// noPostgresLine is that one line.
var noPostgresLine = fmt.Sprintf("PostgreSQL tests SKIPPED: set %s=postgres://user:password@localhost:5432/db?sslmode=disable (a database the tests may create schemas in; see docs/testing.md) to run them", PostgresVar)

// PostgresURL returns the test database's URL. Without one it skips t, or
// fails it when RequirePostgresVar is 1.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(PostgresVar)
	if u != "" {
		return u
	}
	if os.Getenv(RequirePostgresVar) == "1" {
		t.Fatalf("%s=1 but %s is not set: this run must check the PostgreSQL backend", RequirePostgresVar, PostgresVar)
		return ""
	}
	noPostgres.Do(func() { fmt.Fprintln(os.Stderr, noPostgresLine) })
	t.Skip(noPostgresLine)
	return ""
}

var schemaSeq atomic.Int64

// PostgresSchema creates an empty schema in the test database, dropped
// when t ends, and returns a URL whose connections use it: each caller
// gets an independent database without the cost of CREATE DATABASE.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", PostgresVar, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop test schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Errorf("drop test schema %s: %v", name, err)
		}
	})
	return WithSearchPath(base, name)
}

// WithSearchPath returns the URL u with its connections' search_path set
// to schema.
func WithSearchPath(u, schema string) string {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		parsed, err := url.Parse(u)
		if err == nil {
			q := parsed.Query()
			q.Set("search_path", schema)
			parsed.RawQuery = q.Encode()
			return parsed.String()
		}
	}
	return u + " search_path=" + schema
}

// ProcessCPU is the CPU time (user and system) process pid has used, from
// /proc/<pid>/stat in clock ticks of 10 ms: how the benchmarks read a
// PostgreSQL backend's work. A process gone is os.ErrNotExist.
func ProcessCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command, in parentheses, may hold spaces: fields are counted
	// after its closing one (utime and stime are the 14th and 15th).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
