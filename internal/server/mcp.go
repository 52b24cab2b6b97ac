package server

import (
	"context"
	"net/http"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/mcpserver"
)

// mcpRoutes serves the MCP server at /mcp, behind the API's own credential
// check: an environment key or sessions token reaches there exactly the
// stores it reaches on the REST API.
func (s *Server) mcpRoutes() {
	s.mux.Handle("/mcp", mcpserver.Handler(s.app, s.mcpAccess))
}

// mcpAccess authenticates an MCP request's headers as authenticate does a
// REST request's.
func (s *Server) mcpAccess(ctx context.Context, h http.Header) (mcpserver.Access, error) {
	p, err := s.authenticateSecret(ctx, credentialFromHeader(h))
	if err != nil {
		return nil, err
	}
	return mcpPrincipal{s: s, p: p}, nil
}

// mcpPrincipal is a principal as the MCP tools see it.
type mcpPrincipal struct {
	s *Server
	p Principal
}

func (m mcpPrincipal) Caller() app.Caller { return m.p.Caller() }

func (m mcpPrincipal) CheckStore(ctx context.Context, storeID string, write bool) error {
	return m.s.memoryStoreAccess(ctx, m.p, storeID, write)
}
