package gctarget

import (
	"os"
	"runtime/debug"
	"testing"
)

// Without GOGC the target is Percent; with it, GOGC's.
func TestApplySetsThePercentUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(150) // as the runtime read GOGC at start
	if got := Apply(); got != 150 {
		t.Fatalf("with GOGC set, Apply = %d; want GOGC's 150", got)
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("with GOGC set, the target became %d; want 150 kept", got)
	}
	unsetenv(t, "GOGC")
	if got := Apply(); got != Percent {
		t.Fatalf("without GOGC, Apply = %d; want %d", got, Percent)
	}
	if got := debug.SetGCPercent(100); got != Percent {
		t.Fatalf("without GOGC, the target is %d; want %d", got, Percent)
	}
}

// unsetenv unsets key for the test, restoring it after.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "")
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
