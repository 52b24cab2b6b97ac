package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// outcomeTB records how PostgresURL ends a test instead of ending it.
type outcomeTB struct {
	testing.TB
	skipped, failed string
}

func (o *outcomeTB) Skip(args ...any)                  { o.skipped = fmt.Sprint(args...) }
func (o *outcomeTB) Fatalf(format string, args ...any) { o.failed = fmt.Sprintf(format, args...) }
func (o *outcomeTB) Helper()                           {}

// Without a database a PostgreSQL test skips naming the variable to set;
// with RequirePostgresVar=1 (as in CI) it fails instead.
func TestPostgresURLSkipsLoudlyOrFailsWhenRequired(t *testing.T) {
	t.Setenv(PostgresVar, "")
	t.Setenv(RequirePostgresVar, "")
	skip := &outcomeTB{TB: t}
	PostgresURL(skip)
	if skip.failed != "" || !strings.Contains(skip.skipped, PostgresVar+"=postgres://") {
		t.Fatalf("without a database: skipped %q, failed %q; want a skip naming %s", skip.skipped, skip.failed, PostgresVar)
	}

	t.Setenv(RequirePostgresVar, "1")
	fail := &outcomeTB{TB: t}
	PostgresURL(fail)
	if fail.skipped != "" || !strings.Contains(fail.failed, PostgresVar) || !strings.Contains(fail.failed, RequirePostgresVar) {
		t.Fatalf("required: skipped %q, failed %q; want a failure naming both variables", fail.skipped, fail.failed)
	}

	t.Setenv(PostgresVar, "postgres://db")
	set := &outcomeTB{TB: t}
	if u := PostgresURL(set); u != "postgres://db" || set.skipped != "" || set.failed != "" {
		t.Fatalf("with a database: got %q, skipped %q, failed %q", u, set.skipped, set.failed)
	}
}
