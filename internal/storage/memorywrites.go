package storage

import (
	"context"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
)

// The memory writes, decided once for every backend: each runs inside one
// write transaction and reaches the database only through MemoryTx, which
// package sqlstore implements in SQL.

// MemoryTx is what the memory writes need from a backend inside one write
// transaction: reads and writes of rows, with no rule of its own.
type MemoryTx interface {
	// LockStore reads what a memory write needs of a store and orders the
	// write after every earlier write to it (a row lock where writers run
	// at once). ErrNotFound when there is no such store.
	LockStore(ctx context.Context, storeID string) (StoreState, error)
	// PathConflict returns a *PathConflictError naming the memory, other
	// than self, that occupies path, is a file where path needs a
	// directory (an ancestor), or is a file inside path (a descendant),
	// preferring the path itself, then the shallowest ancestor; nil when
	// path is free.
	PathConflict(ctx context.Context, storeID, path, self string) error
	// ReadMemory reads one memory of the store, with its content when
	// withContent; ErrNotFound when the store holds no such memory.
	ReadMemory(ctx context.Context, storeID, memoryID string, withContent bool) (MemoryRow, error)
	// Now is the time the write is stamped with.
	Now(ctx context.Context) (time.Time, error)
	// AddVersion writes v under the store's next change-feed sequence and
	// moves the store's live memory count by delta.
	AddVersion(ctx context.Context, v VersionRow, delta int) error
	// InsertMemory writes a new memory.
	InsertMemory(ctx context.Context, m MemoryRow) error
	// UpdateMemory writes a memory's new head; moved says its path changed.
	UpdateMemory(ctx context.Context, m MemoryRow, moved bool) error
	// DeleteMemory removes a memory.
	DeleteMemory(ctx context.Context, memoryID string) error
	// ReadVersion reads one version of the store with its content;
	// ErrNotFound when the store holds no such version.
	ReadVersion(ctx context.Context, storeID, versionID string) (VersionRow, error)
	// IsHead reports whether the live memory memoryID points at the
	// version.
	IsHead(ctx context.Context, memoryID, versionID string) (bool, error)
	// Redact clears a version's path, content, hash and size and records
	// when and by whom.
	Redact(ctx context.Context, versionID string, at time.Time, by Actor) error
}

// StoreState is what a memory write needs to know of its store.
type StoreState struct {
	Archived bool
	Memories int // live memories before the write
}

// ContentSHA256 is the hash of the new memory's content; backends compute
// it before their write transaction.
func (in NewMemory) ContentSHA256() string { return ContentHash(in.Content) }

// CreateMemoryIn is CreateMemory inside tx; sha is in.ContentSHA256().
func CreateMemoryIn(ctx context.Context, tx MemoryTx, in NewMemory, sha string) (MemoryRow, error) {
	if err := CheckActor(in.By); err != nil {
		return MemoryRow{}, err
	}
	limit := in.MaxMemories
	if limit <= 0 {
		limit = api.DefaultMaxMemories
	}
	st, err := tx.LockStore(ctx, in.StoreID)
	if err != nil {
		return MemoryRow{}, err
	}
	if st.Archived {
		return MemoryRow{}, ErrStoreArchived
	}
	// The conflict comes first: a client retrying a create whose response
	// it lost learns the memory's id even when the store has filled up
	// since.
	if err := tx.PathConflict(ctx, in.StoreID, in.Path, ""); err != nil {
		return MemoryRow{}, err
	}
	if st.Memories >= limit {
		return MemoryRow{}, &StoreFullError{Limit: limit}
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return MemoryRow{}, err
	}
	content := in.Content
	m := MemoryRow{ID: ids.NewAt(ids.Memory, now), StoreID: in.StoreID, Path: in.Path, Content: &content,
		ContentSHA256: sha, ContentSizeBytes: int64(len(content)), VersionID: ids.NewAt(ids.MemoryVersion, now),
		CreatedAt: now, UpdatedAt: now}
	if err := tx.AddVersion(ctx, headVersion(m, OpCreated, in.By), +1); err != nil {
		return MemoryRow{}, err
	}
	return m, tx.InsertMemory(ctx, m)
}

// UpdateMemoryIn is UpdateMemory inside tx; sha is in.ContentSHA256().
func UpdateMemoryIn(ctx context.Context, tx MemoryTx, in MemoryUpdate, sha string) (MemoryRow, bool, error) {
	if err := CheckActor(in.By); err != nil {
		return MemoryRow{}, false, err
	}
	st, err := tx.LockStore(ctx, in.StoreID)
	if err != nil {
		return MemoryRow{}, false, err
	}
	if st.Archived {
		return MemoryRow{}, false, ErrStoreArchived
	}
	// The stored content is read only when the update keeps it (a
	// rename); otherwise the memory carries the update's content, which is
	// what a no-op answers with.
	cur, err := tx.ReadMemory(ctx, in.StoreID, in.MemoryID, in.Content == nil)
	if err != nil {
		return MemoryRow{}, false, err
	}
	if in.Content != nil {
		cur.Content = in.Content
	}
	next, err := PlanUpdate(cur, in, sha)
	if err != nil || next.Noop {
		return cur, false, err
	}
	moved := next.Path != cur.Path
	if moved {
		if err := tx.PathConflict(ctx, in.StoreID, next.Path, cur.ID); err != nil {
			return MemoryRow{}, false, err
		}
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return MemoryRow{}, false, err
	}
	m := cur
	m.Path, m.Content, m.ContentSHA256, m.ContentSizeBytes = next.Path, &next.Content, next.SHA256, int64(len(next.Content))
	m.VersionID, m.UpdatedAt = ids.NewAt(ids.MemoryVersion, now), now
	if err := tx.AddVersion(ctx, headVersion(m, OpModified, in.By), 0); err != nil {
		return MemoryRow{}, false, err
	}
	return m, true, tx.UpdateMemory(ctx, m, moved)
}

// DeleteMemoryIn is DeleteMemory inside tx.
func DeleteMemoryIn(ctx context.Context, tx MemoryTx, storeID, memoryID, expectedSHA256 string, by Actor) error {
	if err := CheckActor(by); err != nil {
		return err
	}
	// Archived or not: deleting is allowed.
	if _, err := tx.LockStore(ctx, storeID); err != nil {
		return err
	}
	cur, err := tx.ReadMemory(ctx, storeID, memoryID, false)
	if err != nil {
		return err
	}
	if expectedSHA256 != "" && expectedSHA256 != cur.ContentSHA256 {
		return &PreconditionFailedError{CurrentSHA256: cur.ContentSHA256}
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return err
	}
	v := VersionRow{ID: ids.NewAt(ids.MemoryVersion, now), StoreID: storeID, MemoryID: memoryID, Operation: OpDeleted,
		Path: cur.Path, CreatedAt: now, CreatedBy: by}
	if err := tx.AddVersion(ctx, v, -1); err != nil {
		return err
	}
	return tx.DeleteMemory(ctx, memoryID)
}

// RedactVersionIn is RedactMemoryVersion inside tx.
func RedactVersionIn(ctx context.Context, tx MemoryTx, storeID, versionID string, by Actor) (VersionRow, error) {
	if err := CheckActor(by); err != nil {
		return VersionRow{}, err
	}
	// Archived or not: redacting is allowed. The store's lock orders the
	// redaction with the writes that could make the version a head.
	if _, err := tx.LockStore(ctx, storeID); err != nil {
		return VersionRow{}, err
	}
	cur, err := tx.ReadVersion(ctx, storeID, versionID)
	if err != nil || cur.Redacted() {
		return cur, err
	}
	head, err := tx.IsHead(ctx, cur.MemoryID, versionID)
	switch {
	case err != nil:
		return VersionRow{}, err
	case head:
		return VersionRow{}, ErrRedactHead
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return VersionRow{}, err
	}
	if err := tx.Redact(ctx, versionID, now, by); err != nil {
		return VersionRow{}, err
	}
	return tx.ReadVersion(ctx, storeID, versionID)
}

// headVersion is the version a write makes m's head.
func headVersion(m MemoryRow, op Operation, by Actor) VersionRow {
	return VersionRow{ID: m.VersionID, StoreID: m.StoreID, MemoryID: m.ID, Operation: op, Path: m.Path,
		Content: *m.Content, ContentSHA256: m.ContentSHA256, ContentSizeBytes: m.ContentSizeBytes,
		CreatedAt: m.UpdatedAt, CreatedBy: by}
}
