package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testserver"
)

// notices collects what the server tells a session.
type notices struct {
	listChanged chan struct{}
	updated     chan string
}

// Protocol versions a client may speak: legacy opens a session
// (Mcp-Session-Id) and hears notifications on its standalone stream; the
// SDK's default, the stateless protocol, hears them on a
// subscriptions/listen stream.
const (
	legacyProtocol    = "2025-06-18"
	statelessProtocol = ""
)

// connectSession connects an MCP client speaking protocol that listens for
// the server's notifications.
func connectSession(t *testing.T, url, key, protocol string) (*mcp.ClientSession, notices) {
	t.Helper()
	n := notices{listChanged: make(chan struct{}, 100), updated: make(chan string, 100)}
	c := mcp.NewClient(&mcp.Implementation{Name: "memstore-test", Version: "1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { n.listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.updated <- r.Params.URI
		},
	})
	tr := &mcp.StreamableClientTransport{
		Endpoint:   url + "/mcp",
		HTTPClient: &http.Client{Transport: withKey{key: key, next: http.DefaultTransport}},
		MaxRetries: -1,
	}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if protocol == legacyProtocol && cs.ID() == "" {
		t.Fatal("the server opened no session (no Mcp-Session-Id)")
	}
	return cs, n
}

// Memories are resources: listed page by page across the stores, read by
// their URI or through the template, and a write through the REST API is
// told to the session: the list changed, and the subscribed memory was
// updated.
func TestMemoriesAsResources(t *testing.T) {
	for name, protocol := range map[string]string{"session": legacyProtocol, "stateless": statelessProtocol} {
		t.Run(name, func(t *testing.T) { testMemoriesAsResources(t, protocol) })
	}
}

func testMemoriesAsResources(t *testing.T, protocol string) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	notes, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "team notes"})
	if err != nil {
		t.Fatal(err)
	}
	bulk, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := admin.CreateMemory(ctx, notes.ID, api.CreateMemoryRequest{Path: "/ops/deploy.md", Content: "Deploys go out on Tuesdays.\n"})
	if err != nil {
		t.Fatal(err)
	}
	// More memories than one page holds, so the listing pages across
	// stores (written straight to the database: a hundred API round
	// trips would only slow the test).
	for i := range 100 {
		if _, err := srv.Store.CreateMemory(ctx, storage.NewMemory{StoreID: bulk.ID, Path: fmt.Sprintf("/n/%03d.md", i), Content: "x", By: storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_test"}, MaxMemories: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	cs, n := connectSession(t, srv.URL, srv.AdminKey, protocol)

	seen := map[string]int64{}
	pages := 0
	for cursor := ""; ; pages++ {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Resources {
			if _, dup := seen[r.URI]; dup {
				t.Fatalf("%s listed twice", r.URI)
			}
			seen[r.URI] = r.Size
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	deployURI := "memstore://" + notes.ID + "/ops/deploy.md"
	if len(seen) != 101 || pages < 1 || seen[deployURI] != int64(len("Deploys go out on Tuesdays.\n")) {
		t.Fatalf("resources/list gave %d memories over %d pages (want 101 over 2); %s has size %d", len(seen), pages+1, deployURI, seen[deployURI])
	}
	if _, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "not-a-cursor"}); err == nil || !strings.Contains(err.Error(), "nextCursor") {
		t.Fatalf("a made-up cursor: %v, want a refusal naming nextCursor", err)
	}

	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "memstore://{store}/{+path}" {
		t.Fatalf("resource templates: %+v %v", tmpl, err)
	}
	for _, uri := range []string{deployURI, "memstore://team%20notes/ops/deploy.md"} {
		got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(got.Contents) != 1 || got.Contents[0].Text != "Deploys go out on Tuesdays.\n" || got.Contents[0].MIMEType != "text/markdown" {
			t.Fatalf("read %s: %+v %v", uri, got, err)
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memstore://" + notes.ID + "/nope.md"}); err == nil {
		t.Fatal("reading a memory that does not exist succeeded")
	}

	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: deployURI}); err != nil {
		t.Fatal(err)
	}
	thursdays := "Deploys go out on Thursdays.\n"
	if _, err := admin.UpdateMemory(ctx, notes.ID, deploy.ID, api.UpdateMemoryRequest{Content: &thursdays}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, n.updated, func(uri string) bool { return uri == deployURI }, "notifications/resources/updated for "+deployURI)
	waitFor(t, n.listChanged, func(struct{}) bool { return true }, "notifications/resources/list_changed")
	got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: deployURI})
	if err != nil || got.Contents[0].Text != thursdays {
		t.Fatalf("read after the update: %+v %v", got, err)
	}

	// A new memory changes the list; a memory nobody subscribed to is not
	// announced as updated.
	if _, err := admin.CreateMemory(ctx, notes.ID, api.CreateMemoryRequest{Path: "/ops/oncall.md", Content: "Page Priya.\n"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, n.listChanged, func(struct{}) bool { return true }, "notifications/resources/list_changed after a create")
	select {
	case uri := <-n.updated:
		if uri != deployURI {
			t.Fatalf("told of an update to %s, which nobody subscribed to", uri)
		}
	default:
	}
}

func waitFor[T any](t *testing.T, ch <-chan T, ok func(T) bool, what string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case v := <-ch:
			if ok(v) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s within 5 s", what)
		}
	}
}

// A session is bound to the credential that opened it: another valid
// credential sending its session id is refused and changes nothing, and a
// request with neither a session nor an initialize is still answered,
// statelessly.
func TestMCPSessionIsBoundToItsCredential(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	w := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	cs, _ := connectSession(t, srv.URL, srv.AdminKey, legacyProtocol)

	post := func(key, session, body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("x-api-key", key)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	create := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_create","arguments":{"store":"` + st.ID + `","path":"/x.md","file_text":"x"}}}`
	if code, body := post(w.Key, cs.ID(), create); code != http.StatusForbidden {
		t.Fatalf("another credential in the admin's session: %d %s, want 403", code, body)
	}
	if ms := memories(t, admin, st.ID); len(ms) != 0 {
		t.Fatalf("the refused request wrote %+v", ms)
	}
	if code, body := post(srv.AdminKey, "", create); code != http.StatusOK || !strings.Contains(body, "Created /x.md") {
		t.Fatalf("a stateless tools/call: %d %s", code, body)
	}
	if ms := memories(t, admin, st.ID); len(ms) != 1 {
		t.Fatalf("after the stateless create the store holds %+v", ms)
	}
}
