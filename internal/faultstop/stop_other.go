//go:build !linux

package faultstop

import (
	"errors"
	"os"
	"syscall"
)

// Stop stops the whole process (SIGSTOP) and returns once it is continued.
// Outside Linux there is no way to aim the signal at the calling thread, so
// the caller may run on a little past its point before the process stops;
// the fault-injection suite runs on Linux.
func Stop() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// Stopped is not implemented outside Linux, where it would need each
// system's own process table.
func Stopped(pid int) (bool, error) {
	return false, errors.New("faultstop.Stopped reads /proc, which only Linux has")
}
