package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/retention"
)

// MemoryStores persists memory stores, their memories and the immutable
// versions of those memories (SPEC §2).
//
// It speaks rows (MemoryStoreRow, MemoryRow, VersionRow, Actor), not the
// API's wire objects: the wire's discriminators, its list union of
// memories and prefixes and its pointers for what a view leaves out are
// the HTTP layer's business (internal/server maps rows to the wire in one
// place), so an API change never reaches the SQL. Inputs are validated by
// the caller (internal/validate); a backend enforces only the rules that
// need the current state and therefore atomicity, and reports them as the
// typed errors below. Those rules live once, backend-neutral, in
// memoryrules.go and memorywrites.go; package sqlstore supplies the SQL.
//
// Every method is one transaction. Methods addressing a memory or version
// take its store id too and answer ErrNotFound when the object lives in
// another store, so an id from one store never reaches into another.
type MemoryStores interface {
	// CreateMemoryStore stores a new store with a fresh id.
	CreateMemoryStore(ctx context.Context, in NewMemoryStore) (MemoryStoreRow, error)
	// GetMemoryStore returns one store, archived or not.
	GetMemoryStore(ctx context.Context, id string) (MemoryStoreRow, error)
	// ListMemoryStores lists stores newest first.
	ListMemoryStores(ctx context.Context, q MemoryStoreQuery) (Page[MemoryStoreRow], error)
	// UpdateMemoryStore applies a patch. It refuses an archived store
	// (ErrStoreArchived) and a patch that would leave more than
	// api.MaxMetadataPairs metadata pairs (*MetadataLimitError). A patch
	// that changes nothing leaves updated_at alone.
	UpdateMemoryStore(ctx context.Context, id string, p MemoryStorePatch) (MemoryStoreRow, error)
	// ArchiveMemoryStore makes a store read-only for good. Archiving an
	// archived store returns it unchanged.
	ArchiveMemoryStore(ctx context.Context, id string) (MemoryStoreRow, error)
	// DeleteMemoryStore deletes a store with all its memories and versions.
	// It refuses a store that a session may still mount
	// (*StoreInUseError): one attached to a session that is not
	// terminated (a new message would bring a worker back), or whose work
	// item a worker still holds (its final sync runs after termination).
	DeleteMemoryStore(ctx context.Context, id string) error

	Memories
	MemoryVersions
	Search
}

// Memories persists the live memories of the stores; each write also
// writes the memory's version.
type Memories interface {
	// CreateMemory adds a memory at a free path and writes its "created"
	// version. It never overwrites: a path that is taken, or that collides
	// with a memory used as its directory (/a beside /a/b), is a
	// *PathConflictError. It refuses an archived store (ErrStoreArchived) and
	// a store already holding in.MaxMemories memories (*StoreFullError).
	CreateMemory(ctx context.Context, in NewMemory) (MemoryRow, error)
	// GetMemory returns one memory with its content.
	GetMemory(ctx context.Context, storeID, memoryID string) (MemoryRow, error)
	// GetMemoryAt returns the memory at path with its content, ErrNotFound
	// when none is there.
	GetMemoryAt(ctx context.Context, storeID, path string) (MemoryRow, error)
	// UpdateMemory changes a memory's content, path or both and writes one
	// "modified" version; the id never changes. When the stored content and
	// path already equal the request it writes nothing and returns
	// changed=false, whatever the precondition says (a retried request
	// whose first attempt landed succeeds). Otherwise a precondition that
	// does not match is a *PreconditionFailedError, a path that is taken is
	// a *PathConflictError, and an archived store is ErrStoreArchived. A
	// full store still accepts updates. The memory returned has its
	// content.
	UpdateMemory(ctx context.Context, in MemoryUpdate) (m MemoryRow, changed bool, err error)
	// DeleteMemory removes a memory and writes its "deleted" version; the
	// earlier versions stay. When expectedSHA256 is set and differs from the
	// stored content's hash nothing is deleted (*PreconditionFailedError).
	// Allowed on archived stores.
	DeleteMemory(ctx context.Context, storeID, memoryID, expectedSHA256 string, by Actor) error
	// ListMemories lists a store's memories in byte-wise path order, with
	// deeper paths rolled up into prefixes when q.Depth > 0.
	ListMemories(ctx context.Context, q MemoryQuery) (Page[MemoryEntry], error)
	// CountMemories counts a store's live memories.
	CountMemories(ctx context.Context, storeID string) (int, error)
	// MemoryStoreUsage sums up the live memories under prefix (ending in
	// "/"; "/" is the whole store) for a person looking at a store or a
	// folder: how many, their bytes, and the newest updated_at among them.
	MemoryStoreUsage(ctx context.Context, storeID, prefix string) (StoreUsage, error)
}

// MemoryVersions reads and redacts the immutable history of memories.
type MemoryVersions interface {
	// GetMemoryVersion returns one version with its content.
	GetMemoryVersion(ctx context.Context, storeID, versionID string) (VersionRow, error)
	// ListMemoryVersions lists a store's versions newest first.
	ListMemoryVersions(ctx context.Context, q MemoryVersionQuery) (Page[VersionRow], error)
	// RedactMemoryVersion clears a version's content, hash, size and path
	// and records who did it; the audit row stays. The version a live
	// memory currently points at cannot be redacted (ErrRedactHead): that
	// would leave the memory without content. Redacting a redacted version
	// returns it unchanged. Allowed on archived stores.
	RedactMemoryVersion(ctx context.Context, storeID, versionID string, by Actor) (VersionRow, error)

	// ListChanges is the change feed (SPEC §8): the store's versions with
	// a sequence above after, oldest first, at most limit, without
	// content, and the store's latest sequence. Every version gets the
	// store's next sequence in the transaction that writes it, so
	// sequences are strictly increasing and gap-free per store and survive
	// restarts. A cursor above the latest sequence was not issued by this
	// store (*SequenceAheadError).
	ListChanges(ctx context.Context, storeID string, after int64, limit int) (ChangePage, error)
	// Snapshot reads the store's memories under prefix ("/" for all), with
	// their content, in path order, from one consistent view: it calls at
	// once with the sequence that view is at, then each for every memory.
	// An error from a callback ends the read and is returned.
	Snapshot(ctx context.Context, storeID, prefix string, at func(sequence int64) error, each func(MemoryRow) error) error
}

// MemoryStoreRow is a memory store as stored.
type MemoryStoreRow struct {
	ID          string
	Name        string
	Description string
	Metadata    map[string]string // never nil
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ArchivedAt  time.Time // zero while the store is writable
	// Retention is the store's own version retention policy; nil follows
	// the server's default.
	Retention *retention.Policy
	// PrunedThrough is the highest sequence whose version retention
	// deleted (0: none): the change feed cannot answer a cursor below it.
	PrunedThrough int64
}

// Archived reports whether the store is read-only for good.
func (s MemoryStoreRow) Archived() bool { return !s.ArchivedAt.IsZero() }

// MemoryRow is a live memory: its path and the head version it points at.
type MemoryRow struct {
	ID               string
	StoreID          string
	Path             string
	ContentSHA256    string
	ContentSizeBytes int64
	VersionID        string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	// Content is the head version's content, nil when the read did not
	// load it (a listing without content): "" is an empty memory.
	Content *string
}

// MemoryEntry is one entry of a memory listing: a memory, or, when Prefix
// is set, a directory rolled up at the listing's depth.
type MemoryEntry struct {
	Memory MemoryRow
	// Prefix is the rolled-up directory, ending in "/"; "" for a memory.
	Prefix string
}

// Operation is what a version did to its memory.
type Operation string

// The operations, as the versions table stores them.
const (
	OpCreated  Operation = "created"
	OpModified Operation = "modified"
	OpDeleted  Operation = "deleted"
)

// VersionRow is one immutable version of a memory, which is also one entry
// of the store's change feed (Sequence).
type VersionRow struct {
	ID        string
	StoreID   string
	MemoryID  string
	Operation Operation
	Sequence  int64
	// Path is where the memory was (for a deletion: where it was
	// deleted from); "" once redacted.
	Path string
	// Content, ContentSHA256 and ContentSizeBytes are what the version
	// wrote; they are kept only while HasContent. Content is "" too when
	// the read did not load it.
	Content          string
	ContentSHA256    string
	ContentSizeBytes int64
	CreatedAt        time.Time
	CreatedBy        Actor
	RedactedAt       time.Time // zero unless redacted
	RedactedBy       Actor     // zero unless redacted
}

// Redacted reports whether the version's content was cleared.
func (v VersionRow) Redacted() bool { return !v.RedactedAt.IsZero() }

// HasContent reports whether the version keeps content, hash and size: a
// deletion wrote none and a redaction cleared them.
func (v VersionRow) HasContent() bool { return v.Operation != OpDeleted && !v.Redacted() }

// ActorKind says what made a change.
type ActorKind string

// The actor kinds, as versions store them.
const (
	ActorSession ActorKind = "session_actor"
	ActorAPIKey  ActorKind = "api_actor"
	ActorUser    ActorKind = "user_actor"
)

// Actor is who made a change: a session (through its worker), an API key
// or a console user, and that one's id.
type Actor struct {
	Kind ActorKind
	ID   string
}

// ChangePage is one batch of the change feed.
type ChangePage struct {
	Changes []VersionRow
	// Latest is the store's latest sequence when the batch was read.
	Latest int64
	// More reports changes after the last one returned.
	More bool
}

// SequenceAheadError refuses a change-feed cursor above the store's latest
// sequence: one from another store, or from a store that was deleted and
// recreated.
type SequenceAheadError struct {
	After, Latest int64
}

func (e *SequenceAheadError) Error() string {
	return fmt.Sprintf("storage: sequence %d is ahead of the store's latest sequence %d", e.After, e.Latest)
}

// NewMemoryStore is the input of CreateMemoryStore.
type NewMemoryStore struct {
	Name        string
	Description string
	Metadata    map[string]string
	// Retention is the store's own retention policy; nil follows the
	// server's default.
	Retention *retention.Policy
}

// MemoryStorePatch is the input of UpdateMemoryStore: nil fields are left
// alone, and a metadata key mapped to nil is deleted.
type MemoryStorePatch struct {
	Name        *string
	Description *string
	Metadata    map[string]*string
	// Retention, when set, replaces the store's retention policy.
	Retention *RetentionSetting
}

// MemoryStoreQuery selects stores for ListMemoryStores.
type MemoryStoreQuery struct {
	Limit           int
	Cursor          string // a Page.Next from the same listing, or ""
	IncludeArchived bool
	CreatedGTE      *time.Time
	CreatedLTE      *time.Time
}

// StoreUsage is what MemoryStoreUsage reports. LastChange is nil when no
// memory lives under the prefix.
type StoreUsage struct {
	Memories   int
	Bytes      int64
	LastChange *time.Time
}

// NewMemory is the input of CreateMemory.
type NewMemory struct {
	StoreID string
	Path    string
	Content string
	By      Actor
	// MaxMemories is the store's memory limit; the server's configuration
	// decides it.
	MaxMemories int
}

// MemoryUpdate is the input of UpdateMemory. At least one of Content and
// Path is set.
type MemoryUpdate struct {
	StoreID  string
	MemoryID string
	Content  *string
	Path     *string
	// IfSHA256, when set, is the precondition: the stored content must
	// hash to it.
	IfSHA256 string
	By       Actor
}

// ContentSHA256 is the hash of the new content, "" when the update keeps
// the content; backends compute it before their write transaction.
func (u MemoryUpdate) ContentSHA256() string {
	if u.Content == nil {
		return ""
	}
	return ContentHash(*u.Content)
}

// MemoryQuery selects memories for ListMemories.
type MemoryQuery struct {
	StoreID string
	// Prefix restricts the listing to paths under it; it ends in "/" ("/"
	// lists the whole store).
	Prefix string
	// Depth 0 lists the whole subtree; Depth n lists paths at most n
	// segments below Prefix and rolls deeper ones up into one prefix
	// entry per directory n segments down.
	Depth       int
	Limit       int
	Cursor      string
	WithContent bool
}

// MemoryVersionQuery selects versions for ListMemoryVersions. Empty filters
// match everything.
type MemoryVersionQuery struct {
	StoreID     string
	MemoryID    string
	Operation   Operation
	CreatedBy   Actor // only versions created by that actor, when set
	CreatedGTE  *time.Time
	CreatedLTE  *time.Time
	Limit       int
	Cursor      string
	WithContent bool
}

// Page is one page of a listing. Next is an opaque cursor for the following
// page, "" on the last one.
type Page[T any] struct {
	Items []T
	Next  string
}

// ErrStoreArchived reports a write to an archived memory store.
var ErrStoreArchived = errors.New("storage: memory store is archived")

// ErrRedactHead reports an attempt to redact the version that a live memory
// currently points at.
var ErrRedactHead = errors.New("storage: the head version of a live memory cannot be redacted")

// ErrBadCursor reports a page cursor this listing did not issue.
var ErrBadCursor = errors.New("storage: malformed page cursor")

// PathConflictError reports that a memory already occupies the requested
// path, or a path that would make one of the two a directory of the other.
type PathConflictError struct {
	// Path is the path that blocks the write: the requested path itself,
	// or an ancestor or descendant of it.
	Path     string
	MemoryID string
}

func (e *PathConflictError) Error() string {
	return fmt.Sprintf("storage: path conflicts with memory %s at %s", e.MemoryID, e.Path)
}

// PreconditionFailedError reports that the stored content no longer hashes
// to what the caller expected.
type PreconditionFailedError struct {
	CurrentSHA256 string
}

func (e *PreconditionFailedError) Error() string {
	return "storage: content precondition failed; current content_sha256 is " + e.CurrentSHA256
}

// StoreFullError reports a create into a store that already holds its
// limit of memories.
type StoreFullError struct {
	Limit int
}

func (e *StoreFullError) Error() string {
	return fmt.Sprintf("storage: memory store holds its limit of %d memories", e.Limit)
}

// StoreInUseError refuses the deletion of a memory store that a session
// may still mount; SessionID names one such session, Status its status.
type StoreInUseError struct {
	SessionID string
	Status    string
}

func (e *StoreInUseError) Error() string {
	return fmt.Sprintf("storage: memory store is attached to session %s (%s), which may still mount it", e.SessionID, e.Status)
}

// MetadataLimitError reports a store patch that would leave more metadata
// pairs than allowed.
type MetadataLimitError struct {
	Count int
}

func (e *MetadataLimitError) Error() string {
	return fmt.Sprintf("storage: metadata would hold %d pairs (limit %d)", e.Count, api.MaxMetadataPairs)
}
