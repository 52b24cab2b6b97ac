package worker

import (
	"log/slog"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/toolset"
	"github.com/memstore/memstore/sandbox"
)

// Sandboxed reports whether sessions' bash runs in a sandbox: Config.Sandbox
// asked for one and bubblewrap works here.
func (w *Worker) Sandboxed() bool { return w.sandbox != nil }

// toolsetConfig sets up a session's tools over its mounts, with its shell
// in the worker's sandbox, and logs once what that shell can reach: an
// operator reads from that line what an agent could see.
func (w *Worker) toolsetConfig(mounts []toolset.Mount, log *slog.Logger) toolset.Config {
	view := sandbox.View{Workdir: w.cfg.Workdir, MemoryRoot: api.DefaultMountPrefix}
	for _, m := range mounts {
		view.Stores = append(view.Stores, sandbox.Store{Dir: m.Dir, MountPath: m.Path, ReadOnly: m.ReadOnly})
	}
	log.Info("session sandbox", w.sandbox.LogAttrs(view)...)
	cfg := toolset.Config{Workdir: w.cfg.Workdir, Mounts: mounts, Logger: log}
	if w.sandbox != nil {
		cfg.WrapShell = func(argv []string) []string { return w.sandbox.Command(view, argv) }
	}
	return cfg
}
