// Package mcpproxy serves memstore's MCP tools over stdio, for desktop
// clients that start a local command (Claude Desktop), by forwarding every
// call to a memstore server's /mcp. The tools are implemented once, in
// internal/mcpserver; this side lists them from the server and relays, so
// both roads always offer the same tools and refuse the same things.
package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config says which server to forward to, as whom.
type Config struct {
	// BaseURL is the server's root (its /mcp is used).
	BaseURL string
	// APIKey is sent as x-api-key with every request.
	APIKey string
	// Store, when set, pins every tool to this store id or name: the
	// `store` argument disappears from the tools and is filled in.
	Store string
	// Version is reported to the desktop client.
	Version string
	Logger  *slog.Logger
}

// withKey adds the API key to every request to the server.
type withKey struct {
	key  string
	next http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("x-api-key", k.key)
	return k.next.RoundTrip(r)
}

// Run connects to the server, then serves its tools on local until the
// client on local goes away or ctx ends. It fails at once, saying what to
// fix, when the server cannot be reached or refuses the key.
func Run(ctx context.Context, cfg Config, local mcp.Transport) error {
	endpoint := strings.TrimSuffix(cfg.BaseURL, "/") + "/mcp"
	c := mcp.NewClient(&mcp.Implementation{Name: "memstore-mcp", Version: cfg.Version}, nil)
	remote, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: withKey{key: cfg.APIKey, next: http.DefaultTransport}},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("cannot open an MCP session with %s (%v); check that the server runs (`memstore serve`), that MEMSTORE_BASE_URL is its root, and that MEMSTORE_API_KEY is a valid key", endpoint, err)
	}
	defer remote.Close()

	srv := mcp.NewServer(&mcp.Implementation{Name: "memstore", Version: cfg.Version}, &mcp.ServerOptions{Logger: cfg.Logger})
	for tool, err := range remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the tools of %s: %w", endpoint, err)
		}
		if cfg.Store != "" {
			tool.InputSchema = withoutStore(tool.InputSchema)
		}
		srv.AddTool(tool, forward(remote, tool.Name, cfg.Store))
	}
	return srv.Run(ctx, local)
}

// forward relays a call to the server, with the pinned store filled in.
// A relay that fails is a tool error the model can read, not a crash.
func forward(remote *mcp.ClientSession, name, store string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]any{}
		if raw := req.Params.Arguments; len(raw) > 0 {
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, fmt.Errorf("arguments of %s are not a JSON object: %w", name, err)
			}
		}
		if store != "" && name != "memory_list_stores" {
			args["store"] = store
		}
		res, err := remote.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			var failed mcp.CallToolResult
			failed.SetError(fmt.Errorf("the memstore server did not answer %s (%v); try again, or check that it runs", name, err))
			return &failed, nil
		}
		return res, nil
	}
}

// withoutStore removes the store argument from a tool's input schema (as
// the server sent it: a JSON object).
func withoutStore(schema any) any {
	s, ok := schema.(map[string]any)
	if !ok {
		return schema
	}
	s = maps.Clone(s)
	if props, ok := s["properties"].(map[string]any); ok {
		props = maps.Clone(props)
		delete(props, "store")
		s["properties"] = props
	}
	if req, ok := s["required"].([]any); ok {
		s["required"] = slices.DeleteFunc(slices.Clone(req), func(v any) bool { return v == "store" })
	}
	return s
}
