package memsync

import (
	"maps"
	"time"
)

// State is what a sync remembers about one store between cycles, by memory
// path ("/a/b.md"). It starts empty at mount (filled by MarkSynced for each
// memory written to the folder), is replaced by each [Plan.Next], and is
// advanced by apply through the Mark methods as actions succeed. Each
// store's journal holds it durably (see StateDir), so that it outlives a
// crash of the worker.
type State map[string]PathState

// PathState is the memory of one path. The zero value means "nothing known"
// and is never stored.
type PathState struct {
	// Base is the content_sha256 both sides held after the last successful
	// sync of this path; "" if they never agreed (a new file, a failed
	// download). Changes are detected against it on each side.
	Base string `json:"base,omitempty"`
	// MissingSince is when a sync first saw the file gone from the folder
	// while its memory was unchanged on the server: the start of the
	// corroboration window, and how a wiped folder (everything gone at once)
	// is told apart from files deleted one by one.
	MissingSince time.Time `json:"missing_since,omitzero"`
	// Held is the sha of local content that is not to be pushed: the server
	// refused it (400/413), it cannot be a memory (not UTF-8, too large), or
	// the store is read-only. It is warned about once and not retried until
	// the file's content changes.
	Held string `json:"held,omitempty"`
	// Sent is the sha of content whose upload was sent but whose response
	// never arrived: it may have landed. The next listing settles it — a
	// memory holding exactly this sha is that upload — so a lost response
	// causes neither a duplicate create nor a false conflict.
	Sent string `json:"sent,omitempty"`
	// DeleteSent records a server delete that was sent but whose response
	// never arrived. If the next listing no longer has the memory, the
	// delete landed: the base is dropped, so a file re-created since (even
	// with the same content) reads as new and is uploaded, not removed as a
	// leftover of a memory deleted on the server.
	DeleteSent bool `json:"delete_sent,omitempty"`
	// RemoveStarted records, in the journal only, that the file was about
	// to be removed because the server deleted its memory. If the worker
	// dies before the outcome is journaled, the next scan settles it: a
	// file gone was removed by the worker, not deleted by the agent, so its
	// base is dropped — a memory at the path on the server then reads as
	// new and is downloaded, never deleted as the agent's deletion.
	RemoveStarted bool `json:"remove_started,omitempty"`
	// Fetching records, in the journal only, the sha of a download about
	// to be written to the file. If the worker dies before the outcome is
	// journaled, the next scan settles it: a file holding exactly this sha
	// is that download, in step with the server as it was then — not a
	// file of the agent's to upload, which would re-create a memory
	// deleted since or overwrite a newer one.
	Fetching string `json:"fetching,omitempty"`
}

func (ps PathState) isZero() bool { return ps == PathState{} }

// unsettled reports whether any path holds the record of a step whose
// outcome is not known yet (Sent, DeleteSent, RemoveStarted, Fetching),
// which the next listing and scan settle.
func (s State) unsettled() bool {
	for _, ps := range s {
		if ps.Sent != "" || ps.DeleteSent || ps.RemoveStarted || ps.Fetching != "" {
			return true
		}
	}
	return false
}

// Clone returns an independent copy.
func (s State) Clone() State { return maps.Clone(s) }

// MarkSynced records that the folder and the server both hold content sha at
// path: after a download was written, an upload answered, or at mount.
func (s State) MarkSynced(path, sha string) { s[path] = PathState{Base: sha} }

// MarkGone records that neither side has path any more: after a server
// delete succeeded (or found the memory already gone), or a local file was
// removed because its memory was deleted.
func (s State) MarkGone(path string) { delete(s, path) }

// MarkRefused records that the server refused content localSHA for path with
// a 400 or 413; it is not sent again until the file changes.
func (s State) MarkRefused(path, localSHA string) {
	ps := s[path]
	ps.Held, ps.Sent = localSHA, ""
	s[path] = ps
}

// MarkDeleteSent records, before a server delete request goes out, that
// its outcome is unknown until a response arrives (MarkGone) or the next
// listing settles it.
func (s State) MarkDeleteSent(path string) {
	ps := s[path]
	ps.DeleteSent = true
	s[path] = ps
}

// MarkRemoveStarted records, before a file whose memory the server deleted
// is removed, that its outcome is unknown until the state after the
// removal is journaled.
func (s State) MarkRemoveStarted(path string) {
	ps := s[path]
	ps.RemoveStarted = true
	s[path] = ps
}

// MarkFetching records, before a download of content sha is written to
// path, that its outcome is unknown until the state after it is
// journaled.
func (s State) MarkFetching(path, sha string) {
	ps := s[path]
	ps.Fetching = sha
	s[path] = ps
}

// MarkSent records, before an upload request goes out, the sha of the bytes
// sent. If the response is lost the record stays and the next sync's listing
// settles it; a successful response's MarkSynced clears it.
func (s State) MarkSent(path, sha string) {
	ps := s[path]
	ps.Sent = sha
	s[path] = ps
}

// keptState is how a store keeps its State between syncs: the paths whose
// state is only a Base — nearly all of them, nearly always — as a plain
// path → sha map, and the few others as they are. A PathState is 96
// bytes, most of them fields that are almost never set, so a State kept
// for every store of every session for a session's whole life was the
// largest thing a worker held. A sync expands it (full) for Reconcile and
// keeps the plan's state again (keepState).
type keptState struct {
	bases map[string]string
	rest  State
}

func keepState(s State) keptState {
	k := keptState{bases: make(map[string]string, len(s))}
	for p, ps := range s {
		k.set(p, ps)
	}
	return k
}

// set records ps as path's state; a zero ps forgets the path.
func (k *keptState) set(path string, ps PathState) {
	switch {
	case ps.isZero():
		delete(k.bases, path)
		delete(k.rest, path)
	case ps == PathState{Base: ps.Base}:
		delete(k.rest, path)
		if k.bases == nil {
			k.bases = map[string]string{}
		}
		k.bases[path] = ps.Base
	default:
		delete(k.bases, path)
		if k.rest == nil {
			k.rest = State{}
		}
		k.rest[path] = ps
	}
}

// get returns path's state, and whether there is one.
func (k keptState) get(path string) (PathState, bool) {
	if b, ok := k.bases[path]; ok {
		return PathState{Base: b}, true
	}
	ps, ok := k.rest[path]
	return ps, ok
}

// full returns the state as a State of its own.
func (k keptState) full() State {
	s := make(State, len(k.bases)+len(k.rest))
	for p, b := range k.bases {
		s[p] = PathState{Base: b}
	}
	maps.Copy(s, k.rest)
	return s
}
