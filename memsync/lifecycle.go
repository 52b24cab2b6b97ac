package memsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/confined"
)

// A store's lifecycle: the phases of its folder, the one place that moves
// between them (enter), and the steps that do — mount, adopt, dispose,
// discard. The syncs in between are store.go's.

// phase is where a store's folder is in its life. Each phase says what the
// folder holds, and so what End and a failed Mount may do with it and what
// the journal tells the next worker if this one dies there.
type phase uint8

const (
	// phaseUnmounted: nothing of this Session's is at the folder — before
	// Mount, and again once the folder is removed. End leaves it alone.
	phaseUnmounted phase = iota
	// phaseMounting: Mount created the folder and is downloading into it.
	// It holds nothing of the agent's yet, so the journal says so
	// (journal.Mounting) and a worker that finds it replaces it.
	phaseMounting
	// phaseMounted: Mount filled the folder; the agent works in it and the
	// syncs run. Another store's failed mount removes it: it holds nothing
	// but downloads yet.
	phaseMounted
	// phaseAdopted: the folder is a leftover a crashed worker left, taken
	// over with its journal; the agent works in it and the syncs run. It
	// may hold the only copy of edits, so a failed mount leaves it, with
	// its journal, for the next claim.
	phaseAdopted
	// phaseDisposing: End saved the folder's edits (uploaded, or copies
	// kept) and is removing it. The journal says so (journal.Disposing):
	// what is left is removed by the next worker, not synced, since a
	// file already gone is no deletion.
	phaseDisposing
)

func (p phase) String() string {
	switch p {
	case phaseUnmounted:
		return "unmounted"
	case phaseMounting:
		return "mounting"
	case phaseMounted:
		return "mounted"
	case phaseAdopted:
		return "adopted"
	case phaseDisposing:
		return "disposing"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// next lists the phases a store may enter from p: the whole lifecycle in
// one place.
func (p phase) next() []phase {
	switch p {
	case phaseUnmounted:
		// Mount creates a folder, or adopts the leftover found there.
		return []phase{phaseMounting, phaseAdopted}
	case phaseMounting:
		// The download finished; or it failed and the folder is discarded.
		return []phase{phaseMounted, phaseUnmounted}
	case phaseMounted:
		// End saves and removes the folder, or finds it gone; a failed
		// Mount discards it.
		return []phase{phaseDisposing, phaseUnmounted}
	case phaseAdopted:
		// Likewise; and a leftover of an unfinished mount or end is
		// removed before the store is mounted afresh.
		return []phase{phaseDisposing, phaseUnmounted}
	case phaseDisposing:
		// The folder is removed.
		return []phase{phaseUnmounted}
	}
	return nil
}

// holdsFolder reports whether the folder is this Session's to dispose of.
func (p phase) holdsFolder() bool { return p != phaseUnmounted }

// madeByMount reports whether the folder holds nothing but what this
// Session's mount downloaded, so that a failed Mount may remove it.
func (p phase) madeByMount() bool { return p == phaseMounting || p == phaseMounted }

// enter moves the store to phase next. A move next does not allow is
// a bug in this package: it is logged loudly, and made anyway, since the
// phase must say what was actually done to the folder.
func (st *store) enter(ctx context.Context, next phase) {
	if !slices.Contains(st.phase.next(), next) {
		st.log.ErrorContext(ctx, "memsync bug: a store's folder moved between phases its lifecycle does not allow; please report it",
			"from", st.phase.String(), "to", next.String())
	}
	st.phase = next
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
// real folder whose marker names the store; on success the lock is held
// and st.leftover set. A folder a mount had only begun (no journal, nothing
// in it but this store's marker and temporary files) is removed instead,
// and the store mounted afresh. Anything else is refused, leaving the
// folder and its state folder exactly as found.
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
	case errors.Is(err, fs.ErrNotExist) && st.onlyBegun():
		// A mount's first steps (the folder, its marker) come before its
		// first journal: a worker killed between them leaves this, which
		// holds nothing of anyone's, and the store is mounted afresh.
		st.log.Info("found the folder of a mount a stopped worker had only begun (no journal yet, nothing in it); the store is mounted afresh")
		if err := os.RemoveAll(dir); err != nil {
			return refuse(fmt.Sprintf("it is the empty folder of a mount a stopped worker had only begun, and it cannot be removed (%v)", err))
		}
		return nil
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

// onlyBegun reports whether the store's folder holds nothing but what a
// mount writes before its first journal: at most this store's marker, and
// temporary files of writes cut short. Anything else, or a folder that
// cannot be looked into, is not.
func (st *store) onlyBegun() bool {
	root, err := confined.Open(st.mount.Dir)
	if err != nil {
		return false
	}
	files, skipped, err := root.Walk()
	if err != nil {
		return false
	}
	for _, f := range files {
		if f.Path != MarkerName || readMarker(root, st.id) != MarkerTrusted {
			return false
		}
	}
	for _, s := range skipped {
		if !errors.Is(s.Err, confined.ErrTempFile) {
			return false
		}
	}
	return true
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
	st.state, st.journaled = keepState(j.State), stateSum(j.State)
	if j.UnflushedBoot != "" {
		// A mount's journal from this boot: its files are in the page
		// cache, not known on disk, so the next journal flushes them and
		// drops the mark even if the state is unchanged.
		st.unflushed = true
		st.placed.Store(true)
	}
	st.enter(ctx, phaseAdopted)
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
		if j.lostBoot {
			why = "a mount whose downloads the machine may have lost when it restarted (its journal was written before they were flushed to disk, and no sync had flushed them since): anything the agent wrote there in the seconds before had not been synced"
		}
		if j.Disposing {
			why = "a session's end a crashed worker had not finished: its edits were saved and the folder was being removed"
		}
		st.log.InfoContext(ctx, "found the folder of "+why+"; the store is mounted afresh")
		if err := os.RemoveAll(st.mount.Dir); err != nil {
			return st.mountError(fmt.Sprintf("the folder of %s cannot be removed (%v)", why, err), leftoverFix)
		}
		st.state, st.journaled = keptState{}, nil
		st.enter(ctx, phaseUnmounted)
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
			st.feed.reset(j.Feed.Memories)
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
	st.state = keptState{}
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
	//
	// Nothing the mount writes before its download is journaled needs to
	// outlive a crash of the machine on its own: the folder holds nothing
	// of the agent's yet (it starts after the mount), so a folder a crash
	// left half made is one the next worker replaces, or refuses with what
	// to do, never one whose edits it loses. So the state folder, the
	// folder, its marker and the first journal are not flushed one by one
	// (five disk flushes a mount, each a wait for everyone's writes when
	// many sessions start together); placed makes the flush before the
	// download's journal cover them all.
	st.root = root.WithoutSync()
	st.placed.Store(true)
	// Journaled (at the first journal write below) as a mount in
	// progress, before the first download: a worker killed mid-download
	// leaves a folder the next one recognises as holding only downloads
	// (the agent starts after the mount), which it replaces — rather than
	// refusing it, or taking the files for the agent's and uploading them
	// over what the server changed since.
	st.enter(ctx, phaseMounting)
	st.step = "mount"
	st.notes.begin()
	if err := st.root.WriteFile(MarkerName, MarkerContent(st.id), confined.Precondition{Absent: true}); err != nil {
		return st.mountError(fmt.Sprintf("its marker file cannot be written (%v)", err), "make sure nothing else writes to the folder while the session starts")
	}
	if st.caseInsensitive, err = st.probeCase(root); err != nil {
		return st.mountError(fmt.Sprintf("the folder's filesystem cannot be probed (%v)", err), "make sure the worker can create files in it")
	}
	if st.caseInsensitive {
		st.log.InfoContext(ctx, "this folder's filesystem ignores letter case, so memories whose paths differ only in case are not synced here (each such case is logged)")
	}
	// Once the journal says the mount is in progress, the downloads go
	// straight to their names (see download): a file a kill cuts short is
	// in a folder the next worker removes whole. Without that journal a
	// kill would leave a folder that is refused, so then each file is
	// written whole or not at all, as a sync writes it.
	st.journaled = nil // written whatever was journaled before: it must say mounting
	fresh := st.stateRoot != nil && st.writeJournal(ctx, State{})
	start := time.Now()
	o, err := st.download(ctx, now, fresh)
	st.report("mount", start, o)
	if err != nil {
		return fmt.Errorf("memory store %s: cannot download its memories into %s: %w; check that the server is reachable and that the session may read this store", st.id, st.mount.Dir, err)
	}
	st.enter(ctx, phaseMounted)
	// The journal naming the downloads is written without the flush it
	// would wait for (a syncfs, which waits for every session's writes on
	// the filesystem), so the agent starts sooner: it carries the boot
	// instead, and live mode as it starts, or else the first sync, flushes
	// and drops it (dropMark), server or no server. A worker
	// killed meanwhile leaves the files in the page cache, so its journal
	// is as good as a flushed one; after a machine crash, which may have
	// lost files, it reads as a mount in progress (journal.settle).
	st.journaled = nil // written even if the state is still empty
	st.skipFlush = true
	st.writeJournal(ctx, st.state.full())
	st.log.InfoContext(ctx, "memory store mounted", "downloaded", o.changes, "failed", o.failed, "read_only", st.mount.ReadOnly)
	return nil
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
	if !st.phase.holdsFolder() {
		return disposeNothing
	}
	if readMarker(st.root, st.id) != MarkerTrusted {
		files, skipped, err := st.root.Walk()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			st.enter(ctx, phaseUnmounted)
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
	st.enter(ctx, phaseDisposing)
	st.journaled = nil
	if !st.writeJournal(ctx, State{}) { // a disposing journal holds no state (see writeJournal)
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
	st.enter(ctx, phaseUnmounted)
	st.closeState(true)
	return disposeRemoved
}

// release lets go of what the store knew of its folder and the server —
// its state, the hash cache of its files, its copy of the listing — once
// End is done with it: nothing reads them afterwards, and a session's
// other stores may still be ending.
func (st *store) release() {
	st.state, st.cache, st.feed = keptState{}, nil, remoteCache{}
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
		if ps, _ := st.state.get(p); local.Files[p].SHA256 == ps.Base {
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
	if st.phase.madeByMount() {
		if err := os.RemoveAll(st.mount.Dir); err != nil {
			st.log.WarnContext(ctx, "the folder of a failed mount could not be removed; remove it by hand before this store is mounted here again", "error", err)
			st.closeState(false)
			return
		}
		st.root = nil
		st.enter(ctx, phaseUnmounted)
		st.closeState(true)
		return
	}
	st.closeState(false)
}
