package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// MaxSearchQueryBytes bounds a search query: enough for any sentence a
// person or a model types, short enough that a query is never a document.
const MaxSearchQueryBytes = 500

// SearchLimit is how many hits Search returns: a model reads them all, so
// they are few and the best.
const SearchLimit = 20

// Reach is which memory stores a caller may read: every store (an API key,
// a console user), or only StoreIDs (a sessions token reaches the stores
// attached to its session). The caller's road (the API's authentication,
// the console's sign-in, an MCP session) works it out; search only obeys it.
type Reach struct {
	All      bool
	StoreIDs []string
}

// reads reports whether r may read storeID.
func (r Reach) reads(storeID string) bool {
	return r.All || slices.Contains(r.StoreIDs, storeID)
}

// SearchRequest is one store's search, as the REST endpoint and the console
// ask it.
type SearchRequest struct {
	StoreID string
	Query   string
	// PathPrefix keeps to a subtree ("" for the whole store).
	PathPrefix string
	Limit      int
	Page       string // a previous answer's Next, or ""
}

// SearchStore searches one store the caller may read (the caller checked):
// a page of its memories holding every word of the query, best first. A
// store that does not exist is storage.ErrNotFound.
func (a *App) SearchStore(ctx context.Context, in SearchRequest) (storage.Page[storage.SearchHit], error) {
	terms, err := searchTerms(in.Query)
	if err == nil && in.PathPrefix != "" {
		err = validate.PathPrefix("path_prefix", in.PathPrefix)
	}
	if err != nil {
		return storage.Page[storage.SearchHit]{}, err
	}
	if _, err := a.store.GetMemoryStore(ctx, in.StoreID); err != nil {
		return storage.Page[storage.SearchHit]{}, err
	}
	return a.store.SearchMemories(ctx, storage.SearchQuery{
		StoreIDs: []string{in.StoreID}, Terms: terms, PathPrefix: in.PathPrefix,
		Limit: storage.ListLimit(in.Limit), Cursor: in.Page,
	})
}

// Search finds memories by what they say across the stores reach may
// read: the SearchLimit best hits for query, each naming its store
// (Memory.StoreID). With storeIDs it searches only those, each of which
// reach must read — one it may not, or that does not exist, is a 404
// naming it, the same answer for both so a search cannot probe for
// stores. Without, it searches every store reach reads (archived ones
// too: they stay readable). This is the search the MCP tool
// memory_search {query, store?} offers, after it resolves a store name to
// its id.
func (a *App) Search(ctx context.Context, reach Reach, query string, storeIDs ...string) ([]storage.SearchHit, error) {
	terms, err := searchTerms(query)
	if err != nil {
		return nil, err
	}
	for _, id := range storeIDs {
		if !reach.reads(id) {
			return nil, unreadableStore(id)
		}
		if _, err := a.store.GetMemoryStore(ctx, id); errors.Is(err, storage.ErrNotFound) {
			return nil, unreadableStore(id)
		} else if err != nil {
			return nil, err
		}
	}
	if len(storeIDs) == 0 {
		if storeIDs, err = a.readableStores(ctx, reach); err != nil {
			return nil, err
		}
	}
	page, err := a.store.SearchMemories(ctx, storage.SearchQuery{StoreIDs: storeIDs, Terms: terms, Limit: SearchLimit})
	if err != nil {
		return nil, err
	}
	a.log.DebugContext(ctx, "memories searched", slog.Int("stores", len(storeIDs)), slog.Int("hits", len(page.Items)))
	return page.Items, nil
}

// readableStores lists the ids of every store reach reads.
func (a *App) readableStores(ctx context.Context, reach Reach) ([]string, error) {
	if !reach.All {
		return reach.StoreIDs, nil
	}
	var ids []string
	q := storage.MemoryStoreQuery{Limit: api.MaxListLimit, IncludeArchived: true}
	for {
		page, err := a.store.ListMemoryStores(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, st := range page.Items {
			ids = append(ids, st.ID)
		}
		if page.Next == "" {
			return ids, nil
		}
		q.Cursor = page.Next
	}
}

// searchTerms checks a query and splits it into the words to find.
func searchTerms(query string) ([]string, error) {
	if len(query) > MaxSearchQueryBytes {
		return nil, api.Errorf(api.InvalidRequest, "q: is %d bytes; a search query holds at most %d, so search for a few distinctive words", len(query), MaxSearchQueryBytes)
	}
	terms := storage.SearchTerms(query)
	if len(terms) == 0 {
		return nil, api.Errorf(api.InvalidRequest, "q: holds no word to search for; send one or more words (letters or digits), e.g. q=deploy+checklist")
	}
	return terms, nil
}

// unreadableStore is the answer for a store the caller may not read or
// that does not exist.
func unreadableStore(id string) error {
	return api.Errorf(api.NotFound, "memory store %s was not found among the stores this credential can read; list them with GET /v1/memory_stores", id)
}
