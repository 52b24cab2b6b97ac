package mcpproxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/mcpproxy"
	"github.com/memstore/memstore/internal/testserver"
)

// start runs the proxy against srv and returns a client session on its
// local side.
func start(t *testing.T, srv *testserver.Server, cfg mcpproxy.Config) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	local, remote := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- mcpproxy.Run(ctx, cfg, local) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, remote, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect to the proxy: %v (proxy: %v)", err, <-done)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return cs
}

// The proxy offers the server's eight tools; pinned to a store, they take
// no store argument and write there, as the key.
func TestProxyRelaysTheServersToolsPinnedToAStore(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "desk"})
	if err != nil {
		t.Fatal(err)
	}
	cs := start(t, srv, mcpproxy.Config{BaseURL: srv.URL, APIKey: srv.AdminKey, Store: "desk"})
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 8 {
		t.Fatalf("the proxy offers %d tools, want 8", len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		if props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any); props["store"] != nil {
			t.Fatalf("pinned, %s still asks for a store", tool.Name)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_create", Arguments: map[string]any{"path": "/from-desktop.md", "file_text": "hello"}})
	if err != nil || res.IsError {
		t.Fatalf("memory_create through the proxy: %v %+v", err, res)
	}
	page, err := admin.ListMemories(ctx, st.ID, client.ListMemoriesParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Memory == nil || page.Data[0].Memory.Path != "/from-desktop.md" {
		t.Fatalf("the store holds %+v", page.Data)
	}
}

// A refused key stops the proxy at once with a message that says what to
// check, rather than serving tools that all fail.
func TestProxyRefusesToStartWithABadKey(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	local, _ := mcp.NewInMemoryTransports()
	err := mcpproxy.Run(context.Background(), mcpproxy.Config{BaseURL: srv.URL, APIKey: "sk-wrong"}, local)
	if err == nil || !strings.Contains(err.Error(), "MEMSTORE_API_KEY") {
		t.Fatalf("Run with a bad key: %v, want an error naming MEMSTORE_API_KEY", err)
	}
}
