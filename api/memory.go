package api

import "time"

// MemoryStore is a named, versioned collection of memories.
type MemoryStore struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"` // "memory_store"
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	ArchivedAt  *time.Time        `json:"archived_at"`
	// VersionRetention is memstore's own (ExtensionRetentionField); nil
	// from a server that does not offer it.
	VersionRetention *VersionRetention `json:"memstore_version_retention,omitempty"`
}

// Memory is one file of a store. Content is nil unless the full view was
// asked for; ContentSHA256 is the lowercase hex SHA-256 of its UTF-8 bytes.
type Memory struct {
	ID               string    `json:"id"`
	Type             string    `json:"type"` // "memory"
	MemoryStoreID    string    `json:"memory_store_id"`
	Path             string    `json:"path"`
	Content          *string   `json:"content"`
	ContentSHA256    string    `json:"content_sha256"`
	ContentSizeBytes int64     `json:"content_size_bytes"`
	MemoryVersionID  string    `json:"memory_version_id"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// MemoryPrefix is a folder roll-up in a depth-limited listing; Path ends in "/".
type MemoryPrefix struct {
	Type string `json:"type"` // "memory_prefix"
	Path string `json:"path"`
}

// MemoryListItem is one entry of a memory listing: either a memory or a
// prefix, told apart by Type. Exactly one of the two pointers is set.
type MemoryListItem struct {
	Memory *Memory
	Prefix *MemoryPrefix
}

// Memory version operations.
const (
	OperationCreated  = "created"
	OperationModified = "modified"
	OperationDeleted  = "deleted"
)

// MemoryVersion is one immutable change of a memory. A redacted version keeps
// its audit fields and loses content, hash, size and path.
type MemoryVersion struct {
	ID               string     `json:"id"`
	Type             string     `json:"type"` // "memory_version"
	MemoryID         string     `json:"memory_id"`
	MemoryStoreID    string     `json:"memory_store_id"`
	Operation        string     `json:"operation"`
	Path             *string    `json:"path"`
	Content          *string    `json:"content"`
	ContentSHA256    *string    `json:"content_sha256"`
	ContentSizeBytes *int64     `json:"content_size_bytes"`
	CreatedAt        time.Time  `json:"created_at"`
	CreatedBy        Actor      `json:"created_by"`
	RedactedAt       *time.Time `json:"redacted_at"`
	RedactedBy       *Actor     `json:"redacted_by"`
}

// Actor types: who made a change.
const (
	SessionActor = "session_actor"
	APIActor     = "api_actor"
	UserActor    = "user_actor"
)

// Actor says who made a change: a session (through its worker), an API key,
// or a console user. Only the id field of its type is set.
type Actor struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id,omitempty"`
	APIKeyID  string `json:"api_key_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`
}

// Deleted is the response of a delete: {id, type:"memory_store_deleted"|"memory_deleted"|…}.
type Deleted struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// CreateMemoryStoreRequest is the body of POST /v1/memory_stores.
type CreateMemoryStoreRequest struct {
	Name        string            `json:"name"`
	Description *string           `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// UpdateMemoryStoreRequest is the body of POST /v1/memory_stores/{id}. A nil
// field is left alone; a metadata key mapped to nil is deleted.
type UpdateMemoryStoreRequest struct {
	Name        *string            `json:"name,omitempty"`
	Description *string            `json:"description,omitempty"`
	Metadata    map[string]*string `json:"metadata,omitempty"`
	// VersionRetention, memstore's own, replaces the store's policy.
	VersionRetention *VersionRetention `json:"memstore_version_retention,omitempty"`
}

// CreateMemoryRequest is the body of POST /v1/memory_stores/{id}/memories.
type CreateMemoryRequest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Precondition guards an update: it applies only if the stored content still
// hashes to ContentSHA256.
type Precondition struct {
	Type          string `json:"type"` // "content_sha256"
	ContentSHA256 string `json:"content_sha256"`
}

// UpdateMemoryRequest is the body of POST /v1/memory_stores/{id}/memories/{mem}:
// new content, a new path (a rename keeps the id), or both.
type UpdateMemoryRequest struct {
	Content      *string       `json:"content,omitempty"`
	Path         *string       `json:"path,omitempty"`
	Precondition *Precondition `json:"precondition,omitempty"`
}

// Memory views.
const (
	ViewBasic = "basic"
	ViewFull  = "full"
)

// Memory limits of the wire contract.
const (
	MaxContentBytes       = 102_400
	MaxPathBytes          = 1_024
	DefaultMaxMemories    = 10_000
	MaxStoreNameChars     = 255
	MaxDescriptionChars   = 1_024
	MaxMetadataPairs      = 16
	MaxMetadataKeyChars   = 64
	MaxMetadataValueChars = 512
	MaxFullViewListLimit  = 20
)
