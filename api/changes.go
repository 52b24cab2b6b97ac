package api

import "time"

// The change feed and the snapshot are memstore's own (SPEC §8): they let a
// worker sync at the cost of what changed instead of listing a whole store.
// Official clients never send these requests; a server that offers them
// says so in the ExtensionsHeader of its store and listing responses, which
// is how a worker tells memstore from the hosted API.
const (
	// ExtensionsHeader lists the extensions a server offers, comma
	// separated.
	ExtensionsHeader = "Memstore-Extensions"
	// ExtensionChanges is GET /v1/memory_stores/{id}/changes.
	ExtensionChanges = "changes"
	// ExtensionSnapshot is GET /v1/memory_stores/{id}/snapshot.
	ExtensionSnapshot = "snapshot"
	// SequenceHeader carries, on a snapshot response, the sequence the
	// snapshot is consistent at.
	SequenceHeader = "Memstore-Sequence"
	// SnapshotContentType is the media type of a snapshot stream.
	SnapshotContentType = "application/vnd.memstore.snapshot"
	// MaxChangesWait caps wait_ms on the change feed, so a long poll ends
	// before common proxy timeouts.
	MaxChangesWait = 30 * time.Second
	// MaxChangesLimit caps limit on the change feed (default too).
	MaxChangesLimit = 1000
)

// MemoryChange is one entry of the change feed: one version of one memory.
// Sequence is store-wide, strictly increasing and gap-free. Path, hash and
// size are nil when the version was redacted; a later entry for the same
// memory (its current version, or its deletion) then says where it stands.
type MemoryChange struct {
	Type             string    `json:"type"` // "memory_change"
	Sequence         int64     `json:"sequence"`
	MemoryID         string    `json:"memory_id"`
	MemoryVersionID  string    `json:"memory_version_id"`
	Operation        string    `json:"operation"` // OperationCreated, OperationModified or OperationDeleted
	Path             *string   `json:"path"`
	ContentSHA256    *string   `json:"content_sha256"`
	ContentSizeBytes *int64    `json:"content_size_bytes"`
	CreatedAt        time.Time `json:"created_at"`
}

// MemoryChangeList answers the change feed: the changes after the cursor,
// oldest first, and the store's latest sequence. When HasMore is set the
// next request passes the last entry's sequence as after.
type MemoryChangeList struct {
	Type           string         `json:"type"` // "memory_change_list"
	Data           []MemoryChange `json:"data"`
	LatestSequence int64          `json:"latest_sequence"`
	HasMore        bool           `json:"has_more"`
}

// SnapshotEntry heads one memory in a snapshot stream: the entry is one JSON
// line, followed by exactly ContentSizeBytes bytes of content (for
// Type "memory"). The stream ends with a line of Type "end" carrying the
// count of memories and the sequence, so a cut stream is never mistaken for
// a complete one.
type SnapshotEntry struct {
	Type             string `json:"type"` // "memory" or "end"
	ID               string `json:"id,omitempty"`
	Path             string `json:"path,omitempty"`
	ContentSHA256    string `json:"content_sha256,omitempty"`
	ContentSizeBytes int64  `json:"content_size_bytes"`
	MemoryVersionID  string `json:"memory_version_id,omitempty"`
	// Count and Sequence are set on the "end" line only.
	Count    int   `json:"count,omitempty"`
	Sequence int64 `json:"sequence,omitempty"`
}
