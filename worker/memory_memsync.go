package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
)

// checkMemorySyncInterval refuses an interval memsync would refuse, when
// the worker is built rather than at its first session.
func checkMemorySyncInterval(d time.Duration) error {
	_, err := memsync.NewSession(memsync.SessionConfig{Interval: d})
	return err
}

// memsyncSession is the real memory of an item.
func (w *Worker) memsyncSession(c *client.Client, stores []storeMount, log *slog.Logger) (sessionMemory, error) {
	mounts := make([]memsync.StoreMount, len(stores))
	for i, s := range stores {
		mounts[i] = memsync.StoreMount{MemoryStoreID: s.MemoryStoreID, Name: s.Name, MountPath: s.MountPath, Dir: s.Dir, ReadOnly: s.ReadOnly}
	}
	s, err := memsync.NewSession(memsync.SessionConfig{
		Client: c, Stores: mounts, Interval: w.cfg.MemorySyncInterval, Deletions: w.cfg.MemorySyncDeletions,
		Now: w.cfg.Now, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return reportingSession{s, log}, nil
}

// reportingSession logs what the end of a session's memory did, in one
// line an operator (and the demo) can read.
type reportingSession struct {
	*memsync.Session
	log *slog.Logger
}

func (s reportingSession) End(ctx context.Context, clean bool) {
	rep := s.Session.End(ctx, clean)
	level := slog.LevelInfo
	if rep.FinalSync.Failed+rep.Flush.Failed+rep.FinalSync.CutOff+rep.Flush.CutOff > 0 || len(rep.Kept) > 0 {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "session memory finished",
		"clean_end", clean,
		"final_sync_changes", rep.FinalSync.Changes, "flush_changes", rep.Flush.Changes,
		"failed", rep.FinalSync.Failed+rep.Flush.Failed, "cut_off", rep.FinalSync.CutOff+rep.Flush.CutOff,
		"folders_removed", len(rep.Removed), "folders_kept", rep.Kept)
}
