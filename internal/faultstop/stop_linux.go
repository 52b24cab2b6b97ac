package faultstop

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Stop stops the whole process (SIGSTOP) before it returns, and returns
// once the process is continued (SIGCONT).
//
// The signal goes to the calling thread itself (tgkill), not to the
// process (kill): a signal sent to the process is handed to one thread the
// kernel picks — the main thread when it can take it — and only that
// thread starts the stop of the others. kill(getpid(), SIGSTOP) therefore
// returns, and the caller goes on running the code after its point, until
// that thread gets a CPU; on a loaded machine that was long enough for a
// worker stopped "in the final sync" to run on into removing the folder.
// Sent to itself, the signal is taken by the calling thread on its way out
// of the system call, which starts the group stop from there: it stops
// before one more instruction of the caller's runs, and every other thread
// is told to stop at the same moment.
func Stop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSTOP)
}

// Stopped reports whether every thread of process pid is stopped (state
// T). The main thread alone is not enough: a process whose main thread has
// stopped may still have others finishing what they were doing, so what
// the process left on disk is final only once all of them are.
func Stopped(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/task", pid), task.Name(), "stat"))
		if err != nil {
			return false, err
		}
		// pid (comm) state …: comm may hold spaces and parentheses; the
		// state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || len(s) < i+3 || s[i+2] != 'T' {
			return false, nil
		}
	}
	return len(tasks) > 0, nil
}
