package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
)

// A store folder a killed worker left is adopted only when its own session
// is served again at the same path, which does not happen when another
// host finished the session, nor under the sandbox once the session has
// ended. Its files may then be the only copy of the agent's edits; so the
// poll loop looks for such folders in the mount root when it starts and
// every leftoverScanEvery. Against memstore (api.ExtensionRecoveries) it
// uploads each one's edits with the environment key once the server says
// no worker holds the session any more, and removes the folder (see
// recover.go); against a server without recoveries it logs each folder
// once and counts them in /metrics, for an operator to deal with.

// leftoverScanEvery is how often the mount root is scanned: a leftover
// appears only when a worker dies, so a minute is prompt enough, and a scan
// reads only the folders' journals and the files that changed since.
const leftoverScanEvery = time.Minute

// leftoverMetrics are the gauges of the last scan and the recoveries'
// running totals.
type leftoverMetrics struct {
	folders, files prometheus.Gauge
	recovered      prometheus.Counter
	recoveredFiles *prometheus.CounterVec
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
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memstore_worker_leftovers_recovered_total",
			Help: "Store folders a stopped worker left that this worker emptied: their edits uploaded, the folder removed.",
		}),
		recoveredFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_leftover_files_recovered_total",
			Help: "Files of those folders uploaded, by what the server made of each: created, updated, unchanged, or conflict_copy (the server's memory changed since; the file was kept beside it).",
		}, []string{"outcome"}),
	}
}

// watchLeftovers scans the mount root for leftovers until ctx ends; the
// returned function stops it and waits. env is the environment key's
// client, which recoveries go through.
func (w *Worker) watchLeftovers(ctx context.Context, env *client.Client, log *slog.Logger) (stop func()) {
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
		r := &recoverer{w: w, env: env, root: root, log: log, seen: map[string]bool{}, failed: map[string]string{}}
		for {
			r.scan(ctx)
			if !sleep(ctx, w.cfg.clock, leftoverScanEvery) {
				return
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// recoverer is the state of the scans: the folders already logged, the
// last failure logged for each, and whether the server takes recoveries.
type recoverer struct {
	w    *Worker
	env  *client.Client
	root string
	log  *slog.Logger
	seen map[string]bool
	// failed is the last failure logged per folder, so that a folder
	// waiting (for its session to stop, say) is logged once per reason.
	failed map[string]string
	// offered: the server said it takes recoveries; asked until it
	// answers.
	offered, asked bool
}

// scan runs one scan: each leftover it may recover is recovered, the
// gauges are set to what is left, and each folder not seen before is
// logged.
func (r *recoverer) scan(ctx context.Context) {
	found, err := memsync.FindLeftovers(r.root)
	if err != nil {
		r.log.WarnContext(ctx, "cannot look for folders stopped workers left in the mount root", "folder", r.root, "err", err,
			"fix", "give the worker's user read access to the mount root")
		return
	}
	folders, files := 0, 0
	for _, l := range found {
		if l.Held || ctx.Err() != nil {
			continue
		}
		if l.Problem == "" && l.SessionID != "" && r.recoverable(ctx) && r.recover(ctx, l) {
			continue
		}
		folders++
		files += len(l.Edits)
		if r.seen[l.Dir] {
			continue
		}
		r.seen[l.Dir] = true
		fix := "serve the session again on this host; or copy the files you need into the store, then remove the folder and the state folder beside it (" + l.StateDir + ")"
		if r.offered {
			fix = "nothing: the worker uploads its edits once no worker holds the session (its log says why it waits), then removes it"
		}
		r.log.WarnContext(ctx, "found a store folder a stopped worker left",
			"folder", l.Dir, "memory_store_id", l.MemoryStoreID, "session_id", l.SessionID, "unsaved_paths", l.Edits, "problem", l.Problem, "fix", fix)
	}
	r.w.metrics.leftovers.folders.Set(float64(folders))
	r.w.metrics.leftovers.files.Set(float64(files))
}

// recoverable asks the server, once it answers, whether it takes
// recoveries.
func (r *recoverer) recoverable(ctx context.Context) bool {
	if r.asked {
		return r.offered
	}
	offered, err := r.env.OffersRecoveries(ctx, r.w.cfg.EnvironmentID)
	if err != nil {
		r.log.WarnContext(ctx, "cannot ask the server whether it takes the edits of folders stopped workers left; asking again at the next scan", "err", err)
		return false
	}
	r.asked, r.offered = true, offered
	if !offered {
		r.log.InfoContext(ctx, "the server does not take recoveries (memstore's own extension), so folders stopped workers left stay for an operator")
	}
	return offered
}

// recover uploads one leftover's edits and removes it; it reports whether
// the folder is gone. A refusal (the session still held, say) is logged
// once per reason, and tried again at the next scan.
func (r *recoverer) recover(ctx context.Context, l memsync.Leftover) bool {
	log := r.log.With("folder", l.Dir, "memory_store_id", l.MemoryStoreID, "session_id", l.SessionID)
	outcomes := map[string]int{}
	n, err := memsync.RecoverLeftover(ctx, r.root, l, func(ctx context.Context, f memsync.RecoveredFile) error {
		req := apiRecovery(l, f)
		got, err := r.env.RecoverMemory(ctx, r.w.cfg.EnvironmentID, req)
		if err != nil {
			return err
		}
		outcomes[got.Outcome]++
		r.w.metrics.leftovers.recoveredFiles.WithLabelValues(got.Outcome).Inc()
		if got.Memory.Path != f.Path {
			log.WarnContext(ctx, "the server's copy of a file changed since the folder's last sync; the file was kept beside it as a conflicted copy",
				"path", f.Path, "conflict_copy", got.Memory.Path, "memory_id", got.Memory.ID)
		}
		return nil
	})
	if errors.Is(err, memsync.ErrLeftoverHeld) {
		return false
	}
	if err != nil {
		if msg := err.Error(); r.failed[l.Dir] != msg {
			r.failed[l.Dir] = msg
			log.WarnContext(ctx, "cannot recover a store folder a stopped worker left yet; trying again at the next scan", "uploaded", n, "err", err)
		}
		return false
	}
	delete(r.failed, l.Dir)
	delete(r.seen, l.Dir)
	r.w.metrics.leftovers.recovered.Inc()
	log.InfoContext(ctx, "recovered a store folder a stopped worker left: its edits are on the server, the folder is removed",
		"files", n, "created", outcomes[api.RecoveryCreated], "updated", outcomes[api.RecoveryUpdated], "unchanged", outcomes[api.RecoveryUnchanged], "conflict_copies", outcomes[api.RecoveryConflictCopy])
	return true
}

// apiRecovery is the request of one recovered file.
func apiRecovery(l memsync.Leftover, f memsync.RecoveredFile) api.RecoveryRequest {
	req := api.RecoveryRequest{SessionID: l.SessionID, MemoryStoreID: l.MemoryStoreID, Path: f.Path, Content: f.Content}
	if f.Base != "" {
		req.BaseContentSHA256 = &f.Base
	}
	return req
}
