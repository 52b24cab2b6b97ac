package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// sessionHeader is the Streamable HTTP transport's session id header.
const sessionHeader = "Mcp-Session-Id"

// sessionIdle is how long a session lives without a request: a client that
// comes back later gets 404 for it and opens a new one, as the protocol
// says it should.
const sessionIdle = time.Hour

// initializePeek is how much of a POST body is read to tell an initialize
// (which opens a session) from any other message: an initialize is small.
const initializePeek = 64 << 10

// sessions serves MCP sessions: each has its own MCP server, bound to the
// credential that opened it, with a watch that turns the change feed of
// the stores it may read into resource notifications. Sessions live in
// this process: behind several servers sharing a database, a client's
// requests must reach the server that opened its session (or, on 404,
// it opens a new one).
type sessions struct {
	app          *app.App
	authenticate Authenticate
	shared       *mcp.Server
	handler      http.Handler
}

func newSessions(a *app.App, authenticate Authenticate, shared *mcp.Server) *sessions {
	s := &sessions{app: a, authenticate: authenticate, shared: shared}
	h := mcp.NewStreamableHTTPHandler(s.server, &mcp.StreamableHTTPOptions{JSONResponse: true, Logger: a.Logger(), SessionTimeout: sessionIdle})
	// The SDK refuses (403) a request in a session whose token's UserID is
	// not the one that opened it: the UserID here is the credential's
	// fingerprint, so a session id alone reaches nothing.
	bound := auth.RequireBearerToken(fingerprint, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+r.Header.Get("x-api-key"))
		}
		bound.ServeHTTP(w, r)
	})
	return s
}

// fingerprint names a credential without keeping it.
func fingerprint(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	return &auth.TokenInfo{UserID: hex.EncodeToString(sum[:])}, nil
}

// road is which of Handler's servers answers a request.
type road int

const (
	statelessRoad road = iota
	sessionRoad
	listenRoad
)

// roadOf tells r's road: a session's when it names one or is the
// initialize that opens one, a listen's for a subscriptions/listen,
// otherwise the stateless one. It leaves r's body as it was.
func roadOf(r *http.Request) road {
	if r.Header.Get(sessionHeader) != "" {
		return sessionRoad
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return statelessRoad
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, initializePeek))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil {
		return statelessRoad
	}
	methods := methodsOf(head)
	switch {
	case slices.Contains(methods, "initialize"):
		return sessionRoad
	case slices.Contains(methods, "subscriptions/listen"):
		return listenRoad
	}
	return statelessRoad
}

// methodsOf lists the methods of the JSON-RPC message (or batch) in body.
func methodsOf(body []byte) []string {
	type message struct {
		Method string `json:"method"`
	}
	body = bytes.TrimSpace(body)
	var batch []message
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &batch) != nil {
			return nil
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil
		}
		batch = append(batch, m)
	}
	var out []string
	for _, m := range batch {
		out = append(out, m.Method)
	}
	return out
}

func (s *sessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// server is the SDK's getServer: a request in a session is answered by the
// session's own server, which the SDK keeps (it asks here only to check
// the protocol version, which every server answers alike); an initialize
// gets a new server, watching for the credential that sent it.
func (s *sessions) server(r *http.Request) *mcp.Server {
	if r.Header.Get(sessionHeader) != "" {
		return s.shared
	}
	return newServer(s.app, s.authenticate, newWatch(s.app, s.authenticate, r))
}

// Bounds of a session's watch: the stores it follows, and how often it
// reads their feeds when no write in this process woke it (a write through
// another server sharing the database).
const (
	maxWatchedStores = 100
	watchRecheck     = 10 * time.Second
	watchBatch       = 100
)

// watch follows the change feed of the stores a session's credential may
// read, from when the session starts, and tells the client: every change
// is a notifications/resources/list_changed (a memory appeared, went, moved
// or changed size) and a notifications/resources/updated for a subscribed
// memory's URI.
type watch struct {
	app          *app.App
	authenticate Authenticate
	header       http.Header // the initialize's: the session's credential
	server       *mcp.Server
}

func newWatch(a *app.App, authenticate Authenticate, r *http.Request) *watch {
	return &watch{app: a, authenticate: authenticate, header: r.Header.Clone()}
}

// startSession runs when the client has initialized its session: the watch
// lasts as long as the session.
func (w *watch) startSession(_ context.Context, req *mcp.InitializedRequest) {
	ss := req.Session
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = ss.Wait()
		cancel()
	}()
	w.run(ctx, w.app.Logger().With(slog.String("mcp_session_id", ss.ID())))
}

// onListen starts the watch when a subscriptions/listen arrives: it lasts
// as long as that request's stream.
func (w *watch) onListen(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "subscriptions/listen" {
			w.run(ctx, w.app.Logger())
		}
		return next(ctx, method, req)
	}
}

// run follows each store the credential may read until ctx ends.
func (w *watch) run(ctx context.Context, log *slog.Logger) {
	acc, err := w.authenticate(ctx, w.header)
	if err != nil {
		log.Warn("mcp changes not watched: the credential was refused", "err", err)
		return
	}
	t := &tools{app: w.app, authenticate: w.authenticate}
	var ids []string
	err = t.eachStore(ctx, func(st storage.MemoryStoreRow) bool {
		if acc.CheckStore(ctx, st.ID, false) == nil {
			ids = append(ids, st.ID)
		}
		return len(ids) < maxWatchedStores
	})
	if err != nil {
		log.Warn("mcp changes not watched: the stores could not be listed", "err", err)
		return
	}
	// Each feed is followed from where it is now, read before the client
	// hears that its listen or session is ready, so a write it makes next
	// is told.
	for _, id := range ids {
		page, err := w.app.Store().ListChanges(ctx, id, 0, 1)
		if err != nil {
			log.Warn("mcp changes not watched in a store", "memory_store_id", id, "err", err)
			continue
		}
		go w.follow(ctx, log.With(slog.String("memory_store_id", id)), id, page.Latest)
	}
}

// follow tells the client of storeID's changes after sequence after,
// until ctx ends or the credential may no longer read the store.
func (w *watch) follow(ctx context.Context, log *slog.Logger, storeID string, after int64) {
	for {
		wake := w.app.Memories.WaitForChange(storeID)
		page, err := w.app.Store().ListChanges(ctx, storeID, after, watchBatch)
		if err != nil {
			log.Debug("mcp watch ended", "err", err)
			return
		}
		if len(page.Changes) > 0 {
			// The credential is checked again before anything is told:
			// a revoked key or a detached store hears no more.
			acc, err := w.authenticate(ctx, w.header)
			if err != nil || acc.CheckStore(ctx, storeID, false) != nil {
				log.Info("mcp watch ended: the session's credential may no longer read the store")
				return
			}
			for _, v := range page.Changes {
				if v.Path != "" {
					_ = w.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: resourceURI(storeID, v.Path)})
				}
			}
			listChanged(w.server)
			after = page.Changes[len(page.Changes)-1].Sequence
			if page.More {
				continue
			}
		}
		t := time.NewTimer(watchRecheck)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// listChangedURI is a placeholder resource that is never listed (resources
// answers resources/list itself) nor readable: adding and removing it is
// how a server sends notifications/resources/list_changed, which the SDK
// otherwise sends only when a server's fixed resources change.
const listChangedURI = "memstore://-/list-changed"

// listChanged sends notifications/resources/list_changed to srv's session.
func listChanged(srv *mcp.Server) {
	srv.AddResource(&mcp.Resource{URI: listChangedURI, Name: "list-changed"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, mcp.ResourceNotFoundError(listChangedURI)
	})
	srv.RemoveResources(listChangedURI)
}
