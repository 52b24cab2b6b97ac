package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// A worker killed mid-session leaves the agent's last edits on its disk.
// When another host finishes the session, the sessions token that could
// have uploaded them has died with its work item, and the environment key
// may not write memories (SPEC §6). Recover is the one write the
// environment key may make: a file of such a folder, for a session of its
// environment that no worker holds any more, into a store attached to it
// read_write. It never overwrites what changed on the server since the
// folder's last sync: such an edit becomes a conflicted copy beside it.

// Recovered is what Recover did: the outcome (api.Recovery*) and the
// memory that holds the content now.
type Recovered struct {
	Outcome string
	Memory  storage.MemoryRow
}

// Recover writes one recovered file (see above), attributed to the
// session. Refusals are *api.Error: a session of another environment, a
// store not attached read_write, a session whose work item is still
// leased; storage refusals (an archived store, a full one) pass through.
func (m *Memories) Recover(ctx context.Context, environmentID string, r api.RecoveryRequest) (Recovered, error) {
	err := firstError(
		validate.ID("session_id", ids.Session, "session", r.SessionID),
		validate.ID("memory_store_id", ids.MemoryStore, "memory store", r.MemoryStoreID),
		validate.Path("path", r.Path),
		validate.Content("content", r.Content))
	if err == nil && r.BaseContentSHA256 != nil {
		err = validate.SHA256("base_content_sha256", *r.BaseContentSHA256)
	}
	if err != nil {
		return Recovered{}, err
	}
	if err := m.mayRecover(ctx, environmentID, r); err != nil {
		return Recovered{}, err
	}
	by := Caller{Actor: storage.Actor{Kind: storage.ActorSession, ID: r.SessionID}, LogKey: "session_id", LogID: r.SessionID}
	out, err := m.recoverFile(ctx, r, by)
	if err != nil {
		return out, err
	}
	m.app.log.InfoContext(ctx, "memory recovered from a stopped worker's folder", "environment_id", environmentID,
		"memory_store_id", r.MemoryStoreID, "path", r.Path, "outcome", out.Outcome, "memory_id", out.Memory.ID,
		"memory_path", out.Memory.Path, by.attr())
	return out, nil
}

// mayRecover checks that the session runs on environmentID, that the
// store is attached to it read_write, and that every one of its work
// items has stopped: a worker that holds one syncs the store itself, and
// a queued one is about to be served (by the folder's own host, maybe,
// which adopts the folder: a recovery then would race its mount).
func (m *Memories) mayRecover(ctx context.Context, environmentID string, r api.RecoveryRequest) error {
	sess, err := m.app.store.GetSession(ctx, r.SessionID)
	if errors.Is(err, storage.ErrNotFound) {
		return validate.Missing("session_id", "session", r.SessionID, "GET /v1/sessions")
	}
	if err != nil {
		return err
	}
	if sess.EnvironmentID != environmentID {
		return api.Errorf(api.Permission, "session_id: session %s runs on environment %s, not %s; a folder is recovered with the key of its session's environment", sess.ID, sess.EnvironmentID, environmentID)
	}
	attached := false
	for _, res := range sess.Resources {
		if res.Type != api.ResourceMemoryStore || res.MemoryStoreID != r.MemoryStoreID {
			continue
		}
		if res.Access != api.AccessReadWrite {
			return api.Errorf(api.Permission, "memory_store_id: memory store %s is attached to session %s read_only, so the session could not change it: there is nothing of it to recover; remove the folder", r.MemoryStoreID, sess.ID)
		}
		attached = true
	}
	if !attached {
		return api.Errorf(api.Permission, "memory_store_id: memory store %s is not attached to session %s; a recovery writes only into the stores the session could write", r.MemoryStoreID, sess.ID)
	}
	if err := m.app.Work.ExpireLeases(ctx, environmentID); err != nil {
		return err
	}
	items, err := m.app.store.SessionWork(ctx, sess.ID)
	if err != nil {
		return err
	}
	for _, w := range items {
		switch {
		case w.State == api.WorkStopped:
		case w.LeaseExpiresAt != nil:
			return api.Errorf(api.Conflict, "session_id: work item %s of session %s is held by worker %q (lease until %s); that worker syncs the session's stores itself; try again once the item has stopped",
				w.ID, sess.ID, w.WorkerID, w.LeaseExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
		default:
			return api.Errorf(api.Conflict, "session_id: work item %s of session %s is queued; the worker that claims it serves the session (and adopts the folder if it is its own); try again once the item has stopped", w.ID, sess.ID)
		}
	}
	return nil
}

// recoverFile writes by the usual rules of a sync: the content becomes a
// new version where the server still holds the base (or, for a file new
// since, nothing at the path); otherwise the server's memory stays and
// the content goes to a conflicted copy. Trying the same file again
// writes nothing more: the copy's name follows from the content.
func (m *Memories) recoverFile(ctx context.Context, r api.RecoveryRequest, by Caller) (Recovered, error) {
	sha := storage.ContentHash(r.Content)
	cur, err := m.app.store.GetMemoryAt(ctx, r.MemoryStoreID, r.Path)
	found := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return Recovered{}, err
	}
	switch {
	case found && cur.ContentSHA256 == sha:
		return Recovered{api.RecoveryUnchanged, cur}, nil
	case found && r.BaseContentSHA256 != nil && cur.ContentSHA256 == *r.BaseContentSHA256:
		row, _, err := m.Update(ctx, r.MemoryStoreID, cur.ID, MemoryChange{Content: &r.Content,
			Expect: Expect{Field: "base_content_sha256", SHA256: *r.BaseContentSHA256}}, by)
		var stale *storage.PreconditionFailedError
		if !errors.As(err, &stale) {
			return Recovered{api.RecoveryUpdated, row}, err
		}
	case !found && r.BaseContentSHA256 == nil:
		row, err := m.Create(ctx, r.MemoryStoreID, r.Path, r.Content, by)
		var clash *storage.PathConflictError
		if !errors.As(err, &clash) {
			return Recovered{api.RecoveryCreated, row}, err
		}
	}
	return m.conflictCopy(ctx, r, sha, by)
}

// ConflictCopyPath is where a recovery keeps content that lost to the
// server: beside the file, named after the session and the content, so
// that a second try finds its first copy instead of making another.
func ConflictCopyPath(path, sessionID, contentSHA256 string) string {
	short := sessionID[max(0, len(sessionID)-8):]
	return fmt.Sprintf("%s%s%s-%s", path, api.ConflictCopyMarker, short, contentSHA256[:8])
}

func (m *Memories) conflictCopy(ctx context.Context, r api.RecoveryRequest, sha string, by Caller) (Recovered, error) {
	path := ConflictCopyPath(r.Path, r.SessionID, sha)
	if err := validate.Path("path", path); err != nil {
		return Recovered{}, api.Errorf(api.InvalidRequest, "path: the server's copy of %s changed since the folder's last sync, and the conflicted copy's name %s is not a valid path (%v); copy the file into the store by hand", r.Path, path, err)
	}
	if prior, err := m.app.store.GetMemoryAt(ctx, r.MemoryStoreID, path); err == nil && prior.ContentSHA256 == sha {
		return Recovered{api.RecoveryUnchanged, prior}, nil
	}
	row, err := m.Create(ctx, r.MemoryStoreID, path, r.Content, by)
	return Recovered{api.RecoveryConflictCopy, row}, err
}
