package faultstop_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/faultstop"
)

// helperVar makes the test binary, run again by the test, the process
// that stops: its value is the folder it reports into.
const helperVar = "FAULTSTOP_HELPER_DIR"

// The process stops at the point: once Stop is called, neither the code
// after it nor another goroutine's next step runs until the process is
// continued. The stopping process is made to expose a late stop: all its
// threads share one CPU, and its main thread (where a signal sent to the
// process goes) runs only when nothing else wants that CPU, as a busy
// machine's scheduler may leave it. A stop that started from the main
// thread would let the caller write "after" first; kill(getpid(), SIGSTOP),
// the fault hook's stop before, did.
func TestStopRunsNothingPastThePoint(t *testing.T) {
	if dir := os.Getenv(helperVar); dir != "" {
		stopAtThePoint(dir)
		return
	}
	// A stop that starts late is not certain to show in one run (the
	// kernel may hand the signal to the stopping thread itself): three.
	for round := range 3 {
		t.Run(fmt.Sprint("round", round+1), func(t *testing.T) {
			t.Parallel()
			stopAndContinue(t)
		})
	}
}

// stopAndContinue runs the stopping process once: it must stop at its
// point with nothing after it done, and go on once continued.
func stopAndContinue(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopRunsNothingPastThePoint$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperVar+"="+dir)
	out, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		<-exited
	}()
	output := func() string { b, _ := os.ReadFile(filepath.Join(dir, "output")); return string(b) }

	deadline := time.Now().Add(20 * time.Second)
	for {
		stopped, err := faultstop.Stopped(cmd.Process.Pid)
		if err == nil && stopped {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the process exited instead of stopping:\n%s", output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not stop within 20 s:\n%s", output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !exists(t, dir, "reached") {
		t.Fatalf("the process stopped before its point:\n%s", output())
	}
	// Stopped and left alone a while (longer than "other" waits): nothing
	// may move.
	time.Sleep(50 * time.Millisecond)
	for _, name := range []string{"after", "other"} {
		if exists(t, dir, name) {
			what := map[string]string{"after": "the code after the point", "other": "another goroutine"}[name]
			t.Errorf("%s ran after Stop was called, before the process was continued", what)
		}
	}

	// Continued, the point returns and the code after it runs.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for !exists(t, dir, "after") {
		select {
		case <-exited:
			if !exists(t, dir, "after") {
				t.Fatalf("the process exited without going on past its point:\n%s", output())
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func exists(t *testing.T, dir, name string) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// stopAtThePoint is the stopping process: one goroutine reaches the point
// and calls Stop, then writes "after"; another, once it sees the point
// reached, waits a moment (far longer than a stop takes to reach every
// thread) and writes "other".
func stopAtThePoint(dir string) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(oneCPU())
	var reached atomic.Bool
	go func() {
		for !reached.Load() {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(20 * time.Millisecond)
		must(os.WriteFile(filepath.Join(dir, "other"), nil, 0o600))
	}()
	offTheMainThread(func() {
		// The main thread runs only when nothing else would (SCHED_IDLE).
		must(unix.SchedSetAttr(unix.Getpid(), &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0))
		must(os.WriteFile(filepath.Join(dir, "reached"), nil, 0o600))
		reached.Store(true)
		faultstop.Stop()
		must(os.WriteFile(filepath.Join(dir, "after"), nil, 0o600))
	})
	parkForever()
}

// parkForever blocks the calling goroutine for good, on a timer rather
// than on nothing: the runtime would take a process whose goroutines all
// wait on nothing for a deadlock and end it.
func parkForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// oneCPU puts every thread of the process, and so every thread it makes
// later, on the first CPU it may use.
func oneCPU() error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	cpu := 0
	for !set.IsSet(cpu) {
		cpu++
	}
	set.Zero()
	set.Set(cpu)
	for range 2 { // again, for a thread made while the first pass ran
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				return err
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
	}
	return nil
}

// offTheMainThread runs fn in a goroutine locked to a thread other than
// the process's main one. A goroutine that finds itself on the main
// thread keeps it, parked, so the next one is given another.
func offTheMainThread(fn func()) {
	for {
		other := make(chan bool)
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				other <- false
				parkForever()
			}
			other <- true
			fn()
		}()
		if <-other {
			return
		}
	}
}
