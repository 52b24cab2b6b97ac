package memsync

import (
	"fmt"
	"log/slog"

	"github.com/memstore/memstore/internal/confined"
)

// Kind is what an [Action] does. Only the kinds for which IO reports true
// need apply to do anything; the others record a decision (already reflected
// in [Plan.Next]) so it can be tested and counted.
type Kind uint8

const (
	// Download writes the server's content to the file, if the file still
	// matches Local (absent, or holding Local.SHA256). Apply fetches the
	// memory by MemoryID (its content may be newer than RemoteSHA), writes it
	// with confined's precondition, then calls State.MarkSynced with the
	// fetched content's sha. A 404 means the memory was deleted after the
	// listing: do nothing, the next sync sees it.
	Download Kind = iota + 1
	// Create uploads the file as a new memory. Apply reads the file, checks
	// that the bytes still hash to Local.SHA256 (otherwise skips: the next
	// sync sees the newer edit), calls State.MarkSent, sends, and on success
	// calls State.MarkSynced with the returned sha. A refusal — 400, 413, or
	// a 409 of type conflict_error (the store was archived) — calls
	// State.MarkRefused. Any other 409 (the path is taken) means another
	// writer won: do nothing, the next sync downloads its version.
	Create
	// Update uploads the file over memory MemoryID with a content_sha256
	// precondition of RemoteSHA; the file is checked, and a refusal
	// handled, as for Create. Any other 409 means the server changed since
	// the listing and wins: do nothing. A 404 means the memory was deleted
	// meanwhile: create it instead.
	Update
	// DeleteRemote deletes memory MemoryID on the server with
	// expected_content_sha256 RemoteSHA. Apply must first re-check that the
	// file is still absent (a folder in its place, or a file in place of a
	// folder above it, counts as absent: the agent reshaped the path) and
	// that the folder's marker still names the store (the folder may have
	// been destroyed since the scan), then call
	// State.MarkDeleteSent before sending. Success or 404 calls
	// State.MarkGone; a 409 means the server changed and wins: do nothing,
	// the next sync restores the file.
	DeleteRemote
	// RemoveLocal removes the file, whose memory the server deleted, only if
	// it still holds Local.SHA256 (a fresh edit survives and is re-created
	// by the next sync), pruning emptied folders; then State.MarkGone.
	RemoveLocal

	// Adopt: both sides already hold the same content; it became the base.
	Adopt
	// WaitCorroboration: the file is gone locally but has not stayed gone
	// for the corroboration window yet; the server delete waits.
	WaitCorroboration
	// DeleteCapped: a corroborated server delete held back by the per-sync
	// cap; a later sync sends it.
	DeleteCapped
	// LogOnlyDelete: a corroborated server delete that deletion mode
	// log_only reports instead of sending.
	LogOnlyDelete
	// KeepRemote: the file was deleted locally but deletion mode disabled
	// keeps the memory on the server.
	KeepRemote
	// KeepUnsynced: a change in a read-only store's folder (an edit, a new
	// file, a deletion) that is never pushed; the next server change to the
	// memory overwrites it.
	KeepUnsynced
	// SkipUnsyncable: the file cannot be a memory (not UTF-8, or larger than
	// api.MaxContentBytes); it stays in the folder, unsynced, until it changes.
	SkipUnsyncable
	// SkipRefused: the server refused this exact content before; it is not
	// sent again until the file changes.
	SkipRefused
	// SkipCaseCollision: on a case-insensitive filesystem this path differs
	// only in case from another one (or lives in such a folder); neither is
	// synced, so two memories are never merged into one file.
	SkipCaseCollision
	// SkipObscured: the path, or a folder above it, is not a regular file or
	// directory in the folder (a symlink, a FIFO) or could not be read; the
	// memory is left untouched on both sides.
	SkipObscured
	// SkipInvalidPath: the path cannot be a memory and a file at once (the
	// server listed something invalid, or the reserved marker path).
	SkipInvalidPath
)

var kindNames = [...]string{
	Download:          "download",
	Create:            "create",
	Update:            "update",
	DeleteRemote:      "delete_remote",
	RemoveLocal:       "remove_local",
	Adopt:             "adopt",
	WaitCorroboration: "wait_corroboration",
	DeleteCapped:      "delete_capped",
	LogOnlyDelete:     "log_only_delete",
	KeepRemote:        "keep_remote",
	KeepUnsynced:      "keep_unsynced",
	SkipUnsyncable:    "skip_unsyncable",
	SkipRefused:       "skip_refused",
	SkipCaseCollision: "skip_case_collision",
	SkipObscured:      "skip_obscured",
	SkipInvalidPath:   "skip_invalid_path",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// IO reports whether apply has work to do for this kind.
func (k Kind) IO() bool { return k >= Download && k <= RemoveLocal }

// Action is one decision about one path.
type Action struct {
	Kind Kind
	// Path is the memory path, "/a/b.md"; the file is at the same path
	// relative to the folder.
	Path string
	// MemoryID is the server's memory (Download, Update, DeleteRemote).
	MemoryID string
	// RemoteSHA is the server content the action is based on: the listed
	// sha for Download, the update's content_sha256 precondition for Update,
	// the delete's expected_content_sha256 for DeleteRemote.
	RemoteSHA string
	// Local is what the file must be immediately before apply acts: absent
	// (Download of a memory the folder lacks, DeleteRemote), or holding a
	// sha (the content a Download overwrites, the bytes a Create or Update
	// sends, the file RemoveLocal removes).
	Local confined.Precondition
	// Base is set on a Download of a [Plan.Rebuild] whose memory the server
	// still holds as both sides last agreed (its state's Base). The rebuild
	// starts the state over, so that a download that fails is simply tried
	// again; but if the agent writes the path — or a file where its folder
	// should be — while the rebuild runs, the download leaves it alone and
	// apply keeps Base as the path's base, so that the next sync reads the
	// agent's change as an edit (or a deletion) of that memory, not as a
	// conflict the server wins.
	Base string
	// Keep is set on a Download that overwrites a local edit: both sides
	// changed and the server wins. Apply first copies the file (if it still
	// holds Local.SHA256) into the store's kept folder, durably, and logs
	// where; if the copy cannot be made, the file is not overwritten.
	Keep bool
}

// Note is a message for the operator about a decision.
type Note struct {
	Level slog.Level
	// Path is the memory path concerned, or "" for the whole folder.
	Path string
	Msg  string
	// Err is the underlying problem, if any.
	Err error
	// Persistent marks a condition rather than an event: an untrusted
	// marker, a case collision, an obscured entry, an invalid listed path,
	// a log_only deletion or a delete cap still in force. Every sync
	// reports it again while it lasts, so a caller that logs each sync
	// logs it once, until it goes away, to keep the log readable.
	Persistent bool
}

// Plan is the outcome of [Reconcile].
type Plan struct {
	// Rebuild means the folder is to be rebuilt from the server: apply must
	// create the folder if it is gone, write the marker, then run the
	// downloads. Nothing is uploaded or deleted.
	Rebuild bool
	// Actions, in path order, at most one per path.
	Actions []Action
	// Notes to log, in the order the decisions were made.
	Notes []Note
	// Next is the state to keep after this sync, as if every action with IO
	// failed without effect; apply advances it with the Mark methods for
	// the ones that succeed. Reconcile never modifies its input state.
	Next State
}
