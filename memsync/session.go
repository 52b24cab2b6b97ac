package memsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
)

// Interval and time limits of a session's memory sync.
const (
	// DefaultInterval is how often a session syncs its stores when the
	// worker's memory_sync_interval is not set: frequent enough that
	// another session or a console user sees the agent's notes soon after
	// it writes them, rare enough that an idle sync (one listing per store)
	// is negligible load.
	DefaultInterval = 15 * time.Second
	// MinInterval is the shortest interval accepted. A sync lists every
	// store, so a worker running many sessions at a shorter interval would
	// mostly be listing.
	MinInterval = 5 * time.Second
	// DefaultEndTimeout bounds End's final syncs together, and each flush
	// (all of them within twice it), so a slow or unreachable server delays the end of a
	// session by at most a minute rather than holding its work item.
	DefaultEndTimeout = 30 * time.Second
)

// StoreMount is one memory store attached to a session, and where it goes.
type StoreMount struct {
	MemoryStoreID string
	// Name is the store's name, for logs.
	Name string
	// MountPath is the mount_path the API advertises (/mnt/memory/<slug>),
	// logged so an operator can match a log line to the session's
	// resources.
	MountPath string
	// Dir is the real folder on disk: MountPath with the worker's mount
	// root applied. Its parent must exist and be writable; Dir itself must
	// not exist, unless it is a folder a crashed worker left, with its
	// journal (see StateDir).
	Dir string
	// ReadOnly: the store is attached read_only; it is pulled, never pushed.
	ReadOnly bool
}

// SessionConfig configures [NewSession].
type SessionConfig struct {
	// Client calls the memory endpoints, authenticated with the session's
	// sessions token (the environment key is refused there). Its traffic
	// counters (Stats) include the sync's requests.
	Client *client.Client
	// Stores are the session's memory store resources.
	Stores []StoreMount
	// SessionID is the agent session's id. It is written in each store's
	// journal, so that a worker finding a folder a crash left can tell the
	// same session re-claimed (adopt the folder and go on) from another,
	// ended one (upload its edits, then remove it).
	SessionID string
	// Interval is the worker's memory_sync_interval: 0 means
	// [DefaultInterval]; a negative value disables memory (nothing is
	// mounted or synced); a positive value below [MinInterval] is refused.
	Interval time.Duration
	// Deletions is the worker's memory_sync_deletions; the zero value is
	// [DeletionsEnabled].
	Deletions DeletionMode
	// Now is the clock of the interval and the corroboration window; nil
	// means time.Now. (The hash cache, which compares file timestamps with
	// the time, always reads the real clock.)
	Now func() time.Time
	// Logger receives every message for the operator; nil means
	// slog.Default(). Each line about a store carries memory_store_id,
	// folder (Dir) and mount_path, and path when it is about one memory.
	Logger *slog.Logger
	// WatchQuiet is how long a store's folder must go without a change, in
	// live mode, before what bash changed in it is synced; 0 means
	// [DefaultWatchQuiet], and a negative value turns the watch off (bash's
	// changes then wait for the periodic sync).
	WatchQuiet time.Duration
	// EndTimeout bounds End's final syncs together and each of its flushes
	// (see [DefaultEndTimeout]); 0 means [DefaultEndTimeout].
	// Tests shorten it.
	EndTimeout time.Duration
	// FaultPoint, when set, is called at the moments a fault-injection test
	// stops or kills the worker: "<step>.planned" between a scan and its
	// apply, "<step>.uploaded", "<step>.downloaded" and "<step>.removed"
	// after an upload landed, a file was written or a file whose memory the
	// server deleted was removed, but before the state records it,
	// "<step>.flushed" after such files were made durable but before the
	// journal that names them is written, where step is mount, sync,
	// write (a live write-through upload), final or flush; and
	// "end.disposing" before a folder whose content is saved is removed.
	// Nil outside such tests.
	FaultPoint func(point string)
	// OnSync, when set, receives a report of each step that moved a
	// store's memories (mount, sync, write, final, flush): the worker's
	// metrics. It is called from the goroutine that ran the step and must
	// not block.
	OnSync func(SyncReport)
	// ProbeCase says whether a new folder's filesystem ignores letter case;
	// nil asks the filesystem ((*confined.Root).CaseInsensitive). Tests on
	// a case-sensitive filesystem answer yes, to drive the way such a
	// filesystem is mounted.
	ProbeCase func(*confined.Root) (bool, error)
}

// SyncReport is what one step did to one store.
type SyncReport struct {
	MemoryStoreID string
	// Step is mount, sync (periodic or live), write (a live upload of one
	// written file), final (the final sync) or flush.
	Step     string
	Duration time.Duration
	// Changes made and changes failed, as in StepReport.
	Changes, Failed int
	// Conflicts counts local edits the server won because another writer
	// changed the memory too: the server's version overwrote the file
	// (the edit is kept aside), or the edit was not sent because the
	// memory changed after the listing (the next sync downloads it).
	Conflicts int
	// BytesUploaded and BytesDownloaded count memory content sent and
	// written to the folder.
	BytesUploaded, BytesDownloaded int64
}

// Session keeps the memory stores of one agent session in step with their
// folders, from the mount to the end of the session. The worker calls
// Mount once before the agent runs, SyncIfDue after each tool call, and End
// once when the session is over. Its methods are safe for concurrent use;
// they run one at a time.
//
// Every store is synced on its own: one failing store (a server error, an
// unreadable folder) is logged and never stops the others, and nothing a
// sync does fails the session.
type Session struct {
	interval   time.Duration
	endTimeout time.Duration
	watchQuiet time.Duration
	now        func() time.Time
	log        *slog.Logger
	disabled   bool
	stores     []*store

	mu       sync.Mutex
	mounted  bool
	ended    bool
	lastSync time.Time

	// live is set by StartLive (live.go); liveMu guards the pointer, so
	// Nudge and Wrote never wait for mu, which a sync holds.
	liveMu sync.Mutex
	live   *live
}

// NewSession checks cfg and returns a session that has not mounted
// anything yet. A negative Interval gives a disabled session, on which
// every method does nothing.
func NewSession(cfg SessionConfig) (*Session, error) {
	s := &Session{
		interval:   cfg.Interval,
		endTimeout: cfg.EndTimeout,
		watchQuiet: cfg.WatchQuiet,
		now:        cfg.Now,
		log:        cfg.Logger,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.endTimeout <= 0 {
		s.endTimeout = DefaultEndTimeout
	}
	if s.watchQuiet == 0 {
		s.watchQuiet = DefaultWatchQuiet
	}
	switch {
	case cfg.Interval < 0:
		s.disabled = true
		return s, nil
	case cfg.Interval == 0:
		s.interval = DefaultInterval
	case cfg.Interval < MinInterval:
		return nil, fmt.Errorf("memory_sync_interval %v is too short: the minimum is %v; use a longer interval, 0 for the default %v, or a negative value to disable memory",
			cfg.Interval, MinInterval, DefaultInterval)
	}
	if cfg.Deletions > DeletionsDisabled {
		return nil, fmt.Errorf("memory_sync_deletions %v is not a deletion mode; use enabled, log_only or disabled", cfg.Deletions)
	}
	if cfg.Client == nil && len(cfg.Stores) > 0 {
		return nil, errors.New("memsync: SessionConfig.Client is nil; pass a client authenticated with the session's sessions token")
	}
	dirs := map[string]string{}
	for _, m := range cfg.Stores {
		if m.MemoryStoreID == "" {
			return nil, fmt.Errorf("memsync: the store mounted at %q has no MemoryStoreID", m.MountPath)
		}
		if m.Dir == "" {
			return nil, fmt.Errorf("memsync: memory store %s has no Dir; set it to the folder to mount the store in", m.MemoryStoreID)
		}
		dir, err := filepath.Abs(m.Dir)
		if err != nil {
			return nil, fmt.Errorf("memsync: memory store %s: folder %q: %w", m.MemoryStoreID, m.Dir, err)
		}
		if other, dup := dirs[dir]; dup {
			return nil, fmt.Errorf("memory stores %s and %s would both be mounted at %s; give each store its own folder", other, m.MemoryStoreID, dir)
		}
		dirs[dir] = m.MemoryStoreID
		m.Dir = dir
		s.stores = append(s.stores, newStore(m, cfg, s.log))
	}
	return s, nil
}

// Disabled reports whether memory is disabled (a negative Interval): the
// worker then runs the session without mounting anything.
func (s *Session) Disabled() bool { return s.disabled }

// Mount creates each store's folder (mode 0700) with its marker file and
// downloads every memory into it. A folder a crashed worker left is
// adopted instead, when the journal beside it vouches for it (see the
// package documentation), and the folder of a mount killed before its
// first journal, holding nothing, is removed and mounted afresh. It
// refuses to start — before creating anything —
// if anything else already exists at a store's folder, or if the folder's
// parent is missing or not writable, with an error that names the folder,
// the store and the fix. If a download fails, the folders Mount
// made are removed again (they hold nothing but what it downloaded) and the
// error is returned: a session never runs without its memory.
func (s *Session) Mount(ctx context.Context) error {
	if s.disabled {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
		return errors.New("memsync: Mount after End; make a new Session for a new session")
	case s.mounted:
		return errors.New("memsync: Mount called twice; it mounts every store at once")
	}
	var errs []error
	for _, st := range s.stores {
		leftover, err := st.checkDir()
		if err == nil && leftover {
			err = st.checkLeftover()
		}
		if err != nil {
			st.log.ErrorContext(ctx, err.Error())
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		for _, st := range s.stores {
			st.closeState(false)
		}
		return errors.Join(errs...)
	}
	results := forEachStore(s.stores, func(st *store) error {
		if st.leftover != nil {
			return st.adopt(ctx, s.now())
		}
		return st.mountStore(ctx, s.now())
	})
	for i, err := range results {
		if err != nil {
			s.stores[i].log.ErrorContext(ctx, err.Error())
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		for _, st := range s.stores {
			st.discard(ctx)
		}
		return errors.Join(errs...)
	}
	s.mounted = true
	s.lastSync = s.now()
	return nil
}

// SyncIfDue syncs every store if Interval has passed since the last sync
// (or the mount). The worker calls it after each tool call, so a session
// that makes no tool calls makes no requests.
func (s *Session) SyncIfDue(ctx context.Context) {
	if s.disabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mounted && !s.ended && s.now().Sub(s.lastSync) >= s.interval {
		s.syncAll(ctx, false)
	}
}

// Sync syncs every store now. Failures are logged, never returned.
func (s *Session) Sync(ctx context.Context) {
	if s.disabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mounted && !s.ended {
		s.syncAll(ctx, false)
	}
}

// syncAll syncs every store. The interval counts from the sync's start: a
// change made while a sync runs (which may not see it) is then at most one
// interval old when the next sync starts.
func (s *Session) syncAll(ctx context.Context, final bool) []outcome {
	now := s.now()
	step := "sync"
	if final {
		step = "final"
	}
	outs := forEachStore(s.stores, func(st *store) outcome {
		return st.timed(step, func() outcome { return st.sync(ctx, now, final) })
	})
	s.lastSync = now
	return outs
}

// EndReport says what End did, summed over the stores.
type EndReport struct {
	// FinalSync is the final sync's outcome; zero (Ran false) unless the
	// end was clean.
	FinalSync StepReport
	// Flush is the upload-only flush's outcome.
	Flush StepReport
	// Removed are the folders (Dir) End removed.
	Removed []string
	// Kept are folders this session created that End left in place: a
	// folder whose marker is missing or altered and that holds files, or
	// one that could not be removed. A warning says why for each.
	Kept []string
}

// StepReport is the outcome of one of End's steps.
type StepReport struct {
	Ran bool
	// Changes made: files written or removed in the folders, memories
	// created, updated or deleted on the server.
	Changes int
	// Failed changes, each logged.
	Failed int
	// CutOff counts planned changes not made because the step's time ran
	// out (a warning says how many, per store).
	CutOff int
	// StoresCutOff counts stores whose time ran out before their changes
	// could even be planned (the folder scan or the listing).
	StoresCutOff int
}

// End finishes the session's memory: on a clean end, a final sync (whose
// deletions need no corroboration window, since no later sync will come);
// then, always, an upload-only flush of local edits in writable stores whose
// marker is intact; then it removes the folders this Session created, a
// store at a time as one unit. The final syncs share EndTimeout, each flush
// has EndTimeout of its own and all of them end within twice it, and a
// warning counts what a limit cut off. A folder whose marker is missing or altered and that holds
// files is kept, with a warning: it may not be the folder Mount made, and
// whatever is in it is not this session's to delete.
//
// Each store goes through its three steps as one unit, and lets go of what
// it knew of its folder and the server as soon as its folder is dealt
// with: the final sync hashes every file of every store, and run for all
// stores before any was removed it held the state, the listing and the
// hashes of all of them at once — the worker's peak memory.
//
// End ignores ctx's cancellation (not its values): it is the last chance to
// save the agent's edits, and its own timeouts bound it. After End the
// Session does nothing.
func (s *Session) End(ctx context.Context, clean bool) EndReport {
	var rep EndReport
	if s.disabled {
		return rep
	}
	s.stopLive()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return rep
	}
	s.ended = true
	ctx = context.WithoutCancel(ctx)
	// The final syncs share EndTimeout from now; each flush has its own
	// EndTimeout, and all of them end within twice that from now, so End
	// is bounded as when each step ran on every store in turn.
	finalCtx, cancelFinal := context.WithTimeout(ctx, s.endTimeout)
	defer cancelFinal()
	flushCtx, cancelFlush := context.WithTimeout(ctx, 2*s.endTimeout)
	defer cancelFlush()
	type storeEnd struct {
		final, flush outcome
		disposal     disposal
	}
	ends := forEachStoreN(s.stores, endParallelism, func(st *store) storeEnd {
		var e storeEnd
		if s.mounted {
			if clean {
				e.final = st.timed("final", func() outcome { return st.sync(finalCtx, s.now(), true) })
				s.warnCutOff(ctx, st, "final sync", "the flush that follows still uploads the agent's edits", e.final)
			}
			fctx, cancel := context.WithTimeout(flushCtx, s.endTimeout)
			e.flush = st.timed("flush", func() outcome { return st.flush(fctx, s.now()) })
			cancel()
			s.warnCutOff(ctx, st, "flush", "those edits are not on the server, and copies of them are kept when the folder is removed; their paths are listed", e.flush)
		}
		e.disposal = st.dispose(ctx)
		st.release()
		return e
	})
	if s.mounted {
		rep.FinalSync.Ran, rep.Flush.Ran = clean, true
	}
	for i, e := range ends {
		rep.FinalSync.add(e.final)
		rep.Flush.add(e.flush)
		switch e.disposal {
		case disposeRemoved:
			rep.Removed = append(rep.Removed, s.stores[i].mount.Dir)
		case disposeKept:
			rep.Kept = append(rep.Kept, s.stores[i].mount.Dir)
		}
	}
	return rep
}

// add counts one store's outcome of the step.
func (r *StepReport) add(o outcome) {
	r.Changes += o.changes
	r.Failed += o.failed
	r.CutOff += o.cutOff
	if o.incomplete {
		r.StoresCutOff++
	}
}

// warnCutOff warns about what the time limit cut off of one of End's steps
// (name) on one store, and what that means (consequence).
func (s *Session) warnCutOff(ctx context.Context, st *store, name, consequence string, o outcome) {
	if o.cutOff == 0 && !o.incomplete {
		return
	}
	var msg string
	switch {
	case !o.incomplete:
		msg = fmt.Sprintf("the %s of this memory store ran out of its %v: %d planned changes were not made; %s", name, s.endTimeout, o.cutOff, consequence)
	case o.cutOff > 0:
		msg = fmt.Sprintf("the %s of this memory store ran out of its %v before it could compare the folder with the server, with %d local edits waiting; %s",
			name, s.endTimeout, o.cutOff, consequence)
	default:
		msg = fmt.Sprintf("the %s of this memory store ran out of its %v before it could compare the folder with the server; %s", name, s.endTimeout, consequence)
	}
	attrs := []any{"cut_off", o.cutOff}
	if len(o.cutPaths) > 0 {
		slices.Sort(o.cutPaths)
		attrs = append(attrs, "paths", o.cutPaths)
	}
	st.log.WarnContext(ctx, msg, attrs...)
}

// storeParallelism bounds how many stores mount or sync at once: enough to
// overlap one store's round trips with another's disk writes, few enough
// that 8 stores of a session do not thrash 2 cores and a small server.
const storeParallelism = 4

// endParallelism bounds how many stores End ends at once. Fewer than
// storeParallelism: each store's end hashes its whole folder and holds its
// scan, plan and hashes until the store is removed, and what End holds at
// once was the worker's peak memory; two keep both cores busy.
const endParallelism = 2

// forEachStore runs fn on the stores, storeParallelism at a time, and
// returns the results in store order. Stores are independent, so one slow
// store does not delay the others' sync.
func forEachStore[T any](stores []*store, fn func(*store) T) []T {
	return forEachStoreN(stores, storeParallelism, fn)
}

// forEachStoreN is forEachStore, n stores at a time.
func forEachStoreN[T any](stores []*store, n int, fn func(*store) T) []T {
	out := make([]T, len(stores))
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			out[i] = fn(st)
		})
	}
	wg.Wait()
	return out
}
