package memsync

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/validate"
)

// DeletionMode is whether a file deleted in the folder may delete its memory
// on the server (the worker's memory_sync_deletions option).
type DeletionMode uint8

const (
	// DeletionsEnabled sends corroborated, capped, sha-guarded deletes.
	DeletionsEnabled DeletionMode = iota
	// DeletionsLogOnly runs the same checks and logs what it would delete:
	// a way to watch what enabling deletions would do.
	DeletionsLogOnly
	// DeletionsDisabled never deletes a memory because its file is gone.
	DeletionsDisabled
)

func (m DeletionMode) String() string {
	switch m {
	case DeletionsEnabled:
		return "enabled"
	case DeletionsLogOnly:
		return "log_only"
	case DeletionsDisabled:
		return "disabled"
	}
	return fmt.Sprintf("DeletionMode(%d)", m)
}

// ParseDeletionMode parses the option's spelling: enabled, log_only or
// disabled.
func ParseDeletionMode(s string) (DeletionMode, error) {
	for _, m := range []DeletionMode{DeletionsEnabled, DeletionsLogOnly, DeletionsDisabled} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("memory_sync_deletions must be enabled, log_only or disabled, not %q", s)
}

// DefaultCorroborationWindow is how long a file must stay gone from the
// folder before its memory is deleted on the server. Editors and tools that
// save by writing a new file and renaming it make a file vanish briefly; a
// sync landing in that moment must not delete the memory.
const DefaultCorroborationWindow = 30 * time.Second

// DeleteCap is the most server deletes one sync sends (or, in log_only mode,
// reports) for a store of n memories: a quarter of the store, at least 8 and
// at most 50. n is the number of memories in that sync's server listing. The
// cap bounds the damage of a mistaken mass deletion (a tool that empties the
// folder bit by bit) to a fraction of the store per sync interval, while the
// versions of deleted memories stay recoverable on the server.
func DeleteCap(n int) int { return max(8, min(50, n/4)) }

// Options are the inputs of one [Reconcile] that are not data.
type Options struct {
	// ReadOnly: the store is attached read_only, so nothing is pushed.
	ReadOnly bool
	// Deletions is the deletion mode; the zero value is enabled.
	Deletions DeletionMode
	// CorroborationWindow overrides [DefaultCorroborationWindow] when
	// positive.
	CorroborationWindow time.Duration
	// Now is the time of this sync: Reconcile reads no clock.
	Now time.Time
	// Final marks the session's last sync: there is no later sync to
	// corroborate a deletion, so the window is waived.
	Final bool
	// CaseInsensitive: the folder's filesystem does not tell names apart by
	// case (see confined's Root.CaseInsensitive).
	CaseInsensitive bool
}

// RemoteMemory is one memory in the server's listing.
type RemoteMemory struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
}

// Remote is the server's listing of a store: memory path → memory.
type Remote map[string]RemoteMemory

// Reconcile decides what one sync does for one store, from the state kept
// since the last sync, a scan of the folder and a listing of the server. It
// does no I/O and reads no clock; see the package documentation for the
// rules, and [Kind] for what apply does with each action.
//
// Case collisions: on a case-insensitive filesystem (Options.CaseInsensitive)
// two paths that differ only in letter case — or that live in folders whose
// names differ only in case — would be one file. Rather than guess which
// memory the file belongs to, every path involved is skipped
// ([SkipCaseCollision]) with a warning until all but one spelling is renamed
// or deleted: nothing is downloaded over, uploaded from, or deleted for them,
// and their state is kept, so syncing resumes where it stopped.
func Reconcile(state State, local Local, remote Remote, opts Options) Plan {
	r := &reconciler{
		opts:     opts,
		local:    local,
		remote:   remote,
		window:   DefaultCorroborationWindow,
		cap:      DeleteCap(len(remote)),
		collided: map[string]bool{},
		// Sized for what it will hold, about as many paths as the state:
		// a map grown path by path allocates it about twice over.
		plan: Plan{Next: make(State, len(state))},
	}
	if opts.CorroborationWindow > 0 {
		r.window = opts.CorroborationWindow
	}

	if local.Marker != MarkerTrusted {
		if !local.empty() {
			problem := "is missing"
			if local.Marker == MarkerMismatch {
				problem = "is not this store's"
			}
			r.persistentNote(slog.LevelWarn, "", fmt.Sprintf("the folder's marker file %s %s, so the folder may not be this store's: "+
				"it is left exactly as found, and nothing is uploaded from it or deleted because of it; "+
				"move the folder away to have it rebuilt from the server, whose copy is intact", MarkerName, problem), nil)
			r.plan.Next = state.Clone()
			return r.plan
		}
		r.rebuild(fmt.Sprintf("the folder or its marker file %s is gone and the folder is empty", MarkerName), r.settle(state))
		return r.plan
	}

	eff := r.settle(state)
	if wiped(eff, local) {
		r.rebuild("every memory file vanished from the folder at once, which looks like a wiped folder rather than deliberate deletions", eff)
		return r.plan
	}

	keys := slices.Sorted(maps.Keys(remote))
	keys = slices.AppendSeq(keys, maps.Keys(local.Files))
	keys = slices.AppendSeq(keys, maps.Keys(eff))
	slices.Sort(keys)
	keys = slices.Compact(keys)
	r.findCollisions(append(slices.Collect(maps.Keys(local.Obscured)), keys...))
	r.noteObscured(keys)
	for _, p := range keys {
		r.decide(p, eff[p])
	}
	if r.capped > 0 {
		verb := "sent"
		if opts.Deletions == DeletionsLogOnly {
			verb = "reported"
		}
		r.persistentNote(slog.LevelWarn, "", fmt.Sprintf("delete cap reached: %d server deletes %s this sync and %d held for later syncs "+
			"(at most %d per sync for a store of %d memories); if these deletions are not intended, restore the files",
			r.deletes, verb, r.capped, r.cap, len(remote)), nil)
	}
	return r.plan
}

type reconciler struct {
	opts     Options
	local    Local
	remote   Remote
	window   time.Duration
	cap      int
	deletes  int // corroborated deletes sent or reported this sync
	capped   int // corroborated deletes held back by the cap
	collided map[string]bool
	plan     Plan
}

func (r *reconciler) act(a Action) { r.plan.Actions = append(r.plan.Actions, a) }

func (r *reconciler) note(level slog.Level, path, msg string, err error) {
	r.plan.Notes = append(r.plan.Notes, Note{Level: level, Path: path, Msg: msg, Err: err})
}

// persistentNote is note for a condition that every sync finds again until
// someone fixes it (see Note.Persistent).
func (r *reconciler) persistentNote(level slog.Level, path, msg string, err error) {
	r.plan.Notes = append(r.plan.Notes, Note{Level: level, Path: path, Msg: msg, Err: err, Persistent: true})
}

func (r *reconciler) keep(path string, ps PathState) {
	if !ps.isZero() {
		r.plan.Next[path] = ps
	}
}

// settle resolves requests whose response was lost against this listing
// ("settle" means only that in this package: deciding the outcome of a
// step whose answer never came).
// A memory holding exactly the sha that was sent is that upload, so it
// becomes the base and reads as synced rather than as a server change. A
// memory gone after a delete was sent was deleted by us, so its base is
// dropped. Every record is dropped after this listing either way; kept
// longer, one could claim another writer's identical content as ours.
// Likewise the local changes whose outcome a crash left unknown: a file
// gone after its removal started was removed by us, so its base is
// dropped; a file holding the content a download was fetching is that
// download, so that content becomes its base.
func (r *reconciler) settle(state State) State {
	if !state.unsettled() {
		// Nothing to settle, the usual case: the state is read as it is
		// (nothing writes to it) rather than copied, one copy of every
		// path's state less for each sync.
		return state
	}
	eff := make(State, len(state))
	for _, p := range slices.Sorted(maps.Keys(state)) {
		ps := state[p]
		rm, inR := r.remote[p]
		if ps.Sent != "" {
			if inR && rm.SHA256 == ps.Sent {
				ps.Base = ps.Sent
				r.note(slog.LevelDebug, p, "an upload whose response was lost had reached the server; it is now the synced version", nil)
			}
			ps.Sent = ""
		}
		if ps.DeleteSent {
			if !inR {
				ps.Base, ps.MissingSince = "", time.Time{}
				r.note(slog.LevelDebug, p, "a server delete whose response was lost had reached the server", nil)
			}
			ps.DeleteSent = false
		}
		if ps.RemoveStarted {
			if _, inL := r.local.Files[p]; !inL {
				ps.Base, ps.MissingSince = "", time.Time{}
				r.note(slog.LevelDebug, p, "a file removal a crash interrupted had happened", nil)
			}
			ps.RemoveStarted = false
		}
		if ps.Fetching != "" {
			if lf, inL := r.local.Files[p]; inL && lf.SHA256 == ps.Fetching {
				ps.Base, ps.MissingSince = ps.Fetching, time.Time{}
				r.note(slog.LevelDebug, p, "a download a crash interrupted had been written", nil)
			}
			ps.Fetching = ""
		}
		if !ps.isZero() {
			eff[p] = ps
		}
	}
	return eff
}

// wiped reports whether the folder lost every file at once: no file is left,
// and at least two synced files were still present at the previous sync (a
// lone file's deletion is an ordinary deletion, and files deleted one by one
// each started their own corroboration clock).
func wiped(eff State, local Local) bool {
	if len(local.Files) > 0 || len(local.Obscured) > 0 {
		return false
	}
	n := 0
	for _, ps := range eff {
		if ps.Base != "" && ps.MissingSince.IsZero() {
			n++
		}
	}
	return n >= 2
}

// rebuild plans a download of every memory into an emptied folder, and
// nothing else. The state starts over: each successful download is marked
// synced, and a failed one is simply downloaded again next time. Each
// download carries the base it had (eff, settled), for a path the agent
// writes while the rebuild runs (see Action.Base).
func (r *reconciler) rebuild(why string, eff State) {
	r.plan.Rebuild = true
	r.note(slog.LevelWarn, "", why+"; rebuilding the folder from the server and deleting nothing there", nil)
	keys := slices.Sorted(maps.Keys(r.remote))
	r.findCollisions(keys)
	for _, p := range keys {
		switch {
		case r.skipInvalid(p):
		case r.collided[p]:
			r.act(Action{Kind: SkipCaseCollision, Path: p})
		default:
			rm := r.remote[p]
			act := Action{Kind: Download, Path: p, MemoryID: rm.ID, RemoteSHA: rm.SHA256, Local: confined.Precondition{Absent: true}}
			if eff[p].Base == rm.SHA256 {
				act.Base = rm.SHA256
			}
			r.act(act)
		}
	}
}

// skipInvalid plans a skip for a path that cannot be both a memory and a
// file in the folder.
func (r *reconciler) skipInvalid(p string) bool {
	err := validate.Path("path", p)
	if err == nil {
		return false
	}
	r.act(Action{Kind: SkipInvalidPath, Path: p})
	r.persistentNote(slog.LevelWarn, p, "this path cannot be synced as a file in the folder; skipping it", err)
	return true
}

// findCollisions marks, on a case-insensitive filesystem, every path that
// shares a spelling-insensitive prefix (a folder or the path itself) with a
// differently spelled one.
func (r *reconciler) findCollisions(paths []string) {
	if !r.opts.CaseInsensitive {
		return
	}
	spellings := map[string][]string{}
	seen := map[string]bool{}
	for _, p := range paths {
		for _, q := range pathPrefixes(p) {
			if !seen[q] {
				seen[q] = true
				k := foldCase(q)
				spellings[k] = append(spellings[k], q)
			}
		}
	}
	for _, p := range paths {
		for _, q := range pathPrefixes(p) {
			if len(spellings[foldCase(q)]) > 1 {
				r.collided[p] = true
				break
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spellings)) {
		if sp := spellings[k]; len(sp) > 1 {
			slices.Sort(sp)
			r.persistentNote(slog.LevelWarn, sp[0], fmt.Sprintf("the paths %s differ only in letter case, and this folder's filesystem cannot keep them apart; "+
				"the memories at or under them are not synced (and nothing of them is deleted) until all but one spelling is renamed or deleted",
				strings.Join(sp, ", ")), nil)
		}
	}
}

// obscuredBy returns the entry that hides path from the scan, if any.
func (r *reconciler) obscuredBy(p string) (string, bool) {
	for _, q := range pathPrefixes(p) {
		if _, ok := r.local.Obscured[q]; ok {
			return q, true
		}
	}
	return "", false
}

// noteObscured tells the operator about every entry the scan could not see
// into, louder when it hides memories.
func (r *reconciler) noteObscured(keys []string) {
	hidden := map[string]int{}
	for _, p := range keys {
		if q, ok := r.obscuredBy(p); ok {
			hidden[q]++
		}
	}
	for _, q := range slices.Sorted(maps.Keys(r.local.Obscured)) {
		if hidden[q] > 0 {
			r.persistentNote(slog.LevelWarn, q, fmt.Sprintf("this entry is not a regular file or folder, or cannot be read, so the %d memories at or under it "+
				"are not synced and are left untouched on the server; replace it with a regular file or folder to resume syncing", hidden[q]),
				r.local.Obscured[q])
		} else {
			r.persistentNote(slog.LevelInfo, q, "this entry is not a regular file or folder, or cannot be read, so it is not synced", r.local.Obscured[q])
		}
	}
}

// decide plans one path.
func (r *reconciler) decide(p string, ps PathState) {
	rm, inR := r.remote[p]
	lf, inL := r.local.Files[p]
	if inL {
		ps.MissingSince = time.Time{}
	}
	if ps.Held != "" && (!inL || lf.SHA256 != ps.Held) {
		ps.Held = "" // the file changed: whatever was held back may go now
	}
	if r.skipInvalid(p) {
		r.keep(p, ps)
		return
	}
	if r.collided[p] {
		r.act(Action{Kind: SkipCaseCollision, Path: p})
		r.keep(p, ps)
		return
	}
	if _, ok := r.obscuredBy(p); ok {
		r.act(Action{Kind: SkipObscured, Path: p})
		r.keep(p, ps)
		return
	}

	switch {
	case !inL && !inR:
		// Gone on both sides: nothing left to remember.
	case inL && inR && lf.SHA256 == rm.SHA256:
		if ps.Base != rm.SHA256 {
			r.act(Action{Kind: Adopt, Path: p})
		}
		r.keep(p, PathState{Base: rm.SHA256})
	case !inL:
		r.decideLocalAbsent(p, ps, rm)
	case !inR:
		r.decideRemoteAbsent(p, ps, lf)
	default:
		remoteChanged := ps.Base == "" || rm.SHA256 != ps.Base
		localChanged := ps.Base == "" || lf.SHA256 != ps.Base
		switch {
		case remoteChanged && localChanged:
			r.note(slog.LevelWarn, p, "this memory changed both in the folder and on the server; the server version wins "+
				"and overwrites the file, and the local edit is kept as a copy (the next line says where)", nil)
			r.act(Action{Kind: Download, Path: p, MemoryID: rm.ID, RemoteSHA: rm.SHA256, Local: confined.Precondition{SHA256: lf.SHA256}, Keep: true})
		case remoteChanged:
			r.download(p, rm, confined.Precondition{SHA256: lf.SHA256})
		default:
			r.push(p, ps, lf, &rm)
			return
		}
		r.keep(p, ps)
	}
}

func (r *reconciler) download(p string, rm RemoteMemory, local confined.Precondition) {
	r.act(Action{Kind: Download, Path: p, MemoryID: rm.ID, RemoteSHA: rm.SHA256, Local: local})
}

// decideLocalAbsent plans a path the server has and the folder does not.
func (r *reconciler) decideLocalAbsent(p string, ps PathState, rm RemoteMemory) {
	switch {
	case ps.Base == "":
		// New on the server, or a download that failed before.
		r.download(p, rm, confined.Precondition{Absent: true})
	case rm.SHA256 != ps.Base:
		r.note(slog.LevelWarn, p, "this file was deleted in the folder but its memory changed on the server; "+
			"restoring the server version", nil)
		ps.MissingSince = time.Time{}
		r.download(p, rm, confined.Precondition{Absent: true})
	default:
		r.localDeletion(p, ps, rm)
		return
	}
	r.keep(p, ps)
}

// localDeletion plans a file deleted in the folder whose memory the server
// still holds unchanged.
func (r *reconciler) localDeletion(p string, ps PathState, rm RemoteMemory) {
	first := ps.MissingSince
	if first.IsZero() {
		ps.MissingSince = r.opts.Now
	}
	r.keep(p, ps)
	switch {
	case r.opts.ReadOnly:
		if first.IsZero() {
			r.note(slog.LevelInfo, p, "this file was deleted in the folder of a read-only store; the memory stays on the server "+
				"and the file comes back with the memory's next change", nil)
		}
		r.act(Action{Kind: KeepUnsynced, Path: p})
	case r.opts.Deletions == DeletionsDisabled:
		if first.IsZero() {
			r.note(slog.LevelInfo, p, "this file was deleted in the folder, but memory_sync_deletions is disabled, "+
				"so the memory stays on the server", nil)
		}
		r.act(Action{Kind: KeepRemote, Path: p})
	case !r.opts.Final && (first.IsZero() || r.opts.Now.Sub(first) < r.window):
		r.act(Action{Kind: WaitCorroboration, Path: p})
	case r.deletes >= r.cap:
		r.capped++
		r.act(Action{Kind: DeleteCapped, Path: p})
	default:
		r.deletes++
		if r.opts.Deletions == DeletionsLogOnly {
			r.persistentNote(slog.LevelInfo, p, "log_only: this file has stayed deleted in the folder, and the sync would delete its memory "+
				"on the server; set memory_sync_deletions to enabled to propagate deletions", nil)
			r.act(Action{Kind: LogOnlyDelete, Path: p})
			return
		}
		r.act(Action{Kind: DeleteRemote, Path: p, MemoryID: rm.ID, RemoteSHA: ps.Base, Local: confined.Precondition{Absent: true}})
	}
}

// decideRemoteAbsent plans a path the folder has and the server does not.
func (r *reconciler) decideRemoteAbsent(p string, ps PathState, lf LocalFile) {
	switch {
	case ps.Base == "":
		// A new file (or one whose create failed before).
		r.push(p, ps, lf, nil)
	case lf.SHA256 == ps.Base:
		// Deleted on the server, untouched here: remove it, unless an edit
		// lands before apply gets there.
		r.act(Action{Kind: RemoveLocal, Path: p, Local: confined.Precondition{SHA256: ps.Base}})
		r.keep(p, ps)
	case r.opts.ReadOnly:
		// Deleted on the server, edited here: the file is the only copy.
		ps.Base = ""
		if ps.Held != lf.SHA256 {
			r.note(slog.LevelWarn, p, "this memory was deleted on the server but its file has local edits; the store is read-only, "+
				"so the file is kept in the folder, unsynced", nil)
		}
		ps.Held = lf.SHA256
		r.act(Action{Kind: KeepUnsynced, Path: p})
		r.keep(p, ps)
	default:
		ps.Base = ""
		if lf.Unsyncable == Syncable && ps.Held != lf.SHA256 {
			r.note(slog.LevelInfo, p, "this memory was deleted on the server but its file has local edits; "+
				"re-creating the memory from the file", nil)
		}
		r.push(p, ps, lf, nil)
	}
}

// push plans the upload of a local change — or why it is not uploaded.
// rm is the server's memory to update, nil to create one.
func (r *reconciler) push(p string, ps PathState, lf LocalFile, rm *RemoteMemory) {
	defer func() { r.keep(p, ps) }()
	switch {
	case r.opts.ReadOnly:
		if ps.Held != lf.SHA256 {
			r.note(slog.LevelWarn, p, "this file changed in the folder of a read-only store; the change is kept in the folder "+
				"but never uploaded, and the memory's next change on the server overwrites it", nil)
		}
		ps.Held = lf.SHA256
		r.act(Action{Kind: KeepUnsynced, Path: p})
	case lf.Unsyncable != Syncable:
		if ps.Held != lf.SHA256 {
			r.note(slog.LevelWarn, p, fmt.Sprintf("this file %s, so it cannot be a memory; it stays in the folder, "+
				"unsynced, until its content changes", lf.Unsyncable), nil)
		}
		ps.Held = lf.SHA256
		r.act(Action{Kind: SkipUnsyncable, Path: p})
	case ps.Held == lf.SHA256:
		r.act(Action{Kind: SkipRefused, Path: p})
	case rm == nil:
		r.act(Action{Kind: Create, Path: p, Local: confined.Precondition{SHA256: lf.SHA256}})
	default:
		r.act(Action{Kind: Update, Path: p, MemoryID: rm.ID, RemoteSHA: rm.SHA256, Local: confined.Precondition{SHA256: lf.SHA256}})
	}
}
