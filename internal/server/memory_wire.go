package server

import (
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// The memory side's rows (package storage) as the API shows them. This is
// the one place that knows the wire's discriminators, its union of
// memories and prefixes in a listing, and the nulls a view, a deletion or
// a redaction leaves; storage never sees any of them.

// toPage turns a storage page into the wire page, each item through wire:
// data is never null, and next_page is null on the last page.
func toPage[T, U any](p storage.Page[T], wire func(T) U) api.Page[U] {
	out := api.Page[U]{Data: make([]U, 0, len(p.Items))}
	for _, it := range p.Items {
		out.Data = append(out.Data, wire(it))
	}
	if p.Next != "" {
		next := p.Next
		out.NextPage = &next
	}
	return out
}

func (s *Server) wireStore(st storage.MemoryStoreRow) api.MemoryStore {
	p, inherited := s.app.RetentionOf(st)
	return api.MemoryStore{ID: st.ID, Type: "memory_store", Name: st.Name, Description: st.Description, Metadata: st.Metadata,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, ArchivedAt: optionalTime(st.ArchivedAt),
		VersionRetention: wireRetention(p, inherited)}
}

// wireMemory shows a memory in view: basic leaves the content out.
func wireMemory(m storage.MemoryRow, view string) api.Memory {
	out := api.Memory{ID: m.ID, Type: "memory", MemoryStoreID: m.StoreID, Path: m.Path, ContentSHA256: m.ContentSHA256,
		ContentSizeBytes: m.ContentSizeBytes, MemoryVersionID: m.VersionID, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if view == api.ViewFull {
		out.Content = m.Content
	}
	return out
}

// wireEntry shows a listing entry in view: a memory, or a prefix.
func wireEntry(view string) func(storage.MemoryEntry) api.MemoryListItem {
	return func(e storage.MemoryEntry) api.MemoryListItem {
		if e.Prefix != "" {
			return api.MemoryListItem{Prefix: &api.MemoryPrefix{Type: "memory_prefix", Path: e.Prefix}}
		}
		m := wireMemory(e.Memory, view)
		return api.MemoryListItem{Memory: &m}
	}
}

// wireVersion shows a version in view: basic leaves the content out but
// keeps hash and size. A deletion has no content, hash or size; a
// redacted version has no path either.
func wireVersion(view string) func(storage.VersionRow) api.MemoryVersion {
	return func(v storage.VersionRow) api.MemoryVersion {
		out := api.MemoryVersion{ID: v.ID, Type: "memory_version", MemoryID: v.MemoryID, MemoryStoreID: v.StoreID,
			Operation: string(v.Operation), CreatedAt: v.CreatedAt, CreatedBy: wireActor(v.CreatedBy)}
		if !v.Redacted() {
			out.Path = &v.Path
		} else {
			by := wireActor(v.RedactedBy)
			out.RedactedAt, out.RedactedBy = &v.RedactedAt, &by
		}
		if v.HasContent() {
			out.ContentSHA256, out.ContentSizeBytes = &v.ContentSHA256, &v.ContentSizeBytes
			if view == api.ViewFull {
				out.Content = &v.Content
			}
		}
		return out
	}
}

// wireChange shows a version as a change-feed entry.
func wireChange(v storage.VersionRow) api.MemoryChange {
	c := api.MemoryChange{Type: "memory_change", Sequence: v.Sequence, MemoryID: v.MemoryID, MemoryVersionID: v.ID,
		Operation: string(v.Operation), CreatedAt: v.CreatedAt}
	if !v.Redacted() {
		c.Path = &v.Path
	}
	if v.HasContent() {
		c.ContentSHA256, c.ContentSizeBytes = &v.ContentSHA256, &v.ContentSizeBytes
	}
	return c
}

// wireChangeList shows a page of the change feed.
func wireChangeList(p storage.ChangePage) api.MemoryChangeList {
	out := api.MemoryChangeList{Type: "memory_change_list", Data: make([]api.MemoryChange, len(p.Changes)), LatestSequence: p.Latest, HasMore: p.More}
	for i, v := range p.Changes {
		out.Data[i] = wireChange(v)
	}
	return out
}

// wireSnapshotEntry heads a memory in a snapshot stream.
func wireSnapshotEntry(m storage.MemoryRow) api.SnapshotEntry {
	return api.SnapshotEntry{Type: "memory", ID: m.ID, Path: m.Path, ContentSHA256: m.ContentSHA256,
		ContentSizeBytes: m.ContentSizeBytes, MemoryVersionID: m.VersionID}
}

func wireActor(a storage.Actor) api.Actor {
	switch a.Kind {
	case storage.ActorSession:
		return api.Actor{Type: api.SessionActor, SessionID: a.ID}
	case storage.ActorUser:
		return api.Actor{Type: api.UserActor, UserID: a.ID}
	}
	return api.Actor{Type: api.APIActor, APIKeyID: a.ID}
}

// optionalTime is a row's optional time (zero when unset) on the wire.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
