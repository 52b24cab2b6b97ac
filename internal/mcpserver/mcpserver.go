// Package mcpserver serves memstore's memory stores over the Model Context
// Protocol (Streamable HTTP at /mcp), so that Claude Code, Claude Desktop and
// other MCP clients read and write the same memories as Managed Agents
// sessions. Its tools mirror the commands of Claude's memory tool, so a model
// that knows that tool uses them without being taught. Every write goes
// through internal/app: it is an ordinary versioned write attributed to the
// credential, and shows in the history, the change feed and the webhooks.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
)

// Access is what one authenticated credential may do with memory stores.
// internal/server builds it from the request's principal, so the tools
// refuse exactly what the REST API refuses.
type Access interface {
	// Caller is who the writes are attributed to.
	Caller() app.Caller
	// CheckStore returns nil when the credential may read storeID (and
	// change it, when write is set), or a refusal that says why.
	CheckStore(ctx context.Context, storeID string, write bool) error
}

// Authenticate resolves a request's headers (x-api-key or Authorization:
// Bearer) to its Access, or refuses with an error that says what to send.
type Authenticate func(ctx context.Context, h http.Header) (Access, error)

// Handler serves MCP at the path it is mounted on. A request whose
// credential is refused is answered 401/403 before the protocol sees it, so
// it can change nothing. Every request carries its credential, which the
// tools check again.
//
// Requests take one of three roads (see sessions.go): an initialize opens
// a session (Mcp-Session-Id) over which the client hears of changes to
// memories; a subscriptions/listen (the stateless protocol's way to hear
// of them) gets a server of its own for as long as it listens; anything
// else is answered statelessly by one shared server, as a one-shot client
// or a client of a server that lost its session expects.
func Handler(a *app.App, authenticate Authenticate) http.Handler {
	shared := newServer(a, authenticate, nil)
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return shared },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: a.Logger()})
	sessions := newSessions(a, authenticate, shared)
	listen := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server { return newServer(a, authenticate, newWatch(a, authenticate, r)) },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: a.Logger()})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := authenticate(r.Context(), r.Header); err != nil {
			refuse(w, a.Logger(), err)
			return
		}
		switch roadOf(r) {
		case sessionRoad:
			sessions.ServeHTTP(w, r)
		case listenRoad:
			listen.ServeHTTP(w, r)
		default:
			stateless.ServeHTTP(w, r)
		}
	})
}

// refuse answers a refused credential with the API's error envelope.
func refuse(w http.ResponseWriter, log *slog.Logger, err error) {
	status, body := refusal(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		log.Debug("mcp refusal not written", "err", err)
	}
}

// newServer builds an MCP server with the eight memory tools and the
// memories as resources. A session's server has its watch (sessions.go),
// which subscriptions and the change feed use; a stateless one has none.
func newServer(a *app.App, authenticate Authenticate, w *watch) *mcp.Server {
	version := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
	}
	r := newResources(a, authenticate, w)
	opts := &mcp.ServerOptions{
		Instructions:       "memstore memory stores: durable files shared with other agents. Call memory_list_stores first, then memory_view a store's \"/\" to see what it holds; search with memory_search before writing something new.",
		Logger:             a.Logger(),
		SubscribeHandler:   r.subscribe,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	}
	if w != nil {
		opts.InitializedHandler = w.startSession
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "memstore", Version: version}, opts)
	t := &tools{app: a, authenticate: authenticate}
	t.register(srv)
	r.register(srv)
	if w != nil {
		w.server = srv
		srv.AddReceivingMiddleware(w.onListen)
	}
	return srv
}

// refusal is the status and envelope of a refused credential; an error that
// is not an *api.Error (the database failing) is a 500 that names nothing.
func refusal(err error) (int, api.ErrorEnvelope) {
	var e *api.Error
	if !errors.As(err, &e) {
		e = api.Errorf(api.Internal, "the credential could not be checked; try again")
	}
	return e.Type.Status(), api.ErrorEnvelope{Type: "error", Error: e}
}
