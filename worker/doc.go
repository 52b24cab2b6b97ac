// Package worker is memstore's environment worker: it claims sessions from
// an environment's work queue, runs their tool calls in a sandbox folder,
// and keeps the memory stores they attach mounted and in sync.
package worker
