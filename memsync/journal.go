package memsync

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/confined"
)

// A store's folder is a working copy, but the agent's edits in it exist
// nowhere else until a sync uploads them. So that a worker killed at any
// moment loses none of them, each folder has a state folder beside it that
// only the worker uses (the agent's sandbox shows it the mount, never its
// siblings):
//
//	/mnt/memory/notes             the store's folder, as the agent sees it
//	/mnt/memory/.notes.memstore/  its state folder:
//	    journal.json              the sync state (State) as of the last sync, written durably
//	    lock                      held (flock) by the worker serving the folder
//	    kept/                     copies of local edits that lost to the server
//
// The journal is what lets a later worker adopt a leftover folder instead of
// refusing it: with the state the crashed worker last synced from, the next
// sync tells the agent's edits (uploaded) from the server's changes
// (downloaded), by the usual rules. The lock tells a leftover from a folder a
// live worker still serves: the kernel releases it when its holder dies.
const (
	stateDirSuffix = ".memstore"
	journalName    = "journal.json"
	lockName       = "lock"
	keptName       = "kept"
	// journalVersion is the first field of the journal; a journal of
	// another version is not trusted. journalVersionMarked is a journal
	// that carries UnflushedBoot: a worker that predates the mark refuses
	// it rather than trusting files a restart may have lost.
	journalVersion       = 1
	journalVersionMarked = 2
)

// StateDir returns the state folder of the store folder dir.
func StateDir(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+stateDirSuffix)
}

// journal is the durable record of one mount. It names the store and the
// folder it belongs to, so a journal is only ever applied to its own
// folder, and the session that wrote it, so a worker can tell a session
// re-claimed after a crash (adopt and go on) from a session that has ended
// since (upload its edits, then remove the folder). Fields added later
// need no new version: readers ignore unknown fields, and a journal
// without Feed is adopted with a full listing.
type journal struct {
	Version       int    `json:"version"`
	MemoryStoreID string `json:"memory_store_id"`
	Folder        string `json:"folder"`
	SessionID     string `json:"session_id,omitempty"`
	// Mounting: the mount's download had not finished, so the agent had
	// not started and the folder holds only what the worker downloaded.
	Mounting bool `json:"mounting,omitempty"`
	// Disposing: the session's memory had ended — its edits uploaded, or
	// copies kept — and the folder was being removed; what is left of it
	// is to be removed, not synced (a file already gone is no deletion).
	Disposing bool `json:"disposing,omitempty"`
	// UnflushedBoot: the files this journal names were not yet flushed to
	// disk when it was written (a mount's first journal; see mountStore),
	// so it is trusted only within the boot of the machine it names: a
	// killed worker leaves the page cache, and so the files, as they were,
	// while a machine that restarted since may have lost any of them. The
	// next journal written flushes first and drops the mark.
	UnflushedBoot string       `json:"unflushed_boot,omitempty"`
	State         State        `json:"state"`
	Feed          *journalFeed `json:"feed,omitempty"`
	// lostBoot: UnflushedBoot names another boot, so the folder is taken
	// for a mount in progress (Mounting is set too); not written.
	lostBoot bool
}

// known reports whether this worker reads the journal's version: the mark
// only on the version that says it carries one.
func (j *journal) known() bool {
	return j.Version == journalVersion && j.UnflushedBoot == "" || j.Version == journalVersionMarked && j.UnflushedBoot != ""
}

// settle makes a journal read from disk say what can be trusted of it: one
// written without a flush in a boot other than this one is a mount in
// progress, since the files it names may be lost or cut short.
func (j *journal) settle() {
	if j.UnflushedBoot != "" && j.UnflushedBoot != bootID() {
		j.Mounting, j.lostBoot = true, true
	}
}

// journalFeed is the store's copy of the server's listing and the change
// feed sequence it is exact at (see remoteCache), so that an adopted
// folder resumes following the feed where the crashed worker was: its
// first sync is one feed request, not a full listing. The two are always
// written as a pair taken at one moment; an older pair is as good as a
// newer one, since the feed replays whatever came after it.
type journalFeed struct {
	Sequence int64 `json:"sequence"`
	// Memories is the copy itself, written as it is rather than copied
	// into a type of the journal's own: a copy of every store's listing at
	// each journal write was garbage the size of the listing.
	Memories Remote `json:"memories"`
}

// journalReadLimit bounds the journal read: 10,000 memories with every
// field set fit in a few megabytes.
const journalReadLimit = 64 << 20

// keptReadLimit bounds the copy of a losing local edit. A memory is at most
// 100 KiB; a file far past that is no agent's note, and is left in place
// rather than copied or overwritten.
const keptReadLimit = 16 << 20

// errLocked is openState's answer when another live process holds the
// state folder's lock.
var errLocked = errors.New("another running worker serves this folder")

// openState opens (creating it if needed) the store's state folder, takes
// its lock, and removes the temporary files of an interrupted journal or
// kept-copy write.
func (st *store) openState() error {
	dir := StateDir(st.mount.Dir)
	// A state folder made here is made durable by the flush before the
	// mount's download is journaled (see mountStore), not on its own.
	root, err := confined.Create(dir)
	if errors.Is(err, fs.ErrExist) {
		root, err = confined.Open(dir)
	}
	if err != nil {
		return fmt.Errorf("its state folder %s cannot be opened (%w)", dir, err)
	}
	f, err := takeLock(filepath.Join(dir, lockName))
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	if err != nil {
		return fmt.Errorf("the lock file of its state folder %s cannot be locked (%w)", dir, err)
	}
	st.stateRoot, st.lock = root, f
	removeTempFiles(root)
	return nil
}

// takeLock opens the lock file at path (creating it) and takes its lock
// without waiting: unix.EWOULDBLOCK while another process holds it. The
// holder that finishes a folder removes the lock file by name before it
// lets go, so a lock won on a file opened just before that removal would
// be a lock on a file nobody else can find: another process could create
// the file anew and lock it too. takeLock checks that the file it locked
// is still the one at path, and starts over when it is not.
func takeLock(path string) (*os.File, error) {
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, err
		}
		if stillAt(f, path) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%s was removed and made again each time it was locked; another worker is finishing this folder: %w", path, unix.EWOULDBLOCK)
}

// stillAt reports whether the open file f is the file at path now (the
// same inode on the same device).
func stillAt(f *os.File, path string) bool {
	var open, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &open) != nil || unix.Lstat(path, &named) != nil {
		return false
	}
	return open.Dev == named.Dev && open.Ino == named.Ino
}

// closeState releases the lock; with remove set (the folder is gone) it
// also removes the journal and the lock file, and the state folder if no
// kept copy is in it.
func (st *store) closeState(remove bool) {
	if st.lock == nil {
		return
	}
	dir := StateDir(st.mount.Dir)
	if remove {
		_ = os.Remove(filepath.Join(dir, journalName))
		_ = os.Remove(filepath.Join(dir, lockName))
		_ = os.Remove(filepath.Join(dir, keptName)) // only if empty
		_ = os.Remove(dir)                          // likewise
	}
	_ = st.lock.Close()
	st.lock, st.stateRoot, st.journaled = nil, nil, nil
}

// removeTempFiles removes what interrupted atomic writes left in root:
// their content never reached the name it was written for, so nothing of
// anyone's is lost.
func removeTempFiles(root *confined.Root) int {
	_, skipped, err := root.Walk()
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range skipped {
		if errors.Is(s.Err, confined.ErrTempFile) && root.RemoveFile(s.Path, confined.Precondition{}, false) == nil {
			n++
		}
	}
	return n
}

// readJournal reads the journal beside the store's folder; an error
// matching fs.ErrNotExist when there is none.
func (st *store) readJournal() (journal, error) {
	var j journal
	data, err := st.stateRoot.ReadFile(journalName, journalReadLimit)
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return j, fmt.Errorf("%s is not a journal (%w)", filepath.Join(StateDir(st.mount.Dir), journalName), err)
	}
	if !j.known() {
		return j, fmt.Errorf("%s has version %d, not %d or %d", filepath.Join(StateDir(st.mount.Dir), journalName), j.Version, journalVersion, journalVersionMarked)
	}
	if j.State == nil {
		j.State = State{}
	}
	j.settle()
	return j, nil
}

// writeJournal records state durably (temporary file, fsync, rename, fsync
// of the state folder), unless it is what the journal already holds; a
// mount's journals, which name no file yet, are written without those
// flushes (see mountStore). A
// failure is logged: the sync itself went through, only a crash before the
// next successful write would leave the folder to be refused.
//
// The files the worker placed in or removed from the folder since the last
// journal are made durable first (the folder's own writes are not fsynced
// one by one): after a machine crash the journal must never name a file
// the disk lost — adoption would take it for the agent's deletion and
// delete the memory — nor a content the disk did not keep, which would
// read as the agent's edit.
// It reports whether the journal holds state.
func (st *store) writeJournal(ctx context.Context, state State) bool {
	if st.stateRoot == nil {
		return true
	}
	sum := stateSum(state)
	if st.journaled != nil && *st.journaled == *sum && !st.unflushed {
		return true
	}
	// The journal of a mount in progress names no file and, until the
	// download is journaled, need not outlive a crash of the machine
	// (see mountStore): it is written without a flush of its own. Nor is
	// the one naming the mount's downloads, once: it carries this boot's
	// id instead (journal.UnflushedBoot), where the boot can be told.
	mounting := st.phase == phaseMounting
	var boot string
	if st.skipFlush {
		boot, st.skipFlush = bootID(), false
	}
	lazy := mounting || boot != ""
	if st.placed.Load() && !lazy {
		if err := flushFolder(st.mount.Dir); err != nil {
			st.warn(ctx, "", "cannot flush the folder's files to disk, so the sync journal is not updated (it must never name a file a machine crash could take back); the next sync retries (check the disk)", err)
			return false
		}
		st.placed.Store(false)
		st.fault("flushed")
	}
	version := journalVersion
	if boot != "" {
		version = journalVersionMarked
	}
	j := journal{Version: version, MemoryStoreID: st.id, Folder: st.mount.Dir, SessionID: st.sessionID,
		Mounting: mounting, Disposing: st.phase == phaseDisposing, UnflushedBoot: boot, State: state}
	// What is left of a folder being removed is removed, never synced (see
	// adopt): its caller passes no state, and the listing, which would be
	// read by no one, is left out too.
	if !j.Disposing && st.feed.on {
		j.Feed = &journalFeed{Sequence: st.seq.Load(), Memories: st.feed.remote}
	}
	data, err := json.Marshal(j)
	if err == nil {
		root := st.stateRoot
		if lazy {
			root = root.WithoutSync()
		}
		err = root.WriteFile(journalName, data, confined.Precondition{})
	}
	if err != nil {
		st.warn(ctx, "", fmt.Sprintf("cannot write the sync journal in %s; if the worker stops abruptly before the next sync writes it, the folder is refused instead of adopted (check that the disk has room and the folder is writable)",
			StateDir(st.mount.Dir)), err)
		return false
	}
	st.journaled, st.unflushed = sum, boot != ""
	return true
}

// dropMark replaces a journal written without a flush (UnflushedBoot)
// with a flushed one, whatever else happens: it needs only the local disk,
// so the mark does not outlive the mount by more than a moment even while
// the server cannot be reached — it would otherwise make a restart take
// the agent's edits for a mount's cut-short downloads.
func (st *store) dropMark(ctx context.Context) {
	if st.unflushed {
		st.writeJournal(ctx, st.state.full())
	}
}

// stateSum fingerprints a state: what a store remembers of its journal
// instead of a copy of the state, which for a store of 2,000 files was a
// few hundred KB. Every field of every path goes in, paths in order, each
// string with its length, so two states have the same sum only if the
// journal would hold the same state. (It is hashed field by field, not as
// the journal's JSON: that made the JSON of every store's state at each
// sync only to throw it away.)
func stateSum(s State) *[sha256.Size]byte {
	h := sha256.New()
	var b []byte
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(s)) {
		ps := s[p]
		b = b[:0]
		str(p)
		str(ps.Base)
		flag(ps.MissingSince.IsZero())
		b = binary.AppendVarint(b, ps.MissingSince.UnixNano())
		str(ps.Held)
		str(ps.Sent)
		flag(ps.DeleteSent)
		flag(ps.RemoveStarted)
		str(ps.Fetching)
		h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return &sum
}

// keepCopy saves the local content of path under the state folder's kept/
// before it is overwritten or thrown away, and returns where. The copy is
// written durably: it is the only one. With sha set, the file must still
// hash to it (what the plan saw); confined.ErrChanged means it does not
// (the agent edited it since the scan): nothing was copied, and the caller
// must not overwrite it either.
func (st *store) keepCopy(path, sha string) (string, error) {
	if st.stateRoot == nil {
		return "", errors.New("the store has no state folder to keep a copy in")
	}
	data, err := st.root.ReadFile(relPath(path), keptReadLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w (it is gone)", confined.ErrChanged)
	}
	if err != nil {
		return "", err
	}
	sum := sha256Hex(data)
	if sha != "" && sum != sha {
		return "", fmt.Errorf("%w (its content differs)", confined.ErrChanged)
	}
	rel := keptName + path + "." + st.now().UTC().Format("20060102T150405Z") + "-" + sum[:8]
	if err := st.stateRoot.WriteFile(rel, data, confined.Precondition{}); err != nil {
		return "", err
	}
	return filepath.Join(StateDir(st.mount.Dir), filepath.FromSlash(rel)), nil
}
