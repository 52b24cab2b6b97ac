package app

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Memories writes memories and their versions. Every write that changed
// something is counted (memstore_memory_writes_total) and wakes the
// change feed's long polls on its store, whichever road it came by.
type Memories struct {
	app *App
	// changes wakes the change feed's long polls, by store id.
	changes waiters
	// reads joins the long polls' identical reads of a store's feed.
	reads  feedReads
	writes *prometheus.CounterVec
}

// memoryOp is what a write did to a memory: the label of
// memstore_memory_writes_total.
type memoryOp string

const (
	memoryCreated memoryOp = "create"
	memoryUpdated memoryOp = "update"
	memoryDeleted memoryOp = "delete"
)

func newMemories(a *App) *Memories {
	m := &Memories{app: a, changes: newWaiters(), reads: feedReads{inFlight: map[feedQuestion]*feedRead{}},
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_memory_writes_total",
			Help: "Memories written through the API or the web console, by operation (create, update, delete); an update that changes nothing is not counted.",
		}, []string{"op"})}
	a.metrics.MustRegister(m.writes)
	return m
}

// WaitForChange returns a channel closed at the next write to storeID's
// memories through this process (the change feed's long poll takes it
// before it reads the feed).
func (m *Memories) WaitForChange(storeID string) <-chan struct{} {
	return m.changes.wait(storeID)
}

// written follows a committed write that changed something.
func (m *Memories) written(storeID string, op memoryOp) {
	m.writes.WithLabelValues(string(op)).Inc()
	m.changes.wake(storeID)
}

// Expect is a precondition on a memory's content: the content_sha256 the
// caller last read, and the name of the field it came in (for a refusal
// that points at it). The zero value expects nothing; one with a Field
// must carry a well-formed hash.
type Expect struct {
	Field, SHA256 string
}

func (e Expect) check() error {
	if e.Field == "" {
		return nil
	}
	return validate.SHA256(e.Field, e.SHA256)
}

// CheckMemory is the check of a new memory's path and content, for a road
// that plans writes before it makes them (the console's import preview).
func CheckMemory(path, content string) error {
	return firstError(validate.Path("path", path), validate.Content("content", content))
}

// Create checks a new memory's path and content and writes it, within the
// store's memory limit.
func (m *Memories) Create(ctx context.Context, storeID, path, content string, by Caller) (storage.MemoryRow, error) {
	if err := CheckMemory(path, content); err != nil {
		return storage.MemoryRow{}, err
	}
	row, err := m.app.store.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: path, Content: content, By: by.Actor, MaxMemories: m.app.MaxMemoriesPerStore()})
	if err != nil {
		return row, err
	}
	m.written(storeID, memoryCreated)
	m.app.log.InfoContext(ctx, "memory created", "memory_store_id", storeID,
		"memory_id", row.ID, "path", row.Path, "memory_version_id", row.VersionID, by.attr())
	return row, nil
}

// MemoryChange is an update: new content, a new path (a rename), or both.
type MemoryChange struct {
	Content, Path *string
	Expect        Expect
}

// Update checks and writes a change; changed is false when it changed
// nothing (the same content at the same path), which makes no version.
func (m *Memories) Update(ctx context.Context, storeID, memoryID string, c MemoryChange, by Caller) (row storage.MemoryRow, changed bool, err error) {
	if c.Path != nil {
		err = validate.Path("path", *c.Path)
	}
	if c.Content != nil && err == nil {
		err = validate.Content("content", *c.Content)
	}
	if err = firstError(err, c.Expect.check()); err != nil {
		return row, false, err
	}
	row, changed, err = m.app.store.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: storeID, MemoryID: memoryID, Content: c.Content, Path: c.Path, IfSHA256: c.Expect.SHA256, By: by.Actor})
	if err != nil || !changed {
		return row, changed, err
	}
	m.written(storeID, memoryUpdated)
	m.app.log.InfoContext(ctx, "memory updated", "memory_store_id", storeID,
		"memory_id", row.ID, "path", row.Path, "memory_version_id", row.VersionID, by.attr())
	return row, true, nil
}

// Delete deletes a memory (its versions stay), if its content is still
// what expect says.
func (m *Memories) Delete(ctx context.Context, storeID, memoryID string, expect Expect, by Caller) error {
	if err := expect.check(); err != nil {
		return err
	}
	if err := m.app.store.DeleteMemory(ctx, storeID, memoryID, expect.SHA256, by.Actor); err != nil {
		return err
	}
	m.written(storeID, memoryDeleted)
	m.app.log.InfoContext(ctx, "memory deleted", "memory_store_id", storeID, "memory_id", memoryID, by.attr())
	return nil
}

// Restore writes a past version's text as a new version of its memory
// (point-in-time recovery: nothing in the history is rewritten). A memory
// deleted since is created again at the version's path. It refuses a
// version with no text (redacted, or a deletion) with ErrNoContent.
func (m *Memories) Restore(ctx context.Context, storeID string, v storage.VersionRow, by Caller) (storage.MemoryRow, error) {
	if !v.HasContent() {
		return storage.MemoryRow{}, ErrNoContent
	}
	op := memoryUpdated
	row, changed, err := m.app.store.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: storeID, MemoryID: v.MemoryID, Content: &v.Content, By: by.Actor})
	if errors.Is(err, storage.ErrNotFound) {
		op, changed = memoryCreated, true
		row, err = m.app.store.CreateMemory(ctx, storage.NewMemory{StoreID: storeID, Path: v.Path, Content: v.Content, By: by.Actor, MaxMemories: m.app.MaxMemoriesPerStore()})
	}
	if err != nil {
		return row, err
	}
	if changed {
		m.written(storeID, op)
	}
	m.app.log.InfoContext(ctx, "memory version restored", "memory_store_id", storeID, "memory_id", row.ID, "path", row.Path, "memory_version_id", v.ID, by.attr())
	return row, nil
}

// ErrNoContent refuses to restore a version that holds no text.
var ErrNoContent = errors.New("the version holds no content to restore")

// RedactVersion clears a version's text for good, keeping the audit row;
// storage refuses the current version of a live memory
// (storage.ErrRedactHead).
func (m *Memories) RedactVersion(ctx context.Context, storeID, versionID string, by Caller) (storage.VersionRow, error) {
	v, err := m.app.store.RedactMemoryVersion(ctx, storeID, versionID, by.Actor)
	if err != nil {
		return v, err
	}
	m.app.log.InfoContext(ctx, "memory version redacted", "memory_store_id", storeID, "memory_id", v.MemoryID, "memory_version_id", v.ID, by.attr())
	return v, nil
}
