package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/memstore/memstore/api"
)

// SearchParams narrows a search: a subtree, a page size and the page to
// read (a previous answer's NextPage). Zero values mean the whole store,
// the server's default size and the first page.
type SearchParams struct {
	PathPrefix string
	Limit      int
	Page       string
}

// SearchMemories finds the memories of a store holding every word of
// query, best first (GET /v1/memory_stores/{id}/search, memstore's own:
// Anthropic's API answers it 404).
func (c *Client) SearchMemories(ctx context.Context, storeID, query string, p SearchParams) (*api.Page[api.SearchHit], error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/search", storeID)
	if err != nil {
		return nil, err
	}
	q := url.Values{"q": {query}}
	if p.PathPrefix != "" {
		q.Set("path_prefix", p.PathPrefix)
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Page != "" {
		q.Set("page", p.Page)
	}
	out := new(api.Page[api.SearchHit])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: q, memory: true}, out)
}
