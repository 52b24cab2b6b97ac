//go:build !memstore_faults

package main

import "log/slog"

// faultPoint is nil in the memstore binary: only a build with the
// memstore_faults tag, made by the fault-injection tests, stops itself at
// the worker's fault points (see faults_on.go).
func faultPoint(*slog.Logger) func(string) { return nil }
