//go:build !memstore_faults

package workercli

import "log/slog"

// FaultPoint is nil in the memstore binary: only a build with the
// memstore_faults tag, made by the fault-injection tests, stops itself at
// the worker's fault points (see faults_on.go).
func FaultPoint(*slog.Logger) func(string) { return nil }
