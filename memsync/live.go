package memsync

import (
	"context"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// Live sync (SPEC §8). Once StartLive has run, syncs happen beside the
// agent's tool calls instead of in front of them: Nudge and Wrote only
// queue work for one background goroutine and return at once, so a tool
// call never waits for a sync. Against a memstore server a successful
// write or edit is uploaded at once (Wrote: one request, no scan), and each
// store's change feed is followed with a long poll, so a change made
// elsewhere reaches the folder in well under a second. Each writable
// folder is watched (watch.go), so what bash writes is uploaded within
// about a second too. The background
// sync is the same cycle as ever: apply re-checks each file right before
// it touches it, so a file the agent is changing is never overwritten
// unseen. Only End waits, for the sync in progress and then the final one.

// followWait is how long one long poll of the change feed waits.
const followWait = 25 * time.Second

// followRetry is the pause of a follower after a failed long poll, or
// after a sync that did not catch up with the feed.
const followRetry = 2 * time.Second

// live is the background state of a Session in live mode.
type live struct {
	wake chan struct{} // capacity 1: "there is work"
	stop chan struct{} // closed by End
	// cancel ends the followers' long polls.
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the queue below, never held across I/O
	due     bool       // a periodic sync is wanted
	lastDue time.Time  // when the last periodic sync was queued
	written map[*store]map[string]bool
	changed map[*store]bool // the feed reported remote changes
}

// StartLive moves the session's syncs to the background (see above). Call
// it once, after Mount succeeded; ctx bounds the background work.
func (s *Session) StartLive(ctx context.Context) {
	if s.disabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mounted || s.ended || s.liveState() != nil {
		return
	}
	fctx, cancel := context.WithCancel(ctx)
	l := &live{wake: make(chan struct{}, 1), stop: make(chan struct{}), cancel: cancel, lastDue: s.lastSync,
		written: map[*store]map[string]bool{}, changed: map[*store]bool{}}
	s.liveMu.Lock()
	s.live = l
	s.liveMu.Unlock()
	l.wg.Go(func() { s.background(ctx, l) })
	for _, st := range s.stores {
		if st.feed.on {
			st.followerWake = make(chan struct{}, 1)
			l.wg.Go(func() { s.follow(fctx, l, st) })
		}
		if !st.mount.ReadOnly && s.watchQuiet > 0 {
			if w := st.startWatch(fctx); w != nil {
				l.wg.Go(func() { st.watch(fctx, w, s.watchQuiet, func() { l.queueSync(st) }) })
			}
		}
	}
}

// Nudge is SyncIfDue for live mode: if the interval has passed it queues
// a sync of every store (bash's changes are found by its scan) and returns
// at once. Without StartLive it is SyncIfDue.
func (s *Session) Nudge(ctx context.Context) {
	l := s.liveState()
	if l == nil {
		s.SyncIfDue(ctx)
		return
	}
	l.mu.Lock()
	now := s.now()
	if now.Sub(l.lastDue) >= s.interval {
		l.due, l.lastDue = true, now
		l.wakeBackground()
	}
	l.mu.Unlock()
}

// Wrote queues the upload of one file the agent's write or edit tool just
// wrote successfully; path is the file's path on disk or under its store's
// mount_path. A path in no writable store is ignored. It returns at once;
// without StartLive, or against a server without the change feed, it does
// nothing and the next sync finds the file.
func (s *Session) Wrote(path string) {
	l := s.liveState()
	if l == nil {
		return
	}
	for _, st := range s.stores {
		p, ok := st.memoryPath(path)
		if !ok || st.mount.ReadOnly {
			continue
		}
		l.mu.Lock()
		if l.written[st] == nil {
			l.written[st] = map[string]bool{}
		}
		l.written[st][p] = true
		l.wakeBackground()
		l.mu.Unlock()
		return
	}
}

func (s *Session) liveState() *live {
	if s.disabled {
		return nil
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	return s.live
}

// queueSync queues a sync of one store: its change feed or its folder's
// watch saw it change.
func (l *live) queueSync(st *store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed[st] = true
	l.wakeBackground()
}

// wakeBackground tells the background goroutine there is work queued.
func (l *live) wakeBackground() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// stopLive ends the background work, waiting for the sync in progress.
func (s *Session) stopLive() {
	s.liveMu.Lock()
	l := s.live
	s.live = nil
	s.liveMu.Unlock()
	if l == nil {
		return
	}
	close(l.stop)
	l.cancel()
	l.wg.Wait()
}

// background runs the queued work, one batch at a time: uploads of written
// files first (the agent's latest edits), then the syncs.
func (s *Session) background(ctx context.Context, l *live) {
	// The mounts' journals lose their boot mark now, while the agent
	// starts, rather than at the first sync.
	s.mu.Lock()
	if !s.ended {
		forEachStore(s.stores, func(st *store) outcome {
			st.dropMark(ctx)
			return outcome{}
		})
	}
	s.mu.Unlock()
	for {
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		l.mu.Lock()
		written, changed, due := l.written, l.changed, l.due
		l.written, l.changed, l.due = map[*store]map[string]bool{}, map[*store]bool{}, false
		l.mu.Unlock()

		s.mu.Lock()
		if !s.ended {
			now := s.now()
			forEachStore(s.stores, func(st *store) outcome {
				for p := range written[st] {
					st.timed("write", func() outcome { return st.writeThrough(ctx, now, p) })
				}
				if due || changed[st] {
					st.timed("sync", func() outcome { return st.sync(ctx, now, false) })
					st.wakeFollower()
				}
				return outcome{}
			})
			if due {
				s.lastSync = s.now()
			}
		}
		s.mu.Unlock()
	}
}

// follow long-polls one store's change feed and queues a sync of the store
// whenever something changed after the sequence the store is at.
func (s *Session) follow(ctx context.Context, l *live, st *store) {
	for ctx.Err() == nil {
		seq := st.seq.Load()
		ch, err := st.client.ListChanges(ctx, st.id, client.ListChangesParams{After: seq, Wait: followWait, Limit: 1})
		if ctx.Err() != nil {
			return
		}
		// A cursor behind the server's retention: the sync reads the store
		// again from a snapshot, which moves the cursor on.
		behind := client.IsStatus(err, http.StatusGone)
		if err != nil && !behind {
			st.log.DebugContext(ctx, "following the change feed failed; the periodic sync still runs, and the follower retries", "error", err)
			pause(ctx, followRetry)
			continue
		}
		if !behind && len(ch.Data) == 0 {
			continue
		}
		l.queueSync(st)
		select {
		case <-st.followerWake:
		case <-ctx.Done():
			return
		}
		if st.seq.Load() == seq {
			pause(ctx, followRetry) // the sync failed: do not spin
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// wakeFollower tells the store's follower that a background sync ran.
func (st *store) wakeFollower() {
	if st.followerWake == nil {
		return
	}
	select {
	case st.followerWake <- struct{}{}:
	default:
	}
}

// memoryPath maps a file's path on disk, or under the store's mount_path,
// to its memory path.
func (st *store) memoryPath(path string) (string, bool) {
	for _, dir := range []string{st.mount.Dir, st.mount.MountPath} {
		if dir == "" {
			continue
		}
		rel, err := filepath.Rel(dir, filepath.Clean(path))
		if err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
			return "/" + filepath.ToSlash(rel), true
		}
	}
	return "", false
}

// writeThrough uploads one file without scanning the folder: the same
// reconcile and apply as a sync, over that one path, against the server's
// listing as the change feed last left it (a stale view costs nothing: the
// guarded update then fails, and the server version wins at the next
// sync, as it would have anyway).
func (st *store) writeThrough(ctx context.Context, now time.Time, p string) outcome {
	if st.root == nil || !st.feed.on || readMarker(st.root, st.id) != MarkerTrusted {
		return outcome{}
	}
	data, err := st.root.ReadFile(relPath(p), api.MaxContentBytes)
	if err != nil {
		return outcome{} // gone, too large, not a file: the next sync decides
	}
	f := LocalFile{SHA256: sha256Hex(data)}
	if !utf8.Valid(data) {
		f.Unsyncable = NotUTF8
	}
	local := Local{Marker: MarkerTrusted, Files: map[string]LocalFile{p: f}, Obscured: map[string]error{}}
	base := State{}
	if ps, ok := st.state.get(p); ok {
		base[p] = ps
	}
	remote := Remote{}
	if rm, ok := st.feed.remote[p]; ok {
		remote[p] = rm
	}
	st.step = "write"
	plan := Reconcile(base, local, remote, st.options(now, false))
	uploads := filterKinds(plan.Actions, Create, Update)
	if len(uploads) == 0 {
		return outcome{}
	}
	// Journaled as a sync journals, before the request and after its
	// answer: a worker killed later adopts the folder against the state
	// this upload left, so the agent's next edit of the file reads as an
	// edit, not as a conflict with its own upload.
	next := st.state.full()
	delete(next, p)
	maps.Copy(next, plan.Next)
	st.journalSends(ctx, Plan{Actions: uploads, Next: next})
	a := st.newApplier(plan.Next)
	a.apply(ctx, uploads)
	ps := a.next[p]
	st.state.set(p, ps)
	if ps.isZero() {
		delete(next, p)
	} else {
		next[p] = ps
	}
	st.writeJournal(ctx, next)
	return a.out
}
