// Package testenv tells tests which run they are part of. The README's test
// command (go test -race ./...) must stay fast on a 2-core machine, so tests
// that need minutes — soak runs, fault injection at many points, long
// property searches — run only in CI's second command, which sets
// MEMSTORE_LONG_TESTS=1 (see .ci/run and docs/testing.md).
package testenv

import (
	"os"
	"testing"
)

// LongVar is the environment variable that turns the long tests on.
const LongVar = "MEMSTORE_LONG_TESTS"

// IsLong reports whether this run includes the long tests.
func IsLong() bool { return os.Getenv(LongVar) == "1" }

// Long skips t unless this run includes the long tests, saying how to run it.
func Long(t testing.TB) {
	t.Helper()
	if !IsLong() {
		t.Skipf("long test: runs with %s=1 (CI's second command)", LongVar)
	}
}

// Scale returns quick in the README's test command and long in the long run:
// the number of iterations, checks or kills a test makes.
func Scale(quick, long int) int {
	if IsLong() {
		return long
	}
	return quick
}
