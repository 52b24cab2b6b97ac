// Package gctarget sets the garbage collector's target for a memstore
// server. A server's live heap is small (tens of megabytes) and every
// request allocates its body, its JSON and the database driver's buffers,
// so with Go's default target (GOGC=100) the collector ran every few
// megabytes and was a fifth of the server's CPU in the PostgreSQL write
// benchmark. At 200 the benchmark's process spent 13–20 % less CPU per
// write, for 14 % more resident memory (58.5 → 66.7 MB)
// (docs/postgresql-performance.md).
package gctarget

import (
	"os"
	"runtime/debug"
)

// Percent is the collector's target, in percent of the live heap, when
// the environment does not set GOGC.
const Percent = 200

// Apply sets the target to Percent unless GOGC is set, which keeps its
// say as for any Go program, and returns the target in force (-1: GOGC=off).
func Apply() int {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(100) // reading it means setting it: put it back
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(Percent)
	return Percent
}
