package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// resourceScheme is the URI scheme of a memory as an MCP resource:
// memstore://<store id>/<path> (a store's name works too, URL-escaped, for
// a read).
const resourceScheme = "memstore"

// resourcePage is how many memories one resources/list answer holds.
const resourcePage = 100

// resources offers every memory the credential may read as an MCP
// resource: resources/list pages through them store by store, the template
// memstore://{store}/{+path} reads any of them, and a subscription to one
// hears of its changes (sessions.go).
type resources struct {
	tools
	// watch is set on a server that tells its client of changes (a
	// session's, a listen's); the shared stateless one cannot.
	watch *watch
}

func newResources(a *app.App, authenticate Authenticate, w *watch) *resources {
	return &resources{tools: tools{app: a, authenticate: authenticate}, watch: w}
}

// register adds the template and answers resources/list (the SDK would
// list only resources added one by one).
func (r *resources) register(s *mcp.Server) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: resourceScheme + "://{store}/{+path}",
		Name:        "memory",
		Title:       "A memory in a memstore memory store",
		Description: "The current content of the memory at path in store (a store id or name, as memory_list_stores shows them).",
		MIMEType:    "text/plain",
	}, r.read)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListResourcesRequest); ok && method == "resources/list" {
				return r.list(ctx, lr)
			}
			return next(ctx, method, req)
		}
	})
}

// resourceURI is the URI of the memory at p in storeID.
func resourceURI(storeID, p string) string {
	return (&url.URL{Scheme: resourceScheme, Host: storeID, Path: p}).String()
}

// parseURI splits a memory's URI into its store (id or name, which may
// be escaped: memstore://team%20notes/a.md) and path.
func parseURI(uri string) (store, p string, err error) {
	bad := fmt.Errorf("%q is not a memory's URI: it has the form memstore://<store id>/<path>, as resources/list gives them", uri)
	rest, ok := strings.CutPrefix(uri, resourceScheme+"://")
	if !ok {
		return "", "", bad
	}
	host, tail, ok := strings.Cut(rest, "/")
	if !ok || host == "" || tail == "" {
		return "", "", bad
	}
	if store, err = url.PathUnescape(host); err != nil {
		return "", "", bad
	}
	if p, err = url.PathUnescape("/" + tail); err != nil {
		return "", "", bad
	}
	return store, p, nil
}

// access resolves the credential of a request. A subscription a
// subscriptions/listen asks for comes without the request's headers: it is
// the listen's, whose credential its watch holds.
func (r *resources) access(ctx context.Context, extra *mcp.RequestExtra) (Access, error) {
	if extra == nil && r.watch != nil {
		return r.authenticate(ctx, r.watch.header)
	}
	if extra == nil {
		return nil, errors.New("no credential came with this request: connect over HTTP with an x-api-key header")
	}
	return r.authenticate(ctx, extra.Header)
}

func (r *resources) read(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	acc, err := r.access(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	ref, p, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	st, err := r.store(ctx, acc, ref, false)
	if err != nil {
		return nil, err
	}
	m, err := r.memory(ctx, st.ID, p)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeType(p), Text: *m.Content}}}, nil
}

// subscribe accepts a subscription to a memory the credential may read, by
// the URI resources/list gives it (the one notifications name), in a
// session or a subscriptions/listen (a one-shot request has nowhere to
// hear of changes).
func (r *resources) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if r.watch == nil {
		return errors.New("subscriptions need a session (send initialize, then its Mcp-Session-Id with every request) or a subscriptions/listen stream")
	}
	acc, err := r.access(ctx, req.Extra)
	if err != nil {
		return err
	}
	ref, p, err := parseURI(req.Params.URI)
	if err != nil {
		return err
	}
	st, err := r.store(ctx, acc, ref, false)
	if err != nil {
		return err
	}
	if ref != st.ID {
		return fmt.Errorf("subscribe by the store's id, as resources/list gives it: %s", resourceURI(st.ID, p))
	}
	return nil
}

// listCursor is where the next resources/list page starts: a store and
// the memory listing's cursor within it.
type listCursor struct {
	Store  string `json:"s"`
	Cursor string `json:"c,omitempty"`
}

// list answers resources/list: the memories of every store the credential
// may read, resourcePage at a time, store by store (newest store first,
// paths in order within one).
func (r *resources) list(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	acc, err := r.access(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	var at listCursor
	if c := req.Params.Cursor; c != "" {
		raw, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || json.Unmarshal(raw, &at) != nil || at.Store == "" {
			return nil, errors.New("cursor is not one resources/list gave: send the nextCursor of the previous page, or none for the first")
		}
	}
	var stores []storage.MemoryStoreRow
	err = r.eachStore(ctx, func(st storage.MemoryStoreRow) bool {
		if acc.CheckStore(ctx, st.ID, false) == nil {
			stores = append(stores, st)
		}
		return len(stores) < maxListedStores
	})
	if err != nil {
		return nil, err
	}
	first := 0
	if at.Store != "" {
		first = slices.IndexFunc(stores, func(st storage.MemoryStoreRow) bool { return st.ID == at.Store })
		if first < 0 {
			return nil, fmt.Errorf("the cursor's store %s is no longer readable with this credential: list again from the first page", at.Store)
		}
	}
	out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	for i := first; i < len(stores); i++ {
		st := stores[i]
		cursor := ""
		if i == first {
			cursor = at.Cursor
		}
		page, err := r.app.Store().ListMemories(ctx, storage.MemoryQuery{StoreID: st.ID, Prefix: "/", Limit: resourcePage - len(out.Resources), Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, e := range page.Items {
			if e.Prefix != "" {
				continue
			}
			out.Resources = append(out.Resources, &mcp.Resource{
				URI:         resourceURI(st.ID, e.Memory.Path),
				Name:        e.Memory.Path,
				Title:       e.Memory.Path + " in " + st.Name,
				Description: "memory " + e.Memory.ID + " in store " + st.Name,
				MIMEType:    mimeType(e.Memory.Path),
				Size:        e.Memory.ContentSizeBytes,
			})
		}
		next := listCursor{}
		switch {
		case page.Next != "":
			next = listCursor{Store: st.ID, Cursor: page.Next}
		case len(out.Resources) >= resourcePage && i+1 < len(stores):
			next = listCursor{Store: stores[i+1].ID}
		}
		if next.Store != "" {
			raw, _ := json.Marshal(next)
			out.NextCursor = base64.RawURLEncoding.EncodeToString(raw)
			return out, nil
		}
	}
	return out, nil
}

// mimeType is a memory's type by its extension: most are Markdown.
func mimeType(p string) string {
	switch path.Ext(p) {
	case ".md", ".markdown":
		return "text/markdown"
	case ".json":
		return "application/json"
	}
	return "text/plain"
}
