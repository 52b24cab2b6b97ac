// Package workerbench measures memstore's worker beside the official SDK's
// EnvironmentWorker, each in processes of its own against one real
// `memstore serve`: a fleet of concurrent sessions, and the memory one
// session with many stores costs. It holds benchmarks only; docs/worker-sessions.md
// gives the commands and the figures.
package workerbench
