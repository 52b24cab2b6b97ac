package memsync

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// The agent's write and edit tools tell the session what they wrote
// (Wrote), but bash does not: without a watch, what a command writes waits
// for the next periodic sync (5–15 s). In live mode each writable store's
// folder is therefore watched (inotify on Linux), and a sync of the store
// is queued once the folder has gone quiet for the session's watch quiet
// time, so what bash writes reaches the server within about a second of
// the command finishing. The periodic sync stays as the safety net: a
// watch that cannot be set up (no inotify, too many watches) is logged and
// costs only promptness.

// DefaultWatchQuiet is how long a store's folder must go without a change
// before the changes bash made in it are synced: long enough that a
// command writing many files is synced once, short enough that its files
// reach the server within about a second.
const DefaultWatchQuiet = 250 * time.Millisecond

// watchMaxDelay bounds how long a folder that never goes quiet (a command
// writing for minutes) waits for its sync.
const watchMaxDelay = 2 * time.Second

// startWatch watches the store's folder and its subfolders before it
// returns, so that no change made after StartLive is missed; nil if the
// watch cannot be set up.
func (st *store) startWatch(ctx context.Context) *fsnotify.Watcher {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		st.log.WarnContext(ctx, "cannot watch the folder, so files changed by bash are uploaded at the next periodic sync instead of at once (raise fs.inotify.max_user_instances if it is exhausted)", "error", err)
		return nil
	}
	st.addWatches(ctx, w, st.mount.Dir)
	return w
}

// watch follows w until ctx ends, calling changed once per burst of
// changes: after quiet without a change, or watchMaxDelay after the burst
// began. It closes w.
func (st *store) watch(ctx context.Context, w *fsnotify.Watcher, quiet time.Duration, changed func()) {
	defer w.Close()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time // when the pending burst began; zero: none pending
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			// A new subfolder is watched from now on; what was written
			// in it before is found by the sync this event queues.
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					st.addWatches(ctx, w, ev.Name)
				}
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			wait := quiet
			if left := watchMaxDelay - now.Sub(first); left < wait {
				wait = max(left, 0)
			}
			timer.Reset(wait)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflowed queue lost events: sync to be sure.
			st.log.DebugContext(ctx, "the folder's watch reported an error; syncing the store to be sure nothing is missed", "error", err)
			changed()
		case <-timer.C:
			first = time.Time{}
			changed()
		}
	}
}

// addWatches watches dir and every folder under it. A subfolder that goes
// away meanwhile is no error.
func (st *store) addWatches(ctx context.Context, w *fsnotify.Watcher, dir string) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.Add(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		st.log.WarnContext(ctx, "cannot watch part of the folder, so files changed there by bash wait for the next periodic sync (raise fs.inotify.max_user_watches if it is exhausted)", "error", err)
	}
}
