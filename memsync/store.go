package memsync

import (
	"context"
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

	"golang.org/x/sys/unix"

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
	state           State
	caseInsensitive bool
	// probeCase is SessionConfig.ProbeCase, or the filesystem's answer.
	probeCase func(*confined.Root) (bool, error)
	// onSync is SessionConfig.OnSync (nil: no reports).
	onSync func(SyncReport)
	// created: this Session made the folder (or adopted it), so End may
	// remove it.
	created bool
	notes   noteLog

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
	// journaled is the state the journal holds, so an unchanged state is
	// not written again.
	journaled State
	// placed: the worker wrote or removed files in the folder since its
	// filesystem was last flushed (set by apply's goroutines); the next
	// journal write flushes first.
	placed atomic.Bool
	// leftover is the journal of a leftover folder that Mount adopts.
	leftover *journal
	// mounting: the mount's download runs, so the journal says the folder
	// holds nothing of the agent's yet; disposing: the folder is being
	// removed, its content saved.
	mounting, disposing bool
	// adopted: the folder is one a crashed worker left, not yet disposed
	// of; a failed mount keeps it (see discard).
	adopted bool
	// feed is the server's listing kept from the change feed, and seq the
	// feed sequence it is at (read by the follower, hence atomic).
	feed remoteCache
	seq  atomic.Int64
	// advanced wakes the store's follower after each background sync.
	advanced chan struct{}
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
		state: State{},
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

// mountFix is the advice of every mount refusal about the parent folder.
const mountFix = `create it and give the worker's user write access to it (for the default mount root: sudo mkdir -p /mnt/memory && sudo chown "$USER" /mnt/memory), or run the worker with --mount-root pointing at a folder it can write to`

// mountError builds a mount refusal that names the store, the folder, what
// is wrong and what to do.
func (st *store) mountError(why, fix string) error {
	where := st.mount.Dir
	if st.mount.MountPath != "" && st.mount.MountPath != st.mount.Dir {
		where = fmt.Sprintf("%s (mount_path %s)", st.mount.Dir, st.mount.MountPath)
	}
	return fmt.Errorf("memory store %s cannot be mounted at %s: %s; %s", st.id, where, why, fix)
}

// leftoverFix is the advice of every refusal of something found at a
// store's folder.
const leftoverFix = "move it away or remove it, after checking it holds nothing you need"

// checkDir refuses a folder whose parent cannot take it, before anything is
// created, and reports whether something is already there: a leftover,
// which Mount adopts only if the journal beside it vouches for it (see
// checkLeftover), since files of unknown origin must never be uploaded as
// the agent's.
func (st *store) checkDir() (leftover bool, err error) {
	dir := st.mount.Dir
	if _, err := os.Lstat(dir); err == nil {
		return true, nil
	}
	parent := filepath.Dir(dir)
	fi, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, st.mountError(fmt.Sprintf("its parent folder %s does not exist", parent), fixFor(parent))
	case err != nil:
		return false, st.mountError(fmt.Sprintf("its parent folder %s cannot be looked at (%v)", parent, err), fixFor(parent))
	case !fi.IsDir():
		return false, st.mountError(fmt.Sprintf("its parent %s is not a folder", parent), fixFor(parent))
	}
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return false, st.mountError(fmt.Sprintf("the worker cannot create folders in its parent %s (%v)", parent, err), fixFor(parent))
	}
	return false, nil
}

// checkLeftover decides whether the folder found at the store's folder may
// be adopted: a live worker does not hold its state folder's lock, the
// journal beside it is this store's and this folder's, and the folder is a
// real folder whose marker names the store. Anything else is refused,
// leaving the folder and its state folder exactly as found. On success the
// lock is held and st.leftover set.
func (st *store) checkLeftover() error {
	dir := st.mount.Dir
	stateDir := StateDir(dir)
	if _, err := os.Lstat(stateDir); errors.Is(err, fs.ErrNotExist) {
		return st.mountError(fmt.Sprintf("something already exists there and no sync journal is beside it (%s), so it is not a folder a crashed worker left", stateDir),
			"it must not exist when the session starts: "+leftoverFix)
	}
	err := st.openState()
	if errors.Is(err, errLocked) {
		return st.mountError("another running worker serves that folder (it holds the lock in "+stateDir+")",
			"give each session its own folder: stop the other worker, or run this one with another --mount-root")
	}
	if err != nil {
		return st.mountError("something already exists there and "+err.Error(), leftoverFix)
	}
	refuse := func(why string) error {
		st.closeState(false)
		return st.mountError("something already exists there and "+why, leftoverFix+"; its state folder "+stateDir+" goes with it")
	}
	j, err := st.readJournal()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("its state folder holds no sync journal, so it is not a folder a crashed worker left")
	case err != nil:
		return refuse(fmt.Sprintf("its sync journal cannot be read (%v)", err))
	case j.MemoryStoreID != st.id:
		return refuse(fmt.Sprintf("its sync journal belongs to memory store %s, not this one", j.MemoryStoreID))
	case j.Folder != dir:
		return refuse(fmt.Sprintf("its sync journal belongs to the folder %s, not this one", j.Folder))
	}
	root, err := confined.Open(dir)
	if err != nil {
		return refuse(fmt.Sprintf("it is not a folder the worker can use (%v)", err))
	}
	if m := readMarker(root, st.id); m != MarkerTrusted {
		return refuse(fmt.Sprintf("its marker file %s is %v, so it may not be this store's folder", MarkerName, m))
	}
	st.root, st.leftover = root.WithoutSync(), &j
	return nil
}

// adopt takes over the leftover folder checkLeftover vouched for. Left by
// an earlier run of this session, it becomes this run's folder: a sync
// against the journaled state uploads what the agent wrote before the crash
// and downloads what changed meanwhile, by the usual rules. Left by another
// session, which has ended since, its edits are uploaded (flush) and copies
// kept of what cannot be, then it is removed and the store mounted afresh.
func (st *store) adopt(ctx context.Context, now time.Time) error {
	j := st.leftover
	st.leftover = nil
	// Adopted from the start: until its edits are saved, the folder may hold
	// the only copy of what the agent wrote, so a failure below leaves it,
	// with its journal, for the next claim (see discard).
	st.state, st.journaled, st.created, st.adopted = j.State, j.State.Clone(), true, true
	st.notes.begin()
	if n := removeTempFiles(st.root); n > 0 {
		st.log.InfoContext(ctx, "removed the temporary files of writes the crash interrupted (their content never replaced any file)", "removed", n)
	}
	var err error
	if st.caseInsensitive, err = st.probeCase(st.root); err != nil {
		return st.mountError(fmt.Sprintf("the folder's filesystem cannot be probed (%v)", err), "make sure the worker can create files in it")
	}
	if j.Mounting || j.Disposing {
		why := "a mount a crashed worker had not finished: it holds only what was downloaded, nothing of the agent's"
		if j.Disposing {
			why = "a session's end a crashed worker had not finished: its edits were saved and the folder was being removed"
		}
		st.log.InfoContext(ctx, "found the folder of "+why+"; the store is mounted afresh")
		if err := os.RemoveAll(st.mount.Dir); err != nil {
			return st.mountError(fmt.Sprintf("the folder of %s cannot be removed (%v)", why, err), leftoverFix)
		}
		st.state, st.journaled, st.created, st.adopted = State{}, nil, false, false
		return st.mountStore(ctx, now)
	}
	if j.SessionID == st.sessionID {
		// The change feed is followed on from the journal's sequence, so
		// the sync below reads only what changed since the crash, and live
		// mode (the follower, write-through uploads) works on an adopted
		// folder as on a fresh one. A journal without it (written before
		// the first download finished, or by an older worker) starts the
		// copy from a full listing. A server without the feed is listed as
		// ever.
		if j.Feed != nil {
			st.feed.reset(j.Feed.remote())
			st.seq.Store(j.Feed.Sequence)
		} else if _, err := st.relist(ctx); err != nil && !withoutExtensions(err) {
			st.log.DebugContext(ctx, "cannot start following the change feed; the store is listed in full at each sync instead", "error", err)
		}
		st.log.InfoContext(ctx, "adopting the folder an interrupted run of this session left: syncing it against its journal, so the agent's edits are uploaded and nothing is lost")
		o := st.sync(ctx, now, false)
		st.log.InfoContext(ctx, "memory store mounted (adopted)", "changes", o.changes, "failed", o.failed, "read_only", st.mount.ReadOnly)
		return nil
	}
	st.log.InfoContext(ctx, "found the folder a crashed worker left for an earlier session: uploading its edits, keeping copies of what cannot be uploaded, then mounting the store afresh",
		"earlier_session_id", j.SessionID)
	o := st.flush(ctx, now)
	st.log.InfoContext(ctx, "the earlier session's folder was flushed", "earlier_session_id", j.SessionID, "uploaded", o.changes, "failed", o.failed)
	if st.dispose(ctx) != disposeRemoved {
		return st.mountError("the folder an earlier session left could not be removed after its edits were saved (the lines above say why)", leftoverFix)
	}
	st.state, st.adopted, st.disposing = State{}, false, false
	return st.mountStore(ctx, now)
}

// fixFor is mountFix for a parent other than the default.
func fixFor(parent string) string {
	if parent == "/mnt/memory" {
		return mountFix
	}
	return fmt.Sprintf(`make %s a folder the worker's user can write to (sudo mkdir -p %q && sudo chown "$USER" %q), or run the worker with --mount-root pointing at a folder it can write to`,
		parent, parent, parent)
}

// mountStore creates the folder and its marker and downloads every memory.
func (st *store) mountStore(ctx context.Context, now time.Time) error {
	if st.lock == nil {
		err := st.openState()
		if errors.Is(err, errLocked) {
			return st.mountError("another running worker is mounting a folder there (it holds the lock in "+StateDir(st.mount.Dir)+")",
				"give each session its own folder: stop the other worker, or run this one with another --mount-root")
		}
		if err != nil {
			return st.mountError(err.Error(), fixFor(filepath.Dir(st.mount.Dir)))
		}
	}
	root, err := confined.Create(st.mount.Dir)
	switch {
	case errors.Is(err, fs.ErrExist):
		return st.mountError("something appeared there while the session was starting",
			"it must not exist when the session starts: move it away or remove it, after checking it holds nothing you need")
	case err != nil:
		return st.mountError(fmt.Sprintf("the folder cannot be created (%v)", err), fixFor(filepath.Dir(st.mount.Dir)))
	}
	// The folder's writes are atomic for the agent but not fsynced one by
	// one: what the worker writes there is a copy of the server's, and the
	// folder is flushed once before a journal that names them is written
	// (see writeJournal).
	st.root, st.created = root.WithoutSync(), true
	st.step = "mount"
	st.notes.begin()
	if err := root.WriteFile(MarkerName, MarkerContent(st.id), confined.Precondition{Absent: true}); err != nil {
		return st.mountError(fmt.Sprintf("its marker file cannot be written (%v)", err), "make sure nothing else writes to the folder while the session starts")
	}
	if st.caseInsensitive, err = st.probeCase(root); err != nil {
		return st.mountError(fmt.Sprintf("the folder's filesystem cannot be probed (%v)", err), "make sure the worker can create files in it")
	}
	if st.caseInsensitive {
		st.log.InfoContext(ctx, "this folder's filesystem ignores letter case, so memories whose paths differ only in case are not synced here (each such case is logged)")
	}
	// Journaled before the first download, as a mount in progress: a worker
	// killed mid-download leaves a folder the next one recognises as
	// holding only downloads (the agent starts after the mount), which it
	// replaces — rather than refusing it, or taking the files for the
	// agent's and uploading them over what the server changed since.
	st.mounting = true
	st.writeJournal(ctx, State{})
	start := time.Now()
	o, err := st.download(ctx, now)
	st.report("mount", start, o)
	if err != nil {
		return fmt.Errorf("memory store %s: cannot download its memories into %s: %w; check that the server is reachable and that the session may read this store", st.id, st.mount.Dir, err)
	}
	st.mounting, st.journaled = false, nil // written even if the state is still empty
	st.writeJournal(ctx, st.state)
	st.log.InfoContext(ctx, "memory store mounted", "downloaded", o.changes, "failed", o.failed, "read_only", st.mount.ReadOnly)
	return nil
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
func (st *store) download(ctx context.Context, now time.Time) (outcome, error) {
	empty := Local{Marker: MarkerTrusted}
	opts := st.options(now, false)
	if st.caseInsensitive {
		remote, err := st.listRemote(ctx)
		if err != nil {
			return outcome{}, err
		}
		plan := Reconcile(State{}, empty, remote, opts)
		st.logNotes(ctx, plan.Notes)
		a := st.newApplier(plan.Next)
		err = a.stream(ctx, filterKinds(plan.Actions, Download))
		st.state = a.next
		return a.out, err
	}
	a := st.newApplier(State{})
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
	}
	seq, ok, err := st.eachSnapshotPage(ctx, write)
	if ok && err == nil {
		st.feed.reset(all)
		st.seq.Store(seq)
	}
	if !ok {
		err = st.eachFullPage(ctx, write)
	}
	a.contents = nil
	st.state = a.next
	return a.out, err
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
	plan := Reconcile(st.state, local, remote, st.options(now, final))
	st.logNotes(ctx, plan.Notes)
	a := st.newApplier(plan.Next)
	if plan.Rebuild {
		if err := st.prepareRebuild(); err != nil {
			st.warn(ctx, "", "cannot rebuild the folder; the next sync retries", err)
			st.state = plan.Next
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
		st.state = a.next
		st.writeJournal(ctx, st.state)
		return a.out
	}
	st.journalSends(ctx, plan)
	st.fault("planned")
	a.apply(ctx, plan.Actions)
	st.state = a.next
	st.writeJournal(ctx, st.state)
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
		f, ps := local.Files[p], st.state[p]
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
	plan := Reconcile(st.state, local, remote, st.options(now, true))
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
	st.state = a.next
	st.writeJournal(ctx, st.state)
	// An upload that did not land — it failed, or the server refused it or
	// changed first, or the file changed while it was sent — is not on the
	// server; dispose keeps a copy. The time limit's cut-offs are End's to
	// report.
	var lost []string
	for _, act := range uploads {
		if st.state[act.Path].Base != act.Local.SHA256 && !slices.Contains(a.out.cutPaths, act.Path) {
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

// disposal is what End did with a store's folder.
type disposal uint8

const (
	disposeNothing disposal = iota // not created by this Session, or already gone
	disposeRemoved
	disposeKept
)

// dispose removes the folder if this Session created it, unless its marker
// is missing or altered and it holds files: such a folder may have been
// replaced by someone else's, and is left exactly as found.
func (st *store) dispose(ctx context.Context) disposal {
	if !st.created {
		return disposeNothing
	}
	if readMarker(st.root, st.id) != MarkerTrusted {
		files, skipped, err := st.root.Walk()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			st.created = false
			return disposeNothing
		case err != nil:
			st.log.WarnContext(ctx, "the folder was kept: it cannot be inspected, so it may not be the one this session created; check it and remove it before this store is mounted here again",
				"error", err)
			return disposeKept
		}
		n := len(skipped)
		for _, f := range files {
			if f.Path != MarkerName {
				n++
			}
		}
		if n > 0 {
			st.log.WarnContext(ctx, fmt.Sprintf("the folder was kept: its marker file %s is missing or not this store's and it holds %d entries, so it may not be the folder this session created; "+
				"it was left exactly as found: check what it holds and remove it before this store is mounted here again", MarkerName, n))
			return disposeKept
		}
	}
	if !st.keepUnsaved(ctx) {
		st.closeState(false)
		return disposeKept
	}
	// Journaled first: a worker killed while the files go must leave a
	// folder whose missing files the next one does not take for the
	// agent's deletions.
	st.disposing, st.journaled = true, nil
	if !st.writeJournal(ctx, st.state) {
		st.log.WarnContext(ctx, "the folder was kept: its removal could not be journaled (the line above says why), and a removal cut short without it could read as deletions; remove it by hand before this store is mounted here again")
		st.closeState(false)
		return disposeKept
	}
	st.step = "end"
	st.fault("disposing")
	if err := os.RemoveAll(st.mount.Dir); err != nil {
		st.log.WarnContext(ctx, "the folder could not be removed; remove it by hand before this store is mounted here again", "error", err)
		st.closeState(false)
		return disposeKept
	}
	st.created = false
	st.closeState(true)
	return disposeRemoved
}

// keepUnsaved keeps a copy, under the state folder, of every file whose
// content the server does not hold as far as the last sync knows — an
// upload that failed or lost, content the server refused or that cannot
// be a memory, a change in a read-only store — so that removing the folder
// destroys nothing the agent wrote. It reports whether every such file was
// kept; the folder must stay otherwise.
func (st *store) keepUnsaved(ctx context.Context) bool {
	local, err := Scan(st.root, st.cache, st.id)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		st.log.ErrorContext(ctx, "the folder was kept: it cannot be scanned, so its unsynced edits cannot be saved before it is removed; copy what you need from it, then remove it", "error", err)
		return false
	}
	ok := true
	for _, p := range slices.Sorted(maps.Keys(local.Files)) {
		if local.Files[p].SHA256 == st.state[p].Base {
			continue
		}
		where, err := st.keepCopy(p, "")
		if err != nil {
			st.log.ErrorContext(ctx, "the folder was kept: this file's edit is not on the server and no copy of it could be kept; copy it somewhere safe, then remove the folder",
				"path", p, "error", err)
			ok = false
			continue
		}
		st.log.WarnContext(ctx, "this file's content is not on the server, so a copy is kept before the folder is removed; restore it from kept_copy if it matters",
			"path", p, "kept_copy", where)
	}
	return ok
}

// discard undoes a mount that failed. A folder Mount created holds nothing
// but what it downloaded, and is removed with its state folder; an adopted
// one is left as found, with its journal, for the next claim to adopt.
func (st *store) discard(ctx context.Context) {
	if st.created && !st.adopted {
		if err := os.RemoveAll(st.mount.Dir); err != nil {
			st.log.WarnContext(ctx, "the folder of a failed mount could not be removed; remove it by hand before this store is mounted here again", "error", err)
			st.closeState(false)
			return
		}
		st.created, st.root = false, nil
		st.closeState(true)
		return
	}
	st.closeState(false)
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
