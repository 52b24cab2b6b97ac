package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// asMemstoreVar, set to 1, makes this test binary the memstore command:
// TestMain runs main instead of the tests. Tests that need memstore as a
// real process (signals, exit statuses, on-work scripts, the docs' shell
// blocks) run it this way rather than building it, which cost seconds per
// test and a second, non-race build of every dependency on a fresh machine.
const asMemstoreVar = "MEMSTORE_TEST_AS_MEMSTORE"

func TestMain(m *testing.M) {
	if os.Getenv(asMemstoreVar) == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	faults.remove()
	os.Exit(code)
}

// faults is memstore built with the fault points (the memstore_faults
// tag), once per test process: the fault suite and the recovery test both
// run it, and each link of the whole binary cost seconds of the package's
// time.
var faults faultBuild

type faultBuild struct {
	once sync.Once
	dir  string
	err  error
}

// faultBinary returns the path of the fault-point build, building it on
// first use.
func faultBinary(t *testing.T) string {
	t.Helper()
	faults.once.Do(func() {
		if faults.dir, faults.err = os.MkdirTemp("", "memstore-faults-"); faults.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-tags", "memstore_faults", "-o", filepath.Join(faults.dir, "memstore"), ".").CombinedOutput()
		if err != nil {
			faults.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if faults.err != nil {
		t.Fatalf("building memstore with fault points: %v", faults.err)
	}
	return filepath.Join(faults.dir, "memstore")
}

func (f *faultBuild) remove() {
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

// memstoreBinary returns the path of an executable named memstore that runs
// this test binary as the memstore command, whatever environment its caller
// gives it (the variable is set inside, so children such as `worker run`
// from an on-work script are memstore too). Under -race, a process that
// exits 0 waits a second for late race reports (GORACE atexit_sleep_ms);
// every memstore process here has stopped its goroutines by then, and the
// docs' blocks run a dozen of them, so the wait is turned off.
func memstoreBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return memstoreWrapper(t, t.TempDir(), exe)
}

// memstoreBinaryCopy is memstoreBinary with the test binary copied into the
// wrapper's folder, for a process of another user: go test's build folder
// is readable by its owner only.
func memstoreBinaryCopy(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cp := filepath.Join(dir, "memstore.test")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return memstoreWrapper(t, dir, cp)
}

// memstoreWrapper writes, in dir, the memstore script that runs exe as
// memstore.
func memstoreWrapper(t *testing.T, dir, exe string) string {
	t.Helper()
	bin := filepath.Join(dir, "memstore")
	quoted := "'" + strings.ReplaceAll(exe, "'", `'\''`) + "'"
	script := "#!/bin/sh\n" + asMemstoreVar + "=1 GORACE=\"${GORACE:+$GORACE }atexit_sleep_ms=0\" exec " + quoted + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
