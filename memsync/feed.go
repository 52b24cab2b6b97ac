package memsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unsafe"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// The server side of a sync at the cost of what changed (SPEC §8). Against
// a memstore server a store is mounted from one snapshot request, and each
// later sync reads the change feed after the sequence it last saw and
// applies it to a copy of the server's listing kept in memory: a sync with
// nothing changed is one small request whatever the store's size. Against
// a server without the extensions (Anthropic's API) the snapshot is a 404
// and the store keeps today's protocol: full listings.

// snapshotPage is how many memories of a snapshot are written to disk as
// one batch: bounded, so a store of large memories never sits in memory.
const snapshotPage = 64

// remoteCache is a store's copy of the server's listing, kept current from
// the change feed and, between reads of it, from the worker's own writes
// (see applier.apply). Only the goroutine syncing the store touches it.
//
// It keeps no index by memory id: one lived as long as the copy, a second
// map of every memory for each store of every session, to serve changes
// that mostly come one or two at a time. A batch of changes finds its
// memories by a look through the copy, or, when large, through an index
// made for that batch only.
type remoteCache struct {
	// on: the server offers the feed and the copy is valid.
	on     bool
	remote Remote
}

// indexedBatch is the size of a batch of changes from which apply indexes
// the copy by id rather than look through it for each change.
const indexedBatch = 16

func (c *remoteCache) reset(remote Remote) {
	if remote == nil {
		remote = Remote{} // a journal's "memories": null
	}
	c.on, c.remote = true, remote
}

// apply folds changes, oldest first, into the copy. A change whose path was
// redacted only removes the memory from where it was: a later change of
// the same memory (its current version, or its deletion) always follows,
// because the current version of a live memory cannot be redacted.
func (c *remoteCache) apply(changes []api.MemoryChange) {
	var byID map[string]string
	if len(changes) > indexedBatch {
		byID = make(map[string]string, len(c.remote))
		for p, m := range c.remote {
			byID[m.ID] = p
		}
	}
	for _, ch := range changes {
		if old, ok := c.pathOf(byID, ch.MemoryID); ok {
			delete(c.remote, old)
		}
		if ch.Operation == api.OperationDeleted || ch.Path == nil || ch.ContentSHA256 == nil {
			continue
		}
		c.remote[*ch.Path] = RemoteMemory{ID: ch.MemoryID, SHA256: *ch.ContentSHA256}
		if byID != nil {
			byID[ch.MemoryID] = *ch.Path
		}
	}
}

// pathOf finds where memory id is in the copy: through byID when the
// batch made one, else by looking.
func (c *remoteCache) pathOf(byID map[string]string, id string) (string, bool) {
	if byID != nil {
		p, ok := byID[id]
		return p, ok && c.remote[p].ID == id
	}
	for p, m := range c.remote {
		if m.ID == id {
			return p, true
		}
	}
	return "", false
}

// withoutExtensions reports a refusal that means "this server has no such
// endpoint": the hosted API answers an unknown route 404 (or 405).
func withoutExtensions(err error) bool {
	return client.IsStatus(err, http.StatusNotFound) || client.IsStatus(err, http.StatusMethodNotAllowed)
}

// eachSnapshotPage reads the store with one snapshot request and hands it
// to fn snapshotPage memories at a time, written to disk before the next
// are read. It returns the sequence the snapshot is at. ok is false when
// the server does not offer snapshots; the caller then lists.
func (st *store) eachSnapshotPage(ctx context.Context, fn func([]api.Memory)) (seq int64, ok bool, err error) {
	s, err := st.client.Snapshot(ctx, st.id, "/")
	if withoutExtensions(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, err
	}
	defer s.Close()
	page := make([]api.Memory, 0, snapshotPage)
	for {
		e, content, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, true, err
		}
		// The entry gives the size (the client checked it against
		// api.MaxContentBytes), so the content is read into one buffer
		// of that size rather than a growing one: the mount of a big
		// store made three times its content in garbage that way.
		b := make([]byte, e.ContentSizeBytes)
		if _, err := io.ReadFull(content, b); err != nil {
			// A content shorter than its entry said: the stream was cut.
			return 0, true, fmt.Errorf("%w: %w", client.ErrSnapshotCut, err)
		}
		// The buffer becomes the memory's content as it is: nothing
		// writes to it after this, and a copy made garbage of the
		// whole store's size at every mount.
		text := unsafe.String(unsafe.SliceData(b), len(b))
		page = append(page, api.Memory{ID: e.ID, MemoryStoreID: st.id, Path: e.Path, Content: &text,
			ContentSHA256: e.ContentSHA256, ContentSizeBytes: e.ContentSizeBytes, MemoryVersionID: e.MemoryVersionID})
		if len(page) == snapshotPage {
			fn(page)
			page = page[:0]
		}
	}
	if len(page) > 0 {
		fn(page)
	}
	return s.Sequence, true, nil
}

// listRemote is what the server holds now: from the change feed when the
// store follows it, else from a full listing.
func (st *store) listRemote(ctx context.Context) (Remote, error) {
	if !st.feed.on {
		return st.listBasic(ctx)
	}
	for {
		l, err := st.client.ListChanges(ctx, st.id, client.ListChangesParams{After: st.seq.Load()})
		if client.IsStatus(err, http.StatusGone) {
			st.log.InfoContext(ctx, "this store's change-feed cursor fell behind the server's version retention, so the store is read again from a snapshot and followed from there", "error", err)
			return st.relist(ctx)
		}
		if client.IsStatus(err, http.StatusBadRequest) {
			st.log.WarnContext(ctx, "the server refused this store's change-feed cursor, so the store is read again from a snapshot and followed from there", "error", err)
			return st.relist(ctx)
		}
		if err != nil {
			return nil, err
		}
		st.feed.apply(l.Data)
		if n := len(l.Data); n > 0 {
			st.seq.Store(l.Data[n-1].Sequence)
		}
		if !l.HasMore {
			return st.feed.remote.clone(), nil
		}
	}
}

// relist rebuilds the copy from a snapshot and follows the feed from the
// sequence it is consistent at. (Not from the feed's start: a store with
// version retention no longer has the changes that built what it holds.)
// A server without snapshots is listed, and the store keeps listing.
func (st *store) relist(ctx context.Context) (Remote, error) {
	remote := Remote{}
	seq, ok, err := st.eachSnapshotPage(ctx, func(page []api.Memory) {
		for _, m := range page {
			remote[m.Path] = RemoteMemory{ID: m.ID, SHA256: m.ContentSHA256}
		}
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		st.feed.on = false
		return st.listBasic(ctx)
	}
	st.feed.reset(remote.clone())
	st.seq.Store(seq)
	return remote, nil
}

func (r Remote) clone() Remote {
	out := make(Remote, len(r))
	for p, m := range r {
		out[p] = m
	}
	return out
}
