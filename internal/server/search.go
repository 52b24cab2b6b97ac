package server

import (
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// searchMemories answers GET /v1/memory_stores/{id}/search?q=…: a page of
// the store's memories holding every word of q, best first. It takes the
// credentials that may read the store, as a listing does.
func (s *Server) searchMemories(w http.ResponseWriter, r *http.Request, p Principal) error {
	req, err := s.memoryPreamble(r, p, storeParams, reading)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, err := listLimitParam(q, api.MaxListLimit, false)
	if err != nil {
		return err
	}
	in := app.SearchRequest{StoreID: req.storeID, Query: q.Get("q"), Limit: limit, Page: q.Get("page")}
	if q.Has("path_prefix") {
		in.PathPrefix = q.Get("path_prefix")
		if err := validate.PathPrefix("path_prefix", in.PathPrefix); err != nil {
			return err
		}
	}
	page, err := s.app.SearchStore(r.Context(), in)
	if err != nil {
		return storeError(err, req.storeID)
	}
	advertise(w)
	writeJSON(w, http.StatusOK, toPage(page, wireHit))
	return nil
}

func wireHit(h storage.SearchHit) api.SearchHit {
	return api.SearchHit{Type: "memory_search_hit", Memory: wireMemory(h.Memory, api.ViewBasic), Snippet: h.Snippet, Score: h.Score}
}
