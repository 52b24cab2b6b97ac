package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresVar names the database the PostgreSQL tests use. CI (.ci/run)
// starts a local server and sets it; without it those tests skip.
const PostgresVar = "MEMSTORE_TEST_POSTGRES_URL"

// PostgresURL returns the test database's URL, or skips t saying how to
// provide one.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(PostgresVar)
	if u == "" {
		t.Skipf("PostgreSQL test: set %s=postgres://user:password@localhost:5432/db?sslmode=disable (a database the tests may create schemas in; see docs/testing.md)", PostgresVar)
	}
	return u
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
