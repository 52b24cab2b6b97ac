package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
)

// CreateMemoryStore creates a store.
func (c *Client) CreateMemoryStore(ctx context.Context, req api.CreateMemoryStoreRequest) (*api.MemoryStore, error) {
	out := new(api.MemoryStore)
	return out, c.do(ctx, request{method: http.MethodPost, path: "/v1/memory_stores", body: req, memory: true}, out)
}

// GetMemoryStore fetches a store, archived or not.
func (c *Client) GetMemoryStore(ctx context.Context, storeID string) (*api.MemoryStore, error) {
	return c.memoryStoreCall(ctx, http.MethodGet, "/v1/memory_stores/{memory_store_id}", storeID, nil)
}

// UpdateMemoryStore patches a store's name, description or metadata.
func (c *Client) UpdateMemoryStore(ctx context.Context, storeID string, req api.UpdateMemoryStoreRequest) (*api.MemoryStore, error) {
	return c.memoryStoreCall(ctx, http.MethodPost, "/v1/memory_stores/{memory_store_id}", storeID, req)
}

// ArchiveMemoryStore makes a store read-only for good; it can no longer be
// attached to new sessions.
func (c *Client) ArchiveMemoryStore(ctx context.Context, storeID string) (*api.MemoryStore, error) {
	return c.memoryStoreCall(ctx, http.MethodPost, "/v1/memory_stores/{memory_store_id}/archive", storeID, nil)
}

// DeleteMemoryStore deletes a store with all its memories and versions.
func (c *Client) DeleteMemoryStore(ctx context.Context, storeID string) (*api.Deleted, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}", storeID)
	if err != nil {
		return nil, err
	}
	out := new(api.Deleted)
	return out, c.do(ctx, request{method: http.MethodDelete, path: path, memory: true}, out)
}

func (c *Client) memoryStoreCall(ctx context.Context, method, pattern, storeID string, body any) (*api.MemoryStore, error) {
	path, err := route(pattern, storeID)
	if err != nil {
		return nil, err
	}
	out := new(api.MemoryStore)
	return out, c.do(ctx, request{method: method, path: path, body: body, memory: true}, out)
}

// ListMemoryStoresParams filters and pages GET /v1/memory_stores. Zero
// values are left out of the query, so the server's defaults apply.
type ListMemoryStoresParams struct {
	Limit           int
	Page            string
	IncludeArchived bool
	CreatedAtGTE    time.Time
	CreatedAtLTE    time.Time
}

func (p ListMemoryStoresParams) query() url.Values {
	q := url.Values{}
	setPage(q, p.Limit, p.Page)
	if p.IncludeArchived {
		q.Set("include_archived", "true")
	}
	setTime(q, "created_at[gte]", p.CreatedAtGTE)
	setTime(q, "created_at[lte]", p.CreatedAtLTE)
	return q
}

// ListMemoryStores returns one page of stores.
func (c *Client) ListMemoryStores(ctx context.Context, p ListMemoryStoresParams) (*api.Page[api.MemoryStore], error) {
	out := new(api.Page[api.MemoryStore])
	return out, c.do(ctx, request{method: http.MethodGet, path: "/v1/memory_stores", query: p.query(), memory: true}, out)
}

// ListAllMemoryStores yields every store matching p, fetching page after
// page; p.Page is where it starts. It stops at the first error, which it
// yields.
func (c *Client) ListAllMemoryStores(ctx context.Context, p ListMemoryStoresParams) iter.Seq2[api.MemoryStore, error] {
	return all(p.Page, func(page string) (*api.Page[api.MemoryStore], error) {
		p.Page = page
		return c.ListMemoryStores(ctx, p)
	})
}

// CreateMemory writes a new memory at req.Path. It never overwrites: an
// occupied path is a 409 memory_path_conflict_error naming the memory that
// holds it.
func (c *Client) CreateMemory(ctx context.Context, storeID string, req api.CreateMemoryRequest) (*api.Memory, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memories", storeID)
	if err != nil {
		return nil, err
	}
	out := new(api.Memory)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, body: req, memory: true}, out)
}

// GetMemoryParams selects the view of GetMemory; the zero value takes the
// server's default, the full view with content.
type GetMemoryParams struct {
	View string // api.ViewBasic or api.ViewFull
}

// GetMemory fetches one memory.
func (c *Client) GetMemory(ctx context.Context, storeID, memoryID string, p GetMemoryParams) (*api.Memory, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memories/{memory_id}", storeID, memoryID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	setString(q, "view", p.View)
	out := new(api.Memory)
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: q, memory: true}, out)
}

// UpdateMemory changes a memory's content, its path (the id stays), or both.
//
// With a precondition the call is also safe to retry: if a lost response
// hid a success, the repeat finds the stored state already equal to the
// request and the server answers 200 without writing a second version.
// Without one, a retry could overwrite another writer's change made in
// between, so such updates are never repeated.
func (c *Client) UpdateMemory(ctx context.Context, storeID, memoryID string, req api.UpdateMemoryRequest) (*api.Memory, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memories/{memory_id}", storeID, memoryID)
	if err != nil {
		return nil, err
	}
	out := new(api.Memory)
	return out, c.do(ctx, request{method: http.MethodPost, path: path, body: req, memory: true, idempotent: req.Precondition != nil}, out)
}

// DeleteMemoryParams guards DeleteMemory.
type DeleteMemoryParams struct {
	// ExpectedContentSHA256, when set, makes the delete apply only if the
	// memory still has this content (else 409), so a delete never discards
	// an edit it has not seen.
	ExpectedContentSHA256 string
}

// DeleteMemory deletes a memory; its versions remain.
func (c *Client) DeleteMemory(ctx context.Context, storeID, memoryID string, p DeleteMemoryParams) (*api.Deleted, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memories/{memory_id}", storeID, memoryID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	setString(q, "expected_content_sha256", p.ExpectedContentSHA256)
	out := new(api.Deleted)
	return out, c.do(ctx, request{method: http.MethodDelete, path: path, query: q, memory: true}, out)
}

// ListMemoriesParams filters and pages a memory listing. Zero values are
// left out of the query.
type ListMemoriesParams struct {
	// PathPrefix limits the listing to a folder; it ends in "/" and matches
	// whole segments.
	PathPrefix string
	// Depth 0 lists the whole subtree; 1 lists direct children and rolls
	// deeper paths up into api.MemoryPrefix items.
	Depth int
	// View is api.ViewBasic (no content, the default) or api.ViewFull
	// (content included; the server caps Limit at 20).
	View  string
	Limit int
	Page  string
}

func (p ListMemoriesParams) query() url.Values {
	q := url.Values{}
	setString(q, "path_prefix", p.PathPrefix)
	if p.Depth > 0 {
		q.Set("depth", strconv.Itoa(p.Depth))
	}
	setString(q, "view", p.View)
	setPage(q, p.Limit, p.Page)
	return q
}

// ListMemories returns one page of a store's memories (and, with Depth,
// folder prefixes) in path order.
func (c *Client) ListMemories(ctx context.Context, storeID string, p ListMemoriesParams) (*api.Page[api.MemoryListItem], error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memories", storeID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.MemoryListItem])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: p.query(), memory: true}, out)
}

// ListAllMemories yields every item of the listing p describes, fetching
// page after page from p.Page on; it stops at the first error, which it
// yields. A sync pass uses it to read a whole store.
func (c *Client) ListAllMemories(ctx context.Context, storeID string, p ListMemoriesParams) iter.Seq2[api.MemoryListItem, error] {
	return all(p.Page, func(page string) (*api.Page[api.MemoryListItem], error) {
		p.Page = page
		return c.ListMemories(ctx, storeID, p)
	})
}

// ListMemoryVersionsParams filters and pages a store's version history.
// Zero values are left out of the query.
type ListMemoryVersionsParams struct {
	MemoryID     string
	SessionID    string
	APIKeyID     string
	UserID       string // versions a console user wrote
	Operation    string // api.OperationCreated, …Modified, …Deleted
	CreatedAtGTE time.Time
	CreatedAtLTE time.Time
	View         string
	Limit        int
	Page         string
}

func (p ListMemoryVersionsParams) query() url.Values {
	q := url.Values{}
	setString(q, "memory_id", p.MemoryID)
	setString(q, "session_id", p.SessionID)
	setString(q, "api_key_id", p.APIKeyID)
	setString(q, "user_id", p.UserID)
	setString(q, "operation", p.Operation)
	setTime(q, "created_at[gte]", p.CreatedAtGTE)
	setTime(q, "created_at[lte]", p.CreatedAtLTE)
	setString(q, "view", p.View)
	setPage(q, p.Limit, p.Page)
	return q
}

// ListMemoryVersions returns one page of a store's versions, newest first.
func (c *Client) ListMemoryVersions(ctx context.Context, storeID string, p ListMemoryVersionsParams) (*api.Page[api.MemoryVersion], error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/memory_versions", storeID)
	if err != nil {
		return nil, err
	}
	out := new(api.Page[api.MemoryVersion])
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: p.query(), memory: true}, out)
}

// ListAllMemoryVersions yields every version matching p, newest first,
// fetching page after page; it stops at the first error, which it yields.
func (c *Client) ListAllMemoryVersions(ctx context.Context, storeID string, p ListMemoryVersionsParams) iter.Seq2[api.MemoryVersion, error] {
	return all(p.Page, func(page string) (*api.Page[api.MemoryVersion], error) {
		p.Page = page
		return c.ListMemoryVersions(ctx, storeID, p)
	})
}

// GetMemoryVersion fetches one version; a redacted one comes back with its
// content, hash, size and path null.
func (c *Client) GetMemoryVersion(ctx context.Context, storeID, versionID string) (*api.MemoryVersion, error) {
	return c.versionCall(ctx, http.MethodGet, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}", storeID, versionID)
}

// RedactMemoryVersion clears a version's content, hash, size and path and
// keeps its audit fields. The head version of a live memory cannot be
// redacted (400): update or delete the memory first.
func (c *Client) RedactMemoryVersion(ctx context.Context, storeID, versionID string) (*api.MemoryVersion, error) {
	return c.versionCall(ctx, http.MethodPost, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact", storeID, versionID)
}

func (c *Client) versionCall(ctx context.Context, method, pattern, storeID, versionID string) (*api.MemoryVersion, error) {
	path, err := route(pattern, storeID, versionID)
	if err != nil {
		return nil, err
	}
	out := new(api.MemoryVersion)
	return out, c.do(ctx, request{method: method, path: path, memory: true}, out)
}

// all turns a page fetcher into an iterator over every item from page
// start on. A cursor that does not advance ends the walk with an error
// rather than looping forever on a faulty server.
func all[T any](start string, fetch func(page string) (*api.Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		page := start
		for {
			p, err := fetch(page)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.Data {
				if !yield(it, nil) {
					return
				}
			}
			if p.NextPage == nil || *p.NextPage == "" {
				return
			}
			if *p.NextPage == page {
				var zero T
				yield(zero, fmt.Errorf("client: server returned the same next_page cursor %q twice; stopping to avoid an endless listing", page))
				return
			}
			page = *p.NextPage
		}
	}
}

func setPage(q url.Values, limit int, page string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	setString(q, "page", page)
}

func setString(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

func setTime(q url.Values, key string, t time.Time) {
	if !t.IsZero() {
		q.Set(key, t.UTC().Format(time.RFC3339Nano))
	}
}
