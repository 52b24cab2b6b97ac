package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// memoryRoutes registers the memory-stores API (SPEC §2). Store management
// (create, list, update, archive, delete) and redaction need an API key;
// reading a store and everything about its memories, versions and changes
// (the feed and snapshot of SPEC §8) go through memoryStoreAccess, which
// also admits a sessions token for the stores attached to its session.
func (s *Server) memoryRoutes() {
	s.mux.HandleFunc("POST /v1/memory_stores", s.authed(s.createMemoryStore))
	s.mux.HandleFunc("GET /v1/memory_stores", s.authed(s.listMemoryStores))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}", s.authed(s.getMemoryStore))
	s.mux.HandleFunc("POST /v1/memory_stores/{store_id}", s.authed(s.updateMemoryStore))
	s.mux.HandleFunc("DELETE /v1/memory_stores/{store_id}", s.authed(s.deleteMemoryStore))
	s.mux.HandleFunc("POST /v1/memory_stores/{store_id}/archive", s.authed(s.archiveMemoryStore))

	s.mux.HandleFunc("POST /v1/memory_stores/{store_id}/memories", s.authed(s.createMemory))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/memories", s.authed(s.listMemories))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/memories/{memory_id}", s.authed(s.getMemory))
	s.mux.HandleFunc("POST /v1/memory_stores/{store_id}/memories/{memory_id}", s.authed(s.updateMemory))
	s.mux.HandleFunc("DELETE /v1/memory_stores/{store_id}/memories/{memory_id}", s.authed(s.deleteMemory))

	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/changes", s.authed(s.listChanges))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/snapshot", s.authed(s.snapshot))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/search", s.authed(s.searchMemories))

	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/memory_versions", s.authed(s.listMemoryVersions))
	s.mux.HandleFunc("GET /v1/memory_stores/{store_id}/memory_versions/{version_id}", s.authed(s.getMemoryVersion))
	s.mux.HandleFunc("POST /v1/memory_stores/{store_id}/memory_versions/{version_id}/redact", s.authed(s.redactMemoryVersion))
}

// storeIDParam reads and checks the {store_id} path segment.
func storeIDParam(r *http.Request) (string, error) {
	id := r.PathValue("store_id")
	return id, checkID(ids.MemoryStore, "memory store", id)
}

// storeParams is storeIDParam in the shape memoryPreamble takes, for the
// endpoints whose URL names only the store.
func storeParams(r *http.Request) (storeID, _ string, err error) {
	storeID, err = storeIDParam(r)
	return storeID, "", err
}

// memoryRequest is what memoryPreamble found in a request.
type memoryRequest struct {
	storeID string
	id      string // the {memory_id} or {version_id}; "" when the URL names only the store
	view    string // "" when the endpoint takes no view
}

// memoryUse is what an endpoint under a memory store does: read, or
// write too, and the view its answers default to ("" when it takes no view
// parameter, as the listings read it with their limit).
type memoryUse struct {
	write bool
	view  string
}

// reading and writing are the two uses; answering adds a view.
var (
	reading = memoryUse{}
	writing = memoryUse{write: true}
)

// answering is u for an endpoint that answers with memories in view def
// unless the request asks for another.
func (u memoryUse) answering(def string) memoryUse {
	u.view = def
	return u
}

// memoryPreamble is the opening shared by the endpoints a sessions token
// may reach under a memory store, in the order the API answers: the URL's
// ids (params is storeParams, memoryParams or versionParams), so a
// mistyped id is a 404 naming it whoever asks; then p's access to the
// store for use; then the view, if use answers with one.
func (s *Server) memoryPreamble(r *http.Request, p Principal, params func(*http.Request) (string, string, error), use memoryUse) (req memoryRequest, err error) {
	if req.storeID, req.id, err = params(r); err != nil {
		return req, err
	}
	if err = s.memoryStoreAccess(r.Context(), p, req.storeID, use.write); err != nil {
		return req, err
	}
	if use.view != "" {
		req.view, err = viewParam(r, use.view)
	}
	return req, err
}

// storeError turns a storage error about store storeID into the API's
// answer. Errors it does not know pass through (and become a logged 500).
func storeError(err error, storeID string) error {
	var (
		conflict *storage.PathConflictError
		stale    *storage.PreconditionFailedError
		full     *storage.StoreFullError
		meta     *storage.MetadataLimitError
		inUse    *storage.StoreInUseError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrNotFound):
		return validate.Missing("", "memory store", storeID, listMemoryStores)
	case errors.Is(err, storage.ErrStoreArchived):
		return apiErrorf(api.Conflict, "memory store %s is archived and therefore read-only: its memories can be read and deleted and their versions redacted, but nothing can be created or changed; copy what you need into a new store", storeID)
	case errors.Is(err, storage.ErrBadCursor):
		return badCursor()
	case errors.As(err, &conflict):
		return &api.Error{
			Type:                api.MemoryPathConflict,
			Message:             fmt.Sprintf("path: memory %s already occupies %s in this store; a path cannot be reused, and a file cannot also be a directory (/a and /a/b cannot coexist). Update that memory instead, or choose another path", conflict.MemoryID, conflict.Path),
			ConflictingMemoryID: conflict.MemoryID,
			ConflictingPath:     conflict.Path,
		}
	case errors.As(err, &stale):
		return apiErrorf(api.MemoryPreconditionFailed, "precondition: the memory's content has changed since you read it (its content_sha256 is now %s); re-read the memory and retry against the fresh state", stale.CurrentSHA256)
	case errors.As(err, &full):
		return apiErrorf(invalidRequest, "memory_store_id: memory store %s already holds %d memories, its limit; delete memories it no longer needs (updates to existing memories still work)", storeID, full.Limit)
	case errors.As(err, &meta):
		return validate.TooManyMetadataPairs("metadata", meta.Count)
	case errors.As(err, &inUse):
		return apiErrorf(api.Conflict, "memory store %s is attached to session %s (%s), which may still mount it; archive or delete that session (POST /v1/sessions/%s/archive) and let its worker stop first, or archive the store instead of deleting it. GET /v1/sessions?memory_store_id=%s&include_archived=true lists the sessions that use it", storeID, inUse.SessionID, inUse.Status, inUse.SessionID, storeID)
	}
	return err
}

type createStoreBody struct {
	Name        *string            `json:"name"`
	Description *string            `json:"description"`
	Metadata    map[string]*string `json:"metadata"`
	// VersionRetention is memstore's own (api.ExtensionRetentionField).
	VersionRetention *api.VersionRetention `json:"memstore_version_retention"`
}

func (s *Server) createMemoryStore(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var body createStoreBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if body.Name == nil {
		return apiErrorf(invalidRequest, "name: is required; send 1 to %d characters", api.MaxStoreNameChars)
	}
	in := storage.NewMemoryStore{Name: *body.Name, Metadata: map[string]string{}}
	if body.Description != nil {
		in.Description = *body.Description
	}
	for k, v := range body.Metadata {
		if v == nil {
			return apiErrorf(invalidRequest, "metadata: key %q is null; on create every value must be a string (null deletes a key only on update)", k)
		}
		in.Metadata[k] = *v
	}
	if body.VersionRetention != nil {
		set, err := retentionSetting(*body.VersionRetention)
		if err != nil {
			return err
		}
		if !set.Inherit {
			in.Retention = &set.Policy
		}
	}
	st, err := s.app.MemoryStores.Create(r.Context(), in, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireStore(st))
	return nil
}

func (s *Server) listMemoryStores(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var (
		q   storage.MemoryStoreQuery
		err error
	)
	if q.Limit, err = listLimitParam(r.URL.Query(), api.MaxListLimit, false); err != nil {
		return err
	}
	if q.IncludeArchived, err = boolParam(r.URL.Query(), "include_archived"); err != nil {
		return err
	}
	if q.CreatedGTE, err = timeParam(r, "created_at[gte]"); err != nil {
		return err
	}
	if q.CreatedLTE, err = timeParam(r, "created_at[lte]"); err != nil {
		return err
	}
	q.Cursor = r.URL.Query().Get("page")
	page, err := s.store.ListMemoryStores(r.Context(), q)
	if err != nil {
		return storeError(err, "")
	}
	advertise(w)
	writeJSON(w, http.StatusOK, toPage(page, s.wireStore))
	return nil
}

func (s *Server) getMemoryStore(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	st, err := s.store.GetMemoryStore(r.Context(), req.storeID)
	if err != nil {
		return storeError(err, req.storeID)
	}
	advertise(w)
	writeJSON(w, http.StatusOK, s.wireStore(st))
	return nil
}

func (s *Server) updateMemoryStore(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, err := storeIDParam(r)
	if err != nil {
		return err
	}
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var body api.UpdateMemoryStoreRequest
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	patch := storage.MemoryStorePatch{Name: body.Name, Description: body.Description, Metadata: body.Metadata}
	if body.VersionRetention != nil {
		set, err := retentionSetting(*body.VersionRetention)
		if err != nil {
			return err
		}
		patch.Retention = &set
	}
	st, err := s.app.MemoryStores.Update(r.Context(), id, patch, p.Caller())
	if err != nil {
		return storeError(err, id)
	}
	writeJSON(w, http.StatusOK, s.wireStore(st))
	return nil
}

func (s *Server) archiveMemoryStore(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, err := storeIDParam(r)
	if err != nil {
		return err
	}
	if err := requireAPIKey(p); err != nil {
		return err
	}
	st, err := s.app.MemoryStores.Archive(r.Context(), id, p.Caller())
	if err != nil {
		return storeError(err, id)
	}
	writeJSON(w, http.StatusOK, s.wireStore(st))
	return nil
}

func (s *Server) deleteMemoryStore(w http.ResponseWriter, r *http.Request, p Principal) error {
	id, err := storeIDParam(r)
	if err != nil {
		return err
	}
	if err := requireAPIKey(p); err != nil {
		return err
	}
	if err := s.app.MemoryStores.Delete(r.Context(), id, p.Caller()); err != nil {
		return storeError(err, id)
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: id, Type: "memory_store_deleted"})
	return nil
}
