package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/memsync"
)

// A store folder a killed worker left is adopted only when its own session
// is served again at the same path, which does not happen when another
// host finished the session, nor under the sandbox once the session has
// ended. Until an operator deals with it, its files may be the only copy
// of the agent's edits; so the poll loop looks for such folders in the
// mount root when it starts and every leftoverScanEvery, logs each one it
// finds (once) and counts them in /metrics.

// leftoverScanEvery is how often the mount root is scanned: a leftover
// appears only when a worker dies, so a minute is prompt enough, and a scan
// reads only the folders' journals and the files that changed since.
const leftoverScanEvery = time.Minute

// leftoverMetrics are the gauges of the last scan.
type leftoverMetrics struct {
	folders, files prometheus.Gauge
}

func newLeftoverMetrics() leftoverMetrics {
	return leftoverMetrics{
		folders: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memstore_worker_leftover_folders",
			Help: "Store folders in the mount root that a stopped worker left and no running worker serves (the worker's log and memstore doctor list them).",
		}),
		files: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memstore_worker_leftover_files",
			Help: "Files in those folders whose content the server does not have as of the folder's last sync: edits whose only copy is on this disk.",
		}),
	}
}

// watchLeftovers scans the mount root for leftovers until ctx ends; the
// returned function stops it and waits.
func (w *Worker) watchLeftovers(ctx context.Context, log *slog.Logger) (stop func()) {
	if w.cfg.MemorySyncInterval < 0 {
		return func() {}
	}
	root := w.cfg.MountRoot
	if !remapped(root) {
		return func() {} // /mnt/memory: no root of this worker's own to look in
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		seen := map[string]bool{}
		for {
			w.scanLeftovers(ctx, root, seen, log)
			if !sleep(ctx, w.cfg.clock, leftoverScanEvery) {
				return
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// scanLeftovers runs one scan: the gauges are set to what it found, and
// each folder not seen before is logged.
func (w *Worker) scanLeftovers(ctx context.Context, root string, seen map[string]bool, log *slog.Logger) {
	found, err := memsync.FindLeftovers(root)
	if err != nil {
		log.WarnContext(ctx, "cannot look for folders stopped workers left in the mount root", "folder", root, "err", err,
			"fix", "give the worker's user read access to the mount root")
		return
	}
	folders, files := 0, 0
	for _, l := range found {
		if l.Held {
			continue
		}
		folders++
		files += len(l.Edits)
		if seen[l.Dir] {
			continue
		}
		seen[l.Dir] = true
		log.WarnContext(ctx, "found a store folder a stopped worker left; it is adopted only if its session is served here again",
			"folder", l.Dir, "memory_store_id", l.MemoryStoreID, "session_id", l.SessionID, "unsaved_paths", l.Edits, "problem", l.Problem,
			"fix", "serve the session again on this host; or copy the files you need into the store, then remove the folder and the state folder beside it ("+l.StateDir+")")
	}
	w.metrics.leftovers.folders.Set(float64(folders))
	w.metrics.leftovers.files.Set(float64(files))
}
