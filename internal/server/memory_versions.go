package server

import (
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// versionParams reads and checks {store_id} and {version_id}.
func versionParams(r *http.Request) (storeID, versionID string, err error) {
	if storeID, err = storeIDParam(r); err != nil {
		return "", "", err
	}
	versionID = r.PathValue("version_id")
	return storeID, versionID, checkID(ids.MemoryVersion, "memory version", versionID)
}

func (s *Server) versionError(r *http.Request, err error, storeID, versionID string) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if _, serr := s.store.GetMemoryStore(r.Context(), storeID); serr == nil {
			return apiErrorf(notFound, "memory version %s not found in memory store %s; check the id (list versions with GET /v1/memory_stores/%s/memory_versions)", versionID, storeID, storeID)
		}
	case errors.Is(err, storage.ErrRedactHead):
		return apiErrorf(invalidRequest, "memory_version_id: %s is the current version of a memory that still exists, and a live memory must keep its content; update the memory (or delete it) first, then redact this version", versionID)
	}
	return storeError(err, storeID)
}

func (s *Server) listMemoryVersions(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	q := storage.MemoryVersionQuery{StoreID: req.storeID, Cursor: query.Get("page")}
	view, limit, err := viewAndLimit(r)
	if err != nil {
		return err
	}
	q.WithContent, q.Limit = view == api.ViewFull, limit
	if q.CreatedGTE, err = timeParam(r, "created_at[gte]"); err != nil {
		return err
	}
	if q.CreatedLTE, err = timeParam(r, "created_at[lte]"); err != nil {
		return err
	}
	if v := query.Get("memory_id"); v != "" {
		if !ids.Valid(ids.Memory, v) {
			return apiErrorf(invalidRequest, "memory_id: %q is not a memory id; memory ids look like %s…", v, ids.Memory)
		}
		q.MemoryID = v
	}
	switch op := query.Get("operation"); op {
	case "":
	case api.OperationCreated:
		q.Operation = storage.OpCreated
	case api.OperationModified:
		q.Operation = storage.OpModified
	case api.OperationDeleted:
		q.Operation = storage.OpDeleted
	default:
		return apiErrorf(invalidRequest, "operation: %q is not an operation; send created, modified or deleted", op)
	}
	// Each version has one author, so at most one author filter makes sense.
	authors := 0
	for _, f := range []struct {
		param string
		kind  storage.ActorKind
	}{
		{"session_id", storage.ActorSession},
		{"api_key_id", storage.ActorAPIKey},
		{"user_id", storage.ActorUser},
		// memstore has no service accounts: a kind no version has.
		{"service_account_id", "service_account_actor"},
	} {
		if v := query.Get(f.param); v != "" {
			authors++
			q.CreatedBy = storage.Actor{Kind: f.kind, ID: v}
		}
	}
	if authors > 1 {
		return apiErrorf(invalidRequest, "session_id, api_key_id: a version has a single author, so send at most one of session_id, api_key_id, user_id and service_account_id")
	}
	page, err := s.store.ListMemoryVersions(r.Context(), q)
	if err != nil {
		return storeError(err, req.storeID)
	}
	writeJSON(w, http.StatusOK, toPage(page, wireVersion(view)))
	return nil
}

func (s *Server) getMemoryVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, versionParams, reading.answering(api.ViewFull))
	if err != nil {
		return err
	}
	v, err := s.store.GetMemoryVersion(r.Context(), req.storeID, req.id)
	if err != nil {
		return s.versionError(r, err, req.storeID, req.id)
	}
	writeJSON(w, http.StatusOK, wireVersion(req.view)(v))
	return nil
}

// redactMemoryVersion clears a version's content. Agents have no redact
// capability, so it needs an API key even where a sessions token may write.
func (s *Server) redactMemoryVersion(w http.ResponseWriter, r *http.Request, p Principal) error {
	storeID, versionID, err := versionParams(r)
	if err != nil {
		return err
	}
	if err := requireAPIKey(p); err != nil {
		return err
	}
	v, err := s.app.Memories.RedactVersion(r.Context(), storeID, versionID, p.Caller())
	if err != nil {
		return s.versionError(r, err, storeID, versionID)
	}
	writeJSON(w, http.StatusOK, wireVersion(api.ViewFull)(v))
	return nil
}
