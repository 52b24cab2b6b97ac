package server

import (
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// memoryParams reads and checks {store_id} and {memory_id}.
func memoryParams(r *http.Request) (storeID, memoryID string, err error) {
	if storeID, err = storeIDParam(r); err != nil {
		return "", "", err
	}
	memoryID = r.PathValue("memory_id")
	return storeID, memoryID, checkID(ids.Memory, "memory", memoryID)
}

// memoryError is storeError with a memory-specific "not found": the store
// exists or not, the memory does not.
func (s *Server) memoryError(r *http.Request, err error, storeID, memoryID string) error {
	if errors.Is(err, storage.ErrNotFound) {
		if _, serr := s.store.GetMemoryStore(r.Context(), storeID); serr == nil {
			return apiErrorf(notFound, "memory %s not found in memory store %s; it may have been deleted or belong to another store (its versions remain listable with memory_id)", memoryID, storeID)
		}
	}
	return storeError(err, storeID)
}

// viewAndLimit reads view (default basic) and limit for a listing of
// memories or versions. The full view carries up to 100 KB per item, so
// its pages are capped rather than refused: a client asking for 100 gets
// 20 and a next_page.
func viewAndLimit(r *http.Request) (view string, limit int, err error) {
	if view, err = viewParam(r, api.ViewBasic); err != nil {
		return "", 0, err
	}
	if limit, err = listLimitParam(r.URL.Query(), api.MaxListLimit, false); err != nil {
		return "", 0, err
	}
	if view == api.ViewFull {
		limit = min(limit, api.MaxFullViewListLimit)
	}
	return view, limit, nil
}

type createMemoryBody struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

func (s *Server) createMemory(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, writing.answering(api.ViewBasic))
	if err != nil {
		return err
	}
	var body createMemoryBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if body.Path == nil {
		return apiErrorf(invalidRequest, "path: is required; send an absolute path such as /notes/todo.md")
	}
	if body.Content == nil {
		return apiErrorf(invalidRequest, "content: is required; send the memory's text (\"\" for an empty memory)")
	}
	m, err := s.app.Memories.Create(r.Context(), req.storeID, *body.Path, *body.Content, p.Caller())
	if err != nil {
		return storeError(err, req.storeID)
	}
	writeJSON(w, http.StatusOK, wireMemory(m, req.view))
	return nil
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, memoryParams, reading.answering(api.ViewFull))
	if err != nil {
		return err
	}
	m, err := s.store.GetMemory(r.Context(), req.storeID, req.id)
	if err != nil {
		return s.memoryError(r, err, req.storeID, req.id)
	}
	writeJSON(w, http.StatusOK, wireMemory(m, req.view))
	return nil
}

type updateMemoryBody struct {
	Content      *string             `json:"content"`
	Path         *string             `json:"path"`
	Precondition *memoryPrecondition `json:"precondition"`
}

// memoryPrecondition guards an update: it applies only while the memory's
// content has this hash. A named type so the body's fast decoder
// (flatjson.go) can fill it.
type memoryPrecondition struct {
	Type          string  `json:"type"`
	ContentSHA256 *string `json:"content_sha256"`
}

func (s *Server) updateMemory(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, memoryParams, writing.answering(api.ViewBasic))
	if err != nil {
		return err
	}
	var body updateMemoryBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if body.Content == nil && body.Path == nil {
		return apiErrorf(invalidRequest, "content, path: send new content, a new path (a rename), or both; this request changes nothing")
	}
	change := app.MemoryChange{Content: body.Content, Path: body.Path}
	if pre := body.Precondition; pre != nil {
		// The type may be left out: content_sha256 is the only kind.
		if pre.Type != "" && pre.Type != "content_sha256" {
			return apiErrorf(invalidRequest, "precondition.type: %q is not supported; the only precondition is content_sha256", pre.Type)
		}
		if pre.ContentSHA256 == nil {
			return apiErrorf(invalidRequest, "precondition.content_sha256: is required; send the content_sha256 you last read, or leave out precondition to update unconditionally")
		}
		change.Expect = app.Expect{Field: "precondition.content_sha256", SHA256: *pre.ContentSHA256}
	}
	m, _, err := s.app.Memories.Update(r.Context(), req.storeID, req.id, change, p.Caller())
	if err != nil {
		return s.memoryError(r, err, req.storeID, req.id)
	}
	writeJSON(w, http.StatusOK, wireMemory(m, req.view))
	return nil
}

func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, memoryParams, writing)
	if err != nil {
		return err
	}
	var expect app.Expect
	if sha := r.URL.Query().Get("expected_content_sha256"); sha != "" {
		expect = app.Expect{Field: "expected_content_sha256", SHA256: sha}
	}
	if err := s.app.Memories.Delete(r.Context(), req.storeID, req.id, expect, p.Caller()); err != nil {
		var stale *storage.PreconditionFailedError
		if errors.As(err, &stale) {
			return apiErrorf(api.MemoryPreconditionFailed, "expected_content_sha256: the memory's content has changed (its content_sha256 is now %s), so it was not deleted; re-read it and decide again", stale.CurrentSHA256)
		}
		return s.memoryError(r, err, req.storeID, req.id)
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: req.id, Type: "memory_deleted"})
	return nil
}

func (s *Server) listMemories(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	q := storage.MemoryQuery{StoreID: req.storeID, Prefix: "/", Cursor: r.URL.Query().Get("page")}
	view, limit, err := viewAndLimit(r)
	if err != nil {
		return err
	}
	q.WithContent, q.Limit = view == api.ViewFull, limit
	if q.Depth, err = intParam(r, "depth"); err != nil {
		return err
	}
	if prefix := r.URL.Query().Get("path_prefix"); r.URL.Query().Has("path_prefix") {
		if err := validate.PathPrefix("path_prefix", prefix); err != nil {
			return err
		}
		q.Prefix = prefix
	}
	page, err := s.store.ListMemories(r.Context(), q)
	if err != nil {
		return storeError(err, req.storeID)
	}
	advertise(w)
	writeJSON(w, http.StatusOK, toPage(page, wireEntry(view)))
	return nil
}
