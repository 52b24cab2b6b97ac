package memsync

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/confined"
)

// Content hashes in these tests are stand-ins: Reconcile only compares them.
const (
	A = "sha-A"
	B = "sha-B"
	C = "sha-C"
	X = "sha-X"
)

var t0 = time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)

func id(p string) string { return "mem" + p }

// files builds a folder scan from path, sha pairs.
func files(kv ...string) map[string]LocalFile {
	m := map[string]LocalFile{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = LocalFile{SHA256: kv[i+1]}
	}
	return m
}

// remote builds a server listing from path, sha pairs.
func remote(kv ...string) Remote {
	m := Remote{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = RemoteMemory{ID: id(kv[i]), SHA256: kv[i+1]}
	}
	return m
}

// synced builds a state where each path, sha pair was synced.
func synced(kv ...string) State {
	s := State{}
	for i := 0; i < len(kv); i += 2 {
		s.MarkSynced(kv[i], kv[i+1])
	}
	return s
}

func trusted(f map[string]LocalFile) Local { return Local{Marker: MarkerTrusted, Files: f} }

var (
	absent = confined.Precondition{Absent: true}
	holds  = func(sha string) confined.Precondition { return confined.Precondition{SHA256: sha} }
)

func download(p, remoteSHA string, local confined.Precondition) Action {
	return Action{Kind: Download, Path: p, MemoryID: id(p), RemoteSHA: remoteSHA, Local: local}
}

// rebuilt is a rebuild's download of a memory the server still holds as it
// was synced, which keeps its base if the agent writes the path meanwhile.
func rebuilt(p, sha string) Action {
	a := download(p, sha, absent)
	a.Base = sha
	return a
}

// conflict is the server's win over a local edit: a download over the
// file that first keeps a copy of the edit.
func conflict(p, remoteSHA, localSHA string) Action {
	a := download(p, remoteSHA, holds(localSHA))
	a.Keep = true
	return a
}
func create(p, localSHA string) Action {
	return Action{Kind: Create, Path: p, Local: holds(localSHA)}
}
func update(p, precondition, localSHA string) Action {
	return Action{Kind: Update, Path: p, MemoryID: id(p), RemoteSHA: precondition, Local: holds(localSHA)}
}
func deleteRemote(p, expected string) Action {
	return Action{Kind: DeleteRemote, Path: p, MemoryID: id(p), RemoteSHA: expected, Local: absent}
}
func removeLocal(p, sha string) Action {
	return Action{Kind: RemoveLocal, Path: p, Local: holds(sha)}
}
func only(k Kind, p string) Action { return Action{Kind: k, Path: p} }

type reconcileCase struct {
	name    string
	state   State
	local   Local
	remote  Remote
	opts    Options
	rebuild bool
	actions []Action
	next    State
	// notes are substrings of the Info-and-louder notes, in order.
	notes []string
}

func reconcileCases() []reconcileCase {
	missingFor := func(d time.Duration) State {
		return State{"/a": {Base: A, MissingSince: t0.Add(-d)}}
	}
	// capped is a store of ten memories whose files /d1…/d9 have stayed
	// deleted for an hour, and /keep is still there (so it is no wipe):
	// nine corroborated deletes against a cap of max(8, min(50, 10/4)) = 8.
	capped := State{"/keep": {Base: A}}
	cappedRemote := remote("/keep", A)
	var cappedActions []Action
	for i := 1; i <= 9; i++ {
		p := fmt.Sprintf("/d%d", i)
		capped[p] = PathState{Base: B, MissingSince: t0.Add(-time.Hour)}
		cappedRemote[p] = RemoteMemory{ID: id(p), SHA256: B}
		if i <= 8 {
			cappedActions = append(cappedActions, deleteRemote(p, B))
		} else {
			cappedActions = append(cappedActions, only(DeleteCapped, p))
		}
	}
	return []reconcileCase{
		// --- The SPEC §5 table, row by row. ---
		{
			name:    "unchanged locally, changed on server: write the server version",
			state:   synced("/a", A),
			local:   trusted(files("/a", A)),
			remote:  remote("/a", B),
			actions: []Action{download("/a", B, holds(A))},
			next:    synced("/a", A),
		},
		{
			name:    "changed locally, unchanged on server: update with a content_sha256 precondition",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote("/a", A),
			actions: []Action{update("/a", A, B)},
			next:    synced("/a", A),
		},
		{
			name:    "new local file: create",
			state:   State{},
			local:   trusted(files("/n", B)),
			remote:  remote(),
			actions: []Action{create("/n", B)},
			next:    State{},
		},
		{
			name:    "changed on both sides: the server wins, overwriting the file after keeping a copy of the edit, with a warning",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote("/a", C),
			actions: []Action{conflict("/a", C, B)},
			next:    synced("/a", A),
			notes:   []string{"changed both in the folder and on the server; the server version wins"},
		},
		{
			name:    "created on both sides with different content: the server wins, a copy of the local file is kept",
			state:   State{},
			local:   trusted(files("/n", B)),
			remote:  remote("/n", C),
			actions: []Action{conflict("/n", C, B)},
			next:    State{},
			notes:   []string{"the server version wins"},
		},
		{
			name:    "changed on both sides to the same content: adopt, no transfer",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote("/a", B),
			actions: []Action{only(Adopt, "/a")},
			next:    synced("/a", B),
		},
		{
			name:    "created on both sides with the same content: adopt",
			state:   State{},
			local:   trusted(files("/n", B)),
			remote:  remote("/n", B),
			actions: []Action{only(Adopt, "/n")},
			next:    synced("/n", B),
		},
		{
			name:   "in sync: nothing to do",
			state:  synced("/a", A),
			local:  trusted(files("/a", A)),
			remote: remote("/a", A),
			next:   synced("/a", A),
		},
		{
			name:    "deleted locally, unchanged on server, first seen: start the corroboration window",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files("/b", B)),
			remote:  remote("/a", A, "/b", B),
			actions: []Action{only(WaitCorroboration, "/a")},
			next:    State{"/a": {Base: A, MissingSince: t0}, "/b": {Base: B}},
		},
		{
			name:    "deleted locally, still inside the window: keep waiting",
			state:   missingFor(29 * time.Second),
			local:   trusted(files()),
			remote:  remote("/a", A),
			actions: []Action{only(WaitCorroboration, "/a")},
			next:    missingFor(29 * time.Second),
		},
		{
			name:    "deleted locally and gone for the whole window: delete on the server, guarded by the sha",
			state:   missingFor(30 * time.Second),
			local:   trusted(files()),
			remote:  remote("/a", A),
			actions: []Action{deleteRemote("/a", A)},
			next:    missingFor(30 * time.Second),
		},
		{
			name:    "final sync waives the window, even for a deletion first seen now",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files("/b", B)),
			remote:  remote("/a", A, "/b", B),
			opts:    Options{Final: true},
			actions: []Action{deleteRemote("/a", A)},
			next:    State{"/a": {Base: A, MissingSince: t0}, "/b": {Base: B}},
		},
		{
			name:    "a shorter configured window is honoured",
			state:   missingFor(5 * time.Second),
			local:   trusted(files()),
			remote:  remote("/a", A),
			opts:    Options{CorroborationWindow: 5 * time.Second},
			actions: []Action{deleteRemote("/a", A)},
			next:    missingFor(5 * time.Second),
		},
		{
			name:    "a clock that went backwards keeps the delete waiting",
			state:   missingFor(-time.Hour),
			local:   trusted(files()),
			remote:  remote("/a", A),
			actions: []Action{only(WaitCorroboration, "/a")},
			next:    missingFor(-time.Hour),
		},
		{
			name:    "more corroborated deletes than the cap: the cap is sent, the rest wait for later syncs, with a warning",
			state:   capped,
			local:   trusted(files("/keep", A)),
			remote:  cappedRemote,
			actions: cappedActions,
			next:    capped,
			notes:   []string{"delete cap reached: 8 server deletes sent this sync and 1 held for later syncs (at most 8 per sync for a store of 10 memories)"},
		},
		{
			name:    "log_only: a corroborated delete is logged, not sent",
			state:   missingFor(time.Minute),
			local:   trusted(files()),
			remote:  remote("/a", A),
			opts:    Options{Deletions: DeletionsLogOnly},
			actions: []Action{only(LogOnlyDelete, "/a")},
			next:    missingFor(time.Minute),
			notes:   []string{"log_only: this file has stayed deleted"},
		},
		{
			name:    "log_only: not logged before the window has passed",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files("/b", B)),
			remote:  remote("/a", A, "/b", B),
			opts:    Options{Deletions: DeletionsLogOnly},
			actions: []Action{only(WaitCorroboration, "/a")},
			next:    State{"/a": {Base: A, MissingSince: t0}, "/b": {Base: B}},
		},
		{
			name:    "disabled: the memory stays on the server, said once",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files("/b", B)),
			remote:  remote("/a", A, "/b", B),
			opts:    Options{Deletions: DeletionsDisabled, Final: true},
			actions: []Action{only(KeepRemote, "/a")},
			next:    State{"/a": {Base: A, MissingSince: t0}, "/b": {Base: B}},
			notes:   []string{"memory_sync_deletions is disabled"},
		},
		{
			name:    "disabled: not repeated on later syncs",
			state:   missingFor(time.Hour),
			local:   trusted(files()),
			remote:  remote("/a", A),
			opts:    Options{Deletions: DeletionsDisabled},
			actions: []Action{only(KeepRemote, "/a")},
			next:    missingFor(time.Hour),
		},
		{
			name:    "deleted locally, changed on server: restore the server version",
			state:   missingFor(time.Hour),
			local:   trusted(files()),
			remote:  remote("/a", B),
			actions: []Action{download("/a", B, absent)},
			next:    synced("/a", A),
			notes:   []string{"restoring the server version"},
		},
		{
			name:    "unchanged locally, deleted on server: remove the file if it still holds the synced content",
			state:   synced("/a", A),
			local:   trusted(files("/a", A)),
			remote:  remote(),
			actions: []Action{removeLocal("/a", A)},
			next:    synced("/a", A),
		},
		{
			name:    "changed locally, deleted on server: re-create the memory from the file",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote(),
			actions: []Action{create("/a", B)},
			next:    State{},
			notes:   []string{"re-creating the memory from the file"},
		},
		{
			name:    "changed locally, deleted on server, read-only store: keep the file, unsynced",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote(),
			opts:    Options{ReadOnly: true},
			actions: []Action{only(KeepUnsynced, "/a")},
			next:    State{"/a": {Held: B}},
			notes:   []string{"the store is read-only, so the file is kept in the folder, unsynced"},
		},
		{
			name:    "all files gone at once: rebuild from the server, delete nothing",
			state:   synced("/a", A, "/b", B, "/c", C),
			local:   trusted(files()),
			remote:  remote("/a", A, "/b", X, "/d", C),
			rebuild: true,
			actions: []Action{rebuilt("/a", A), download("/b", X, absent), download("/d", C, absent)},
			next:    State{},
			notes:   []string{"every memory file vanished from the folder at once"},
		},

		// --- Deletion edges. ---
		{
			name:    "wiped folder at the final sync: still a rebuild, never deletes",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files()),
			remote:  remote("/a", A, "/b", B),
			opts:    Options{Final: true},
			rebuild: true,
			actions: []Action{rebuilt("/a", A), rebuilt("/b", B)},
			next:    State{},
			notes:   []string{"rebuilding the folder"},
		},
		{
			name:    "the only file of a one-memory store deleted: an ordinary deletion, not a wipe",
			state:   synced("/a", A),
			local:   trusted(files()),
			remote:  remote("/a", A),
			actions: []Action{only(WaitCorroboration, "/a")},
			next:    State{"/a": {Base: A, MissingSince: t0}},
		},
		{
			name:    "files deleted one by one until none is left: ordinary deletions, not a wipe",
			state:   State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute)}, "/b": {Base: B}},
			local:   trusted(files()),
			remote:  remote("/a", A, "/b", B),
			actions: []Action{deleteRemote("/a", A), only(WaitCorroboration, "/b")},
			next:    State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute)}, "/b": {Base: B, MissingSince: t0}},
		},
		{
			name:    "a file that reappears stops its deletion clock",
			state:   missingFor(time.Minute),
			local:   trusted(files("/a", A)),
			remote:  remote("/a", A),
			actions: nil,
			next:    synced("/a", A),
		},
		{
			name:   "deleted on both sides: forgotten",
			state:  missingFor(time.Minute),
			local:  trusted(files()),
			remote: remote(),
			next:   State{},
		},
		{
			name:    "new on the server: download into an empty spot",
			state:   State{},
			local:   trusted(files()),
			remote:  remote("/n", B),
			actions: []Action{download("/n", B, absent)},
			next:    State{},
		},

		// --- Read-only stores pull but never push. ---
		{
			name:    "read-only: a local edit is kept, unsynced, and warned about once",
			state:   synced("/a", A),
			local:   trusted(files("/a", B)),
			remote:  remote("/a", A),
			opts:    Options{ReadOnly: true},
			actions: []Action{only(KeepUnsynced, "/a")},
			next:    State{"/a": {Base: A, Held: B}},
			notes:   []string{"read-only store; the change is kept in the folder but never uploaded"},
		},
		{
			name:    "read-only: the same edit on the next sync is quiet",
			state:   State{"/a": {Base: A, Held: B}},
			local:   trusted(files("/a", B)),
			remote:  remote("/a", A),
			opts:    Options{ReadOnly: true},
			actions: []Action{only(KeepUnsynced, "/a")},
			next:    State{"/a": {Base: A, Held: B}},
		},
		{
			name:    "read-only: a new local file is never created on the server",
			state:   State{},
			local:   trusted(files("/n", B)),
			remote:  remote(),
			opts:    Options{ReadOnly: true},
			actions: []Action{only(KeepUnsynced, "/n")},
			next:    State{"/n": {Held: B}},
			notes:   []string{"never uploaded"},
		},
		{
			name:    "read-only: a local deletion is never sent, even corroborated at the final sync",
			state:   missingFor(time.Hour),
			local:   trusted(files()),
			remote:  remote("/a", A),
			opts:    Options{ReadOnly: true, Final: true},
			actions: []Action{only(KeepUnsynced, "/a")},
			next:    missingFor(time.Hour),
		},
		{
			name:    "read-only: server changes are still pulled, over local edits too (a copy of each edit kept)",
			state:   State{"/a": {Base: A, Held: B}, "/b": synced("/b", B)["/b"]},
			local:   trusted(files("/a", B, "/b", B)),
			remote:  remote("/a", C, "/b", C),
			opts:    Options{ReadOnly: true},
			actions: []Action{conflict("/a", C, B), download("/b", C, holds(B))},
			next:    State{"/a": {Base: A, Held: B}, "/b": {Base: B}},
			notes:   []string{"the server version wins"},
		},
		{
			name:    "read-only: a memory deleted on the server is removed locally",
			state:   synced("/a", A),
			local:   trusted(files("/a", A)),
			remote:  remote(),
			opts:    Options{ReadOnly: true},
			actions: []Action{removeLocal("/a", A)},
			next:    synced("/a", A),
		},

		// --- Refused and unsyncable content. ---
		{
			name:    "refused content is not sent again while the file is unchanged",
			state:   State{"/a": {Base: A, Held: B}},
			local:   trusted(files("/a", B)),
			remote:  remote("/a", A),
			actions: []Action{only(SkipRefused, "/a")},
			next:    State{"/a": {Base: A, Held: B}},
		},
		{
			name:    "refused content: once the file changes it is sent again",
			state:   State{"/a": {Base: A, Held: B}},
			local:   trusted(files("/a", C)),
			remote:  remote("/a", A),
			actions: []Action{update("/a", A, C)},
			next:    synced("/a", A),
		},
		{
			name:    "refused new file stays unsent",
			state:   State{"/n": {Held: B}},
			local:   trusted(files("/n", B)),
			remote:  remote(),
			actions: []Action{only(SkipRefused, "/n")},
			next:    State{"/n": {Held: B}},
		},
		{
			name:    "a file that is not UTF-8 is never uploaded, and said once",
			state:   synced("/a", A),
			local:   trusted(map[string]LocalFile{"/a": {SHA256: X, Unsyncable: NotUTF8}}),
			remote:  remote("/a", A),
			actions: []Action{only(SkipUnsyncable, "/a")},
			next:    State{"/a": {Base: A, Held: X}},
			notes:   []string{"is not valid UTF-8, so it cannot be a memory"},
		},
		{
			name:    "a too-large new file is never uploaded",
			state:   State{"/n": {Held: X}},
			local:   trusted(map[string]LocalFile{"/n": {SHA256: X, Unsyncable: TooLarge}}),
			remote:  remote(),
			actions: []Action{only(SkipUnsyncable, "/n")},
			next:    State{"/n": {Held: X}},
		},
		{
			name:    "an unsyncable file loses to a server change, and a copy of it is kept",
			state:   State{"/a": {Base: A, Held: X}},
			local:   trusted(map[string]LocalFile{"/a": {SHA256: X, Unsyncable: NotUTF8}}),
			remote:  remote("/a", B),
			actions: []Action{conflict("/a", B, X)},
			next:    State{"/a": {Base: A, Held: X}},
			notes:   []string{"the server version wins"},
		},
		{
			name:    "an unsyncable edit of a memory deleted on the server is kept, not re-created",
			state:   synced("/a", A),
			local:   trusted(map[string]LocalFile{"/a": {SHA256: X, Unsyncable: TooLarge}}),
			remote:  remote(),
			actions: []Action{only(SkipUnsyncable, "/a")},
			next:    State{"/a": {Held: X}},
			notes:   []string{"is larger than 102400 bytes"},
		},

		// --- Uploads whose response was lost. ---
		{
			name:   "lost create response that landed: settled as synced, no duplicate create",
			state:  State{"/n": {Sent: B}},
			local:  trusted(files("/n", B)),
			remote: remote("/n", B),
			next:   synced("/n", B),
		},
		{
			name:    "lost update response that landed, file edited again: update over it, no false conflict",
			state:   State{"/a": {Base: A, Sent: B}},
			local:   trusted(files("/a", C)),
			remote:  remote("/a", B),
			actions: []Action{update("/a", B, C)},
			next:    synced("/a", B),
		},
		{
			name:    "lost create response that landed, file deleted since: a local deletion, not a restore",
			state:   State{"/n": {Sent: B}, "/b": {Base: B}},
			local:   trusted(files("/b", B)),
			remote:  remote("/n", B, "/b", B),
			actions: []Action{only(WaitCorroboration, "/n")},
			next:    State{"/n": {Base: B, MissingSince: t0}, "/b": {Base: B}},
		},
		{
			name:    "lost update that never landed: sent again, the record dropped",
			state:   State{"/a": {Base: A, Sent: B}},
			local:   trusted(files("/a", B)),
			remote:  remote("/a", A),
			actions: []Action{update("/a", A, B)},
			next:    synced("/a", A),
		},
		{
			name:    "lost create that never landed: created again",
			state:   State{"/n": {Sent: B}},
			local:   trusted(files("/n", B)),
			remote:  remote(),
			actions: []Action{create("/n", B)},
			next:    State{},
		},
		{
			name:    "lost update landed but another writer changed the memory since: a real conflict, server wins",
			state:   State{"/a": {Base: A, Sent: B}},
			local:   trusted(files("/a", B)),
			remote:  remote("/a", C),
			actions: []Action{conflict("/a", C, B)},
			next:    synced("/a", A),
			notes:   []string{"the server version wins"},
		},

		{
			name:    "lost delete response that landed, file re-created since with the same content: created, not removed",
			state:   State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute), DeleteSent: true}},
			local:   trusted(files("/a", A)),
			remote:  remote(),
			actions: []Action{create("/a", A)},
			next:    State{},
		},
		{
			name:    "lost delete that never landed: the deletion goes on",
			state:   State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute), DeleteSent: true}},
			local:   trusted(files()),
			remote:  remote("/a", A),
			actions: []Action{deleteRemote("/a", A)},
			next:    State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute)}},
		},
		{
			name:    "lost delete that never landed, file restored by the agent: back in sync",
			state:   State{"/a": {Base: A, MissingSince: t0.Add(-time.Minute), DeleteSent: true}},
			local:   trusted(files("/a", A)),
			remote:  remote("/a", A),
			actions: nil,
			next:    synced("/a", A),
		},
		// --- Local removals a crash interrupted (journaled as started). ---
		{
			name:    "removal that happened, memory restored since with the same content: downloaded, not deleted as the agent's",
			state:   State{"/a": {Base: A, RemoveStarted: true}},
			local:   trusted(files()),
			remote:  remote("/a", A),
			opts:    Options{Final: true},
			actions: []Action{download("/a", A, absent)},
			next:    State{},
		},
		{
			name:    "removal that never happened: the file is removed again",
			state:   State{"/a": {Base: A, RemoveStarted: true}},
			local:   trusted(files("/a", A)),
			remote:  remote(),
			actions: []Action{removeLocal("/a", A)},
			next:    synced("/a", A),
		},

		// --- The marker. ---
		{
			name:   "missing marker, folder holds files: left exactly as found, nothing uploaded or deleted",
			state:  State{"/a": {Base: A, MissingSince: t0.Add(-time.Hour)}, "/b": {Base: B}},
			local:  Local{Marker: MarkerMissing, Files: files("/b", C, "/n", C)},
			remote: remote("/a", A, "/b", B, "/s", A),
			opts:   Options{Final: true},
			next:   State{"/a": {Base: A, MissingSince: t0.Add(-time.Hour)}, "/b": {Base: B}},
			notes:  []string{"marker file .anthropic-memory-store is missing"},
		},
		{
			name:   "altered marker, folder holds only an unreadable entry: left as found",
			state:  synced("/a", A),
			local:  Local{Marker: MarkerMismatch, Obscured: map[string]error{"/a": confined.ErrSymlink}},
			remote: remote("/a", A),
			next:   synced("/a", A),
			notes:  []string{"is not this store's"},
		},
		{
			name:    "missing marker, empty folder (or no folder): rebuilt from the server",
			state:   synced("/a", A, "/b", B),
			local:   Local{Marker: MarkerMissing},
			remote:  remote("/a", A, "/b", C),
			rebuild: true,
			actions: []Action{rebuilt("/a", A), download("/b", C, absent)},
			next:    State{},
			notes:   []string{"the folder or its marker file .anthropic-memory-store is gone"},
		},
		{
			name:    "altered marker, empty folder: rebuilt too",
			state:   State{},
			local:   Local{Marker: MarkerMismatch},
			remote:  remote("/a", A),
			rebuild: true,
			actions: []Action{download("/a", A, absent)},
			next:    State{},
			notes:   []string{"rebuilding the folder"},
		},

		// --- Case collisions. ---
		{
			name:    "case-insensitive filesystem: two memories differing only in case are both skipped",
			state:   synced("/notes.md", A),
			local:   trusted(files("/notes.md", A)),
			remote:  remote("/Notes.md", B, "/notes.md", A, "/other", C),
			opts:    Options{CaseInsensitive: true},
			actions: []Action{only(SkipCaseCollision, "/Notes.md"), only(SkipCaseCollision, "/notes.md"), download("/other", C, absent)},
			next:    synced("/notes.md", A),
			notes:   []string{"the paths /Notes.md, /notes.md differ only in letter case"},
		},
		{
			name:    "case-insensitive filesystem: folders differing only in case collide too",
			state:   State{},
			local:   trusted(files()),
			remote:  remote("/Dir/x", A, "/dir/y", B),
			opts:    Options{CaseInsensitive: true},
			actions: []Action{only(SkipCaseCollision, "/Dir/x"), only(SkipCaseCollision, "/dir/y")},
			next:    State{},
			notes:   []string{"the paths /Dir, /dir differ only in letter case"},
		},
		{
			name:    "case-insensitive filesystem: a local case-only rename is not a delete plus a create",
			state:   synced("/a.md", A, "/b", B),
			local:   trusted(files("/A.md", A, "/b", B)),
			remote:  remote("/a.md", A, "/b", B),
			opts:    Options{CaseInsensitive: true, Final: true},
			actions: []Action{only(SkipCaseCollision, "/A.md"), only(SkipCaseCollision, "/a.md")},
			next:    synced("/a.md", A, "/b", B),
			notes:   []string{"differ only in letter case"},
		},
		{
			name:    "case-insensitive filesystem, wiped folder: colliding memories are not downloaded",
			state:   synced("/a", A, "/b", B),
			local:   trusted(files()),
			remote:  remote("/a", A, "/B", C, "/b", B),
			opts:    Options{CaseInsensitive: true},
			rebuild: true,
			actions: []Action{only(SkipCaseCollision, "/B"), rebuilt("/a", A), only(SkipCaseCollision, "/b")},
			next:    State{},
			notes:   []string{"rebuilding", "differ only in letter case"},
		},
		{
			name:    "case-sensitive filesystem: paths differing in case are separate memories",
			state:   State{},
			local:   trusted(files()),
			remote:  remote("/Notes.md", B, "/notes.md", A),
			actions: []Action{download("/Notes.md", B, absent), download("/notes.md", A, absent)},
			next:    State{},
		},

		// --- Entries the scan could not see as files. ---
		{
			name:  "a symlink where a memory's file was: skipped, never deleted on the server",
			state: State{"/a": {Base: A, MissingSince: t0.Add(-time.Hour)}, "/b": {Base: B}},
			local: Local{Marker: MarkerTrusted, Files: files("/b", B),
				Obscured: map[string]error{"/a": confined.ErrSymlink}},
			remote:  remote("/a", C, "/b", B),
			opts:    Options{Final: true},
			actions: []Action{only(SkipObscured, "/a")},
			next:    State{"/a": {Base: A, MissingSince: t0.Add(-time.Hour)}, "/b": {Base: B}},
			notes:   []string{"the 1 memories at or under it are not synced"},
		},
		{
			name:  "an unreadable folder hides its memories instead of making them look deleted",
			state: synced("/d/x", A, "/d/y", B),
			local: Local{Marker: MarkerTrusted,
				Obscured: map[string]error{"/d": errors.New("permission denied")}},
			remote:  remote("/d/x", A, "/d/y", B),
			opts:    Options{Final: true},
			actions: []Action{only(SkipObscured, "/d/x"), only(SkipObscured, "/d/y")},
			next:    synced("/d/x", A, "/d/y", B),
			notes:   []string{"the 2 memories at or under it"},
		},
		{
			name:  "a FIFO that is no memory: noted, nothing else",
			state: State{},
			local: Local{Marker: MarkerTrusted, Files: files("/b", B),
				Obscured: map[string]error{"/fifo": confined.ErrNotRegular}},
			remote:  remote("/b", B),
			actions: []Action{only(Adopt, "/b")},
			next:    synced("/b", B),
			notes:   []string{"is not a regular file or folder, or cannot be read, so it is not synced"},
		},

		// --- Paths the folder cannot hold. ---
		{
			name:    "the server lists the reserved marker path: skipped",
			state:   State{},
			local:   trusted(files()),
			remote:  remote("/"+MarkerName, A, "/b", B),
			actions: []Action{only(SkipInvalidPath, "/"+MarkerName), download("/b", B, absent)},
			next:    State{},
			notes:   []string{"cannot be synced as a file"},
		},
		{
			name:    "the server lists a path with a .. segment: skipped",
			state:   State{},
			local:   trusted(files()),
			remote:  remote("/a/../../etc/passwd", A),
			actions: []Action{only(SkipInvalidPath, "/a/../../etc/passwd")},
			next:    State{},
			notes:   []string{"cannot be synced as a file"},
		},
	}
}

func TestReconcile(t *testing.T) {
	for _, c := range reconcileCases() {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Now = t0
			before := c.state.Clone()
			plan := Reconcile(c.state, c.local, c.remote, c.opts)
			if !reflect.DeepEqual(c.state, before) {
				t.Fatalf("Reconcile modified its input state: %v, was %v", c.state, before)
			}
			if plan.Rebuild != c.rebuild {
				t.Errorf("Rebuild = %v, want %v", plan.Rebuild, c.rebuild)
			}
			if !reflect.DeepEqual(plan.Actions, c.actions) {
				t.Errorf("actions:\n got %s\nwant %s", fmtActions(plan.Actions), fmtActions(c.actions))
			}
			if !reflect.DeepEqual(plan.Next, c.next) {
				t.Errorf("next state:\n got %v\nwant %v", plan.Next, c.next)
			}
			var notes []Note
			for _, n := range plan.Notes {
				if n.Level >= slog.LevelInfo {
					notes = append(notes, n)
				}
			}
			if len(notes) != len(c.notes) {
				t.Errorf("notes: got %d, want %d: %v", len(notes), len(c.notes), notes)
			} else {
				for i, want := range c.notes {
					if !strings.Contains(notes[i].Msg, want) {
						t.Errorf("note %d = %q, want it to contain %q", i, notes[i].Msg, want)
					}
				}
			}
			if err := checkPlan(input{c.state, c.local, c.remote, c.opts}, plan); err != nil {
				t.Errorf("invariant broken: %v", err)
			}
		})
	}
}

func TestReconcileDeleteCap(t *testing.T) {
	// 41 memories; 40 files deleted long ago, one left so it is no wipe.
	state, rem := State{}, Remote{}
	local := trusted(files("/keep", A))
	state.MarkSynced("/keep", A)
	rem["/keep"] = RemoteMemory{ID: id("/keep"), SHA256: A}
	for i := range 40 {
		p := fmt.Sprintf("/m%02d", i)
		state[p] = PathState{Base: A, MissingSince: t0.Add(-time.Hour)}
		rem[p] = RemoteMemory{ID: id(p), SHA256: A}
	}
	for _, mode := range []DeletionMode{DeletionsEnabled, DeletionsLogOnly} {
		plan := Reconcile(state, local, rem, Options{Now: t0, Deletions: mode})
		counts := map[Kind]int{}
		for _, a := range plan.Actions {
			counts[a.Kind]++
		}
		sent := counts[DeleteRemote] + counts[LogOnlyDelete]
		if want := DeleteCap(41); sent != want || want != 10 || counts[DeleteCapped] != 40-want {
			t.Fatalf("%v: %d deletes sent or logged and %d capped, want %d and %d", mode, sent, counts[DeleteCapped], want, 40-want)
		}
		last := plan.Notes[len(plan.Notes)-1]
		if last.Level != slog.LevelWarn || !strings.Contains(last.Msg, "delete cap reached: 10 server deletes") || !strings.Contains(last.Msg, "30 held") {
			t.Fatalf("%v: cap note = %q", mode, last.Msg)
		}
		if err := checkPlan(input{state, local, rem, Options{Now: t0, Deletions: mode}}, plan); err != nil {
			t.Fatal(err)
		}
		// The capped deletes keep their clock and go out on later syncs.
		if ps := plan.Next["/m39"]; ps.MissingSince != t0.Add(-time.Hour) || ps.Base != A {
			t.Fatalf("%v: a capped delete lost its state: %+v", mode, ps)
		}
	}
	for n, want := range map[int]int{0: 8, 31: 8, 40: 10, 200: 50, 10000: 50} {
		if got := DeleteCap(n); got != want {
			t.Errorf("DeleteCap(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestParseDeletionMode(t *testing.T) {
	for _, m := range []DeletionMode{DeletionsEnabled, DeletionsLogOnly, DeletionsDisabled} {
		if got, err := ParseDeletionMode(m.String()); got != m || err != nil {
			t.Errorf("ParseDeletionMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseDeletionMode("on"); err == nil || !strings.Contains(err.Error(), "enabled, log_only or disabled") {
		t.Errorf("ParseDeletionMode(on) = %v", err)
	}
}

func fmtActions(as []Action) string {
	var parts []string
	for _, a := range as {
		s := a.Kind.String() + " " + a.Path
		if a.MemoryID != "" {
			s += " id=" + a.MemoryID
		}
		if a.RemoteSHA != "" {
			s += " remote=" + a.RemoteSHA
		}
		if a.Local.Absent {
			s += " local=absent"
		}
		if a.Local.SHA256 != "" {
			s += " local=" + a.Local.SHA256
		}
		if a.Base != "" {
			s += " base=" + a.Base
		}
		if a.Keep {
			s += " keep"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
