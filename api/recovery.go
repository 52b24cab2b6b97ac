package api

// ExtensionRecoveries is POST /v1/environments/{id}/recoveries, memstore's
// own: a worker uploads, with its environment key, the edits a killed
// worker left on its disk for a session it no longer holds (the sessions
// token of that session died with its work item). The server offers it
// when GET /v1/environments/{id} lists it in ExtensionsHeader.
const ExtensionRecoveries = "recoveries"

// RecoveryRequest is one file of a folder a killed worker left.
// BaseContentSHA256 is the content_sha256 the journal says the server held
// at the folder's last sync, nil for a file that is new since.
type RecoveryRequest struct {
	SessionID         string  `json:"session_id"`
	MemoryStoreID     string  `json:"memory_store_id"`
	Path              string  `json:"path"`
	Content           string  `json:"content"`
	BaseContentSHA256 *string `json:"base_content_sha256"`
}

// Recovery outcomes.
const (
	// RecoveryCreated: a new memory at the path.
	RecoveryCreated = "created"
	// RecoveryUpdated: a new version of the memory at the path, whose
	// content was still the base.
	RecoveryUpdated = "updated"
	// RecoveryUnchanged: the server already held this content at the path
	// (or in a conflicted copy made by an earlier try): nothing written.
	RecoveryUnchanged = "unchanged"
	// RecoveryConflictCopy: the server's memory changed since the base (or
	// was deleted, or a file is new on both sides); it stays, and the
	// recovered content is a new memory at ConflictCopyPath.
	RecoveryConflictCopy = "conflict_copy"
)

// Recovery is the answer: what became of the file, and the memory that now
// holds its content (without the content).
type Recovery struct {
	Type    string `json:"type"` // "memory_recovery"
	Outcome string `json:"outcome"`
	Memory  Memory `json:"memory"`
}

// ConflictCopyMarker is in the path of every conflicted copy a recovery
// makes: "<path>.conflict-<session>-<time>" (see ConflictCopyPath), so
// that a person (and the console) can tell one from the agent's files.
const ConflictCopyMarker = ".conflict-"
