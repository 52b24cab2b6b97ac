package memsync

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/confined"
)

// Page sizes of the two listings: the largest each view allows, so a store
// is read in as few requests as possible.
const (
	basicPageLimit = 100
	fullPageLimit  = api.MaxFullViewListLimit
)

// requestConcurrency bounds the requests one store has in flight at once
// (content fetches, uploads, deletes): enough to hide the round trip, few
// enough not to swamp a small server when several stores sync together.
const requestConcurrency = 16

// store is one mounted memory store: its folder, what the last sync left
// behind, and the log state that keeps repeated warnings quiet.
type store struct {
	mount     StoreMount
	id        string
	client    *client.Client
	deletions DeletionMode
	log       *slog.Logger

	root            *confined.Root // nil until the folder is created
	cache           *confined.HashCache
	state           keptState
	caseInsensitive bool
	// probeCase is SessionConfig.ProbeCase, or the filesystem's answer.
	probeCase func(*confined.Root) (bool, error)
	// onSync is SessionConfig.OnSync (nil: no reports).
	onSync func(SyncReport)
	// phase is where the folder is in its life (see phase.go); it changes
	// only through enter.
	phase phase
	notes noteLog

	sessionID string
	now       func() time.Time
	// step names the step running (mount, sync, write, final, flush) for the
	// fault points; faultPoint is SessionConfig.FaultPoint.
	step       string
	faultPoint func(string)
	// stateRoot is the state folder beside the store's folder (see
	// StateDir), and lock its held lock file; both nil until the mount
	// opens them.
	stateRoot *confined.Root
	lock      *os.File
	// journaled fingerprints the state the journal holds (stateSum), so
	// an unchanged state is not written again; nil: write the next one.
	journaled *[sha256.Size]byte
	// placed: the worker wrote or removed files in the folder since its
	// filesystem was last flushed (set by apply's goroutines); the next
	// journal write flushes first.
	placed atomic.Bool
	// skipFlush: the next journal write may go without the flush, marked
	// with this boot (set by mountStore for the journal of its downloads);
	// unflushed: the journal on disk is such a one, so the next write
	// flushes and replaces it even when the state is unchanged.
	skipFlush, unflushed bool
	// leftover is the journal of a leftover folder that Mount adopts.
	leftover *journal
	// feed is the server's listing kept from the change feed, and seq the
	// feed sequence it is at (read by the follower, hence atomic).
	feed remoteCache
	seq  atomic.Int64
	// followerWake wakes the store's follower after each background sync.
	followerWake chan struct{}
}

func newStore(m StoreMount, cfg SessionConfig, log *slog.Logger) *store {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	probe := cfg.ProbeCase
	if probe == nil {
		probe = (*confined.Root).CaseInsensitive
	}
	return &store{
		probeCase:  probe,
		onSync:     cfg.OnSync,
		sessionID:  cfg.SessionID,
		now:        now,
		faultPoint: cfg.FaultPoint,
		mount:      m,
		id:         m.MemoryStoreID,
		client:     cfg.Client,
		deletions:  cfg.Deletions,
		log:        log.With("memory_store_id", m.MemoryStoreID, "folder", m.Dir, "mount_path", m.MountPath),
		// The cache's racy window compares file timestamps, which the
		// kernel sets from the real clock, so it must not read an injected
		// one: a test clock hours ahead would make it trust a hash taken
		// in the same timestamp tick as a later write.
		cache: confined.NewHashCache(time.Now),
	}
}

func (st *store) options(now time.Time, final bool) Options {
	return Options{
		ReadOnly:        st.mount.ReadOnly,
		Deletions:       st.deletions,
		Now:             now,
		Final:           final,
		CaseInsensitive: st.caseInsensitive,
	}
}

// download fills the new, empty folder. From a memstore server it reads
// one snapshot (one request, content included) and follows the change
// feed from its sequence afterwards. Otherwise it reads content with the
// full listing — 20 memories a request — rather than a basic listing plus
// one GET per memory: for a store that is downloaded whole it moves the
// same content in about 20 times fewer requests (see BenchmarkMount). Only
// one page is held in memory at a time.
//
// On a case-sensitive filesystem each path's fate depends on that path
// alone, so each page is planned and written as it arrives. On a
// case-insensitive one, paths that differ only in case must all be known
// before any is written, so a basic listing plans the download first.
//
// fresh says the journal holds the mount as in progress, so that a folder
// a kill cuts short is removed whole by the next worker: then each file is
// created at its name (confined.Filler) instead of written through a
// temporary file and a rename (up to twice the kernel's time a file on a
// quiet host).
func (st *store) download(ctx context.Context, now time.Time, fresh bool) (outcome, error) {
	empty := Local{Marker: MarkerTrusted}
	opts := st.options(now, false)
	a := st.newApplier(State{})
	if fresh {
		fill, err := st.root.Filler()
		if err != nil {
			return outcome{}, err
		}
		a.fill = fill
		defer func() { a.fill.Close() }()
	}
	if st.caseInsensitive {
		remote, err := st.listRemote(ctx)
		if err != nil {
			return outcome{}, err
		}
		plan := Reconcile(State{}, empty, remote, opts)
		st.logNotes(ctx, plan.Notes)
		a.next = plan.Next
		err = a.stream(ctx, filterKinds(plan.Actions, Download))
		st.state = keepState(a.next)
		return a.out, err
	}
	all := Remote{}
	write := func(page []api.Memory) {
		remote := Remote{}
		a.contents = map[string]api.Memory{}
		for _, m := range page {
			remote[m.Path] = RemoteMemory{ID: m.ID, SHA256: m.ContentSHA256}
			all[m.Path] = remote[m.Path]
			a.contents[m.ID] = m
		}
		plan := Reconcile(State{}, empty, remote, opts)
		st.logNotes(ctx, plan.Notes)
		maps.Copy(a.next, plan.Next)
		a.run(ctx, filterKinds(plan.Actions, Download), a.download)
		// Kept page by page: the store's state never exists whole as a
		// State while the pages download.
		for p, ps := range a.next {
			st.state.set(p, ps)
		}
		clear(a.next)
	}
	seq, ok, err := st.eachSnapshotPage(ctx, write)
	// A snapshot the server cut short (its read failed after the first
	// memories went out) is read again into an emptied folder: a fresh
	// mount's folder holds only what the read wrote. The server streams a
	// snapshot as it reads it, so such a failure can no longer be answered
	// with a status the client retries.
	for attempt := 2; fresh && ok && errors.Is(err, client.ErrSnapshotCut) && attempt <= snapshotAttempts && ctx.Err() == nil; attempt++ {
		st.log.WarnContext(ctx, "the server cut this store's snapshot short; what came of it is removed and the snapshot read again", "attempt", attempt, "error", err)
		if err = st.emptyFill(a); err != nil {
			return a.out, err
		}
		clear(all)
		st.state, a.out = keptState{}, outcome{}
		seq, ok, err = st.eachSnapshotPage(ctx, write)
	}
	if ok && err == nil {
		st.feed.reset(all)
		st.seq.Store(seq)
	}
	if !ok {
		err = st.eachFullPage(ctx, write)
	}
	a.contents = nil
	return a.out, err
}

// snapshotAttempts is how many times a fresh mount reads a snapshot the
// server keeps cutting short.
const snapshotAttempts = 3

// emptyFill removes everything a fresh mount's download wrote (all but the
// marker) and gives the applier a new Filler for the next read.
func (st *store) emptyFill(a *applier) error {
	a.fill.Close()
	entries, err := os.ReadDir(st.mount.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == MarkerName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(st.mount.Dir, e.Name())); err != nil {
			return err
		}
	}
	fill, err := st.root.Filler()
	if err != nil {
		return err
	}
	a.fill = fill
	return nil
}

// sync runs one sync cycle: scan, list, reconcile, apply.
func (st *store) sync(ctx context.Context, now time.Time, final bool) outcome {
	if st.root == nil {
		return outcome{}
	}
	st.step = "sync"
	if final {
		st.step = "final"
	}
	st.notes.begin()
	st.dropMark(ctx)
	local, err := Scan(st.root, st.cache, st.id)
	if err != nil {
		st.warn(ctx, "", "cannot scan the folder, so nothing of this store is synced until it can: make sure it is a real folder (not a symbolic link) that the worker can read", err)
		return outcome{failed: 1}
	}
	for _, ig := range local.Ignored {
		st.emit(ctx, Note{Level: slog.LevelInfo, Path: "/" + ig.Path, Msg: "this entry cannot be a memory, so it is not synced", Err: ig.Err, Persistent: true})
	}
	remote, err := st.listRemote(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{incomplete: true}
		}
		st.warn(ctx, "", "cannot list the store's memories, so it is not synced this time; the next sync retries (check that the server is reachable and the session may read this store)", err)
		return outcome{failed: 1}
	}
	plan := Reconcile(st.state.full(), local, remote, st.options(now, final))
	st.logNotes(ctx, plan.Notes)
	a := st.newApplier(plan.Next)
	if plan.Rebuild {
		if err := st.prepareRebuild(); err != nil {
			st.warn(ctx, "", "cannot rebuild the folder; the next sync retries", err)
			st.state = keepState(plan.Next)
			return outcome{failed: 1}
		}
		// The rebuild's fresh state is journaled first: the old one holds
		// the bases of files the rebuild has not brought back yet, which a
		// crash would leave to read as the agent's deletions.
		st.journalSends(ctx, plan)
		// Everything is downloaded, so the full listing is the cheap way.
		if err := a.stream(ctx, filterKinds(plan.Actions, Download)); err != nil && ctx.Err() == nil {
			st.warn(ctx, "", "cannot download the memories to rebuild the folder; the next sync retries", err)
		}
		st.state = keepState(a.next)
		st.writeJournal(ctx, a.next)
		return a.out
	}
	st.journalSends(ctx, plan)
	st.fault("planned")
	a.apply(ctx, plan.Actions)
	st.state = keepState(a.next)
	st.writeJournal(ctx, a.next)
	o := a.out
	if o.changes > 0 || o.failed > 0 {
		st.log.InfoContext(ctx, "memory store synced", "changes", o.changes, "failed", o.failed, "rehashed", local.Rehashed)
	}
	return o
}

// timed runs one step of the store and reports what it did to onSync.
func (st *store) timed(step string, fn func() outcome) outcome {
	start := time.Now()
	o := fn()
	st.report(step, start, o)
	return o
}

// report tells onSync what a step that started at start did, if the
// store's folder exists (before, no step moves anything).
func (st *store) report(step string, start time.Time, o outcome) {
	if st.onSync == nil || st.root == nil {
		return
	}
	st.onSync(SyncReport{
		MemoryStoreID: st.id, Step: step, Duration: time.Since(start),
		Changes: o.changes, Failed: o.failed, Conflicts: o.conflicts,
		BytesUploaded: o.uploaded, BytesDownloaded: o.downloaded,
	})
}

// fault calls the fault point of what the current step just did.
func (st *store) fault(what string) {
	if st.faultPoint != nil {
		st.faultPoint(st.step + "." + what)
	}
}

// journalSends journals, before a plan's changes are made, that each of
// its uploads, server deletes, downloads and local removals may happen: if
// the worker dies before their outcome is journaled, the next worker's
// first sync recognises them (see State.MarkSent, MarkDeleteSent,
// MarkFetching, MarkRemoveStarted), so an upload that landed reads as
// synced, not as a conflict with the agent's next edit, a file the worker
// downloaded reads as the server's, not as the agent's new file, and a
// file it removed as removed, not as the agent's deletion.
func (st *store) journalSends(ctx context.Context, plan Plan) {
	var pre State
	for _, act := range plan.Actions {
		if !act.Kind.IO() {
			continue
		}
		if pre == nil {
			pre = plan.Next.Clone()
		}
		switch act.Kind {
		case DeleteRemote:
			pre.MarkDeleteSent(act.Path)
		case RemoveLocal:
			pre.MarkRemoveStarted(act.Path)
		case Download:
			pre.MarkFetching(act.Path, act.RemoteSHA)
		default:
			pre.MarkSent(act.Path, act.Local.SHA256)
		}
	}
	if pre != nil {
		st.writeJournal(ctx, pre)
	}
}

// prepareRebuild makes sure the folder exists and holds this store's
// marker. Reconcile asks for a rebuild only when the folder is gone or
// holds nothing but a marker, so overwriting a wrong marker loses nothing.
func (st *store) prepareRebuild() error {
	_, err := confined.Create(st.mount.Dir)
	if errors.Is(err, fs.ErrExist) {
		_, err = confined.Open(st.mount.Dir) // a folder, not a symlink
	}
	if err != nil {
		return err
	}
	st.placed.Store(true)
	return st.root.WriteFile(MarkerName, MarkerContent(st.id), confined.Precondition{})
}

// flush uploads the local edits the last sync left behind, and nothing
// else: no downloads, no deletions, no removals, as the folder is about to
// go. A store with nothing to upload costs no request at all, which is the
// usual case after a clean final sync.
func (st *store) flush(ctx context.Context, now time.Time) outcome {
	if st.root == nil || st.mount.ReadOnly {
		return outcome{}
	}
	st.step = "flush"
	st.notes.begin()
	local, err := Scan(st.root, st.cache, st.id)
	if err != nil {
		st.warn(ctx, "", "cannot scan the folder, so its local edits, if any, are not uploaded before it is removed", err)
		return outcome{failed: 1}
	}
	if local.Marker != MarkerTrusted {
		// Nothing is uploaded from a folder that may not be the store's;
		// the last sync said so already.
		return outcome{}
	}
	var dirty []string
	for _, p := range slices.Sorted(maps.Keys(local.Files)) {
		f := local.Files[p]
		ps, _ := st.state.get(p)
		if f.Unsyncable == Syncable && (f.SHA256 != ps.Base || ps.Sent != "") && f.SHA256 != ps.Held {
			dirty = append(dirty, p)
		}
	}
	if len(dirty) == 0 {
		return outcome{}
	}
	remote, err := st.listRemote(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{incomplete: true, cutOff: len(dirty), cutPaths: dirty}
		}
		st.log.WarnContext(ctx, "cannot list the store's memories, so local edits are not uploaded before the folder is removed; they are lost",
			"error", err, "paths", dirty)
		return outcome{failed: len(dirty)}
	}
	plan := Reconcile(st.state.full(), local, remote, st.options(now, true))
	if plan.Rebuild {
		return outcome{}
	}
	var uploads []Action
	for _, act := range plan.Actions {
		switch act.Kind {
		case Create, Update:
			uploads = append(uploads, act)
		case Download:
			if slices.Contains(dirty, act.Path) {
				st.log.WarnContext(ctx, "this file's local edit is not uploaded at the end of the session: the memory changed on the server too, and the server version wins; "+
					"a copy of the edit is kept when the folder is removed", "path", act.Path)
			}
		}
	}
	a := st.newApplier(plan.Next)
	st.journalSends(ctx, Plan{Actions: uploads, Next: plan.Next})
	st.fault("planned")
	a.apply(ctx, uploads)
	st.state = keepState(a.next)
	st.writeJournal(ctx, a.next)
	// An upload that did not land — it failed, or the server refused it or
	// changed first, or the file changed while it was sent — is not on the
	// server; dispose keeps a copy. The time limit's cut-offs are End's to
	// report.
	var lost []string
	for _, act := range uploads {
		if a.next[act.Path].Base != act.Local.SHA256 && !slices.Contains(a.out.cutPaths, act.Path) {
			lost = append(lost, act.Path)
		}
	}
	if len(lost) > 0 {
		// Said every time: there is no later sync to retry these.
		st.log.WarnContext(ctx, "local edits could not be uploaded at the end of the session; a copy of each is kept when the folder is removed "+
			"(the messages above say why for each: a failed request, a refusal, or a server change that won)",
			"paths", lost)
	}
	return a.out
}

// listBasic reads the whole store's listing without content: what every
// sync compares the folder with, in one request per 100 memories.
func (st *store) listBasic(ctx context.Context) (Remote, error) {
	remote := Remote{}
	for item, err := range st.client.ListAllMemories(ctx, st.id, client.ListMemoriesParams{View: api.ViewBasic, Limit: basicPageLimit}) {
		if err != nil {
			return nil, err
		}
		if m := item.Memory; m != nil {
			remote[m.Path] = RemoteMemory{ID: m.ID, SHA256: m.ContentSHA256}
		}
	}
	return remote, nil
}

// eachFullPage reads the store's listing with content and hands it to fn a
// page (fullPageLimit memories) at a time, so a large store is never held
// in memory whole.
func (st *store) eachFullPage(ctx context.Context, fn func([]api.Memory)) error {
	page := make([]api.Memory, 0, fullPageLimit)
	for item, err := range st.client.ListAllMemories(ctx, st.id, client.ListMemoriesParams{View: api.ViewFull, Limit: fullPageLimit}) {
		if err != nil {
			return err
		}
		if item.Memory == nil {
			continue
		}
		if page = append(page, *item.Memory); len(page) == fullPageLimit {
			fn(page)
			page = page[:0]
		}
	}
	if len(page) > 0 {
		fn(page)
	}
	return nil
}

// noteLog remembers which persistent conditions the previous sync logged,
// so each is logged once while it lasts, and again if it comes back after
// going away. Safe for concurrent use: apply logs from several goroutines.
type noteLog struct {
	mu        sync.Mutex
	prev, cur map[string]bool
}

// begin starts a sync's round of logging.
func (n *noteLog) begin() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.prev, n.cur = n.cur, map[string]bool{}
}

// fresh records key for this round and reports whether the previous round
// did not have it.
func (n *noteLog) fresh(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cur[key] = true
	return !n.prev[key]
}

// logNotes logs a plan's notes.
func (st *store) logNotes(ctx context.Context, notes []Note) {
	for _, n := range notes {
		st.emit(ctx, n)
	}
}

// emit logs one note; a persistent one only if the previous round did not.
// The key leaves the error out on purpose: an error's text may carry a
// request id that differs every time.
func (st *store) emit(ctx context.Context, n Note) {
	if n.Persistent && !st.notes.fresh(fmt.Sprint(n.Level, "\x00", n.Path, "\x00", n.Msg)) {
		return
	}
	var attrs []slog.Attr
	if n.Path != "" {
		attrs = append(attrs, slog.String("path", n.Path))
	}
	if n.Err != nil {
		attrs = append(attrs, slog.Any("error", n.Err))
	}
	st.log.LogAttrs(ctx, n.Level, n.Msg, attrs...)
}

// warn logs a failure that the next sync retries, once while it repeats.
func (st *store) warn(ctx context.Context, path, msg string, err error) {
	st.emit(ctx, Note{Level: slog.LevelWarn, Path: path, Msg: msg, Err: err, Persistent: true})
}
