package worker

import (
	"log/slog"
	"path/filepath"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/toolset"
	"github.com/memstore/memstore/sandbox"
)

// Sandboxed reports whether sessions' bash runs in a sandbox: Config.Sandbox
// asked for one and bubblewrap works here.
func (w *Worker) Sandboxed() bool { return w.sandbox != nil }

// toolsetConfig sets up a session's tools in its room and over its
// mounts, with its shell in the worker's sandbox and the allowlisted
// environment, and logs once what that shell can reach: an operator reads
// from that line what an agent could see.
func (w *Worker) toolsetConfig(room string, mounts []toolset.Mount, skills []string, log *slog.Logger) toolset.Config {
	view := sandbox.View{Workdir: room, MemoryRoot: api.DefaultMountPrefix}
	for _, name := range skills {
		view.ReadOnly = append(view.ReadOnly, filepath.Join(room, skillsDir, name))
	}
	for _, m := range mounts {
		view.Stores = append(view.Stores, sandbox.Store{Dir: m.Dir, MountPath: m.Path, ReadOnly: m.ReadOnly})
	}
	log.Info("session sandbox", append(w.sandbox.LogAttrs(view), "env", w.cfg.Sandbox.EnvNames())...)
	cfg := toolset.Config{Workdir: room, Mounts: mounts, Logger: log, BashEnv: w.cfg.Sandbox.ShellEnv(room, w.sandbox.ShellUser())}
	if w.sandbox != nil {
		cfg.WrapShell = func(argv []string) []string { return w.sandbox.Command(view, argv) }
		cfg.StartShell = w.sandbox.Start
	}
	return cfg
}
