package mcpserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// withKey sends key as x-api-key on every request, as Claude Code's
// --header does.
type withKey struct {
	key  string
	next http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("x-api-key", k.key)
	return k.next.RoundTrip(r)
}

// connect opens an MCP session with the SDK's own client against url/mcp.
func connect(t *testing.T, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "memstore-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:             url + "/mcp",
		HTTPClient:           &http.Client{Transport: withKey{key: key, next: http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	cs, err := c.Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// call calls a tool and returns its text, failing the test on a protocol
// error; isError says whether the tool refused.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (text string, isError bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	text, isErr := call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s refused: %s", name, text)
	}
	return text
}

// memories lists a store's memories through the REST API.
func memories(t *testing.T, admin *client.Client, storeID string) []api.Memory {
	t.Helper()
	page, err := admin.ListMemories(context.Background(), storeID, client.ListMemoriesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Memory
	for _, it := range page.Data {
		if it.Memory != nil {
			out = append(out, *it.Memory)
		}
	}
	return out
}

// The eight tools over /mcp with an API key: a write through MCP is an
// ordinary versioned write the REST API reads back, attributed to the key.
func TestMemoryToolsWithAnAPIKey(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "team notes"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connect(t, srv.URL, srv.AdminKey)
	if err != nil {
		t.Fatal(err)
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"memory_create", "memory_delete", "memory_insert", "memory_list_stores", "memory_rename", "memory_search", "memory_str_replace", "memory_view"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	if out := mustCall(t, cs, "memory_list_stores", nil); !strings.Contains(out, st.ID) || !strings.Contains(out, "team notes") {
		t.Fatalf("memory_list_stores does not show the store: %s", out)
	}
	created := mustCall(t, cs, "memory_create", map[string]any{"store": "team notes", "path": "/deploy.md", "file_text": "Deploys go out on Tuesdays.\nAsk Priya for the zanzibar runbook.\n"})
	ms := memories(t, admin, st.ID)
	if len(ms) != 1 || ms[0].Path != "/deploy.md" {
		t.Fatalf("after memory_create the REST API lists %+v", ms)
	}
	if !strings.Contains(created, ms[0].MemoryVersionID) {
		t.Fatalf("memory_create's answer %q does not name the new version %s", created, ms[0].MemoryVersionID)
	}

	replaced := mustCall(t, cs, "memory_str_replace", map[string]any{"store": st.ID, "path": "/deploy.md", "old_str": "Tuesdays", "new_str": "Thursdays"})
	got, err := admin.GetMemory(ctx, st.ID, ms[0].ID, client.GetMemoryParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Content == nil || !strings.Contains(*got.Content, "Thursdays") || !strings.Contains(replaced, got.MemoryVersionID) {
		t.Fatalf("after memory_str_replace (%q) the REST API reads %+v", replaced, got)
	}
	versions, err := admin.ListMemoryVersions(ctx, st.ID, client.ListMemoryVersionsParams{MemoryID: got.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(versions.Data) != 2 {
		t.Fatalf("the memory has %d versions, want 2 (created, modified)", len(versions.Data))
	}
	for _, v := range versions.Data {
		if v.CreatedBy.Type != api.APIActor || v.CreatedBy.APIKeyID == "" {
			t.Fatalf("version %s is attributed to %+v, want the API key", v.ID, v.CreatedBy)
		}
	}

	if out := mustCall(t, cs, "memory_view", map[string]any{"store": st.ID, "path": "/deploy.md"}); !strings.Contains(out, "     1\tDeploys go out on Thursdays.") {
		t.Fatalf("memory_view shows %q", out)
	}
	if out := mustCall(t, cs, "memory_view", map[string]any{"store": st.ID, "path": "/"}); !strings.Contains(out, "/deploy.md") {
		t.Fatalf("memory_view / lists %q", out)
	}
	if out := mustCall(t, cs, "memory_search", map[string]any{"query": "ZANZIBAR"}); !strings.Contains(out, "/deploy.md") || !strings.Contains(out, "**zanzibar** runbook") {
		t.Fatalf("memory_search does not find the memory: %q", out)
	}
	if out := mustCall(t, cs, "memory_search", map[string]any{"query": "kilimanjaro"}); !strings.Contains(out, "No memory") {
		t.Fatalf("memory_search finds a word no memory holds: %q", out)
	}

	mustCall(t, cs, "memory_insert", map[string]any{"store": st.ID, "path": "/deploy.md", "insert_line": 0, "insert_text": "# Deploys"})
	if out := mustCall(t, cs, "memory_view", map[string]any{"store": st.ID, "path": "/deploy.md", "view_range": []int{1, 1}}); !strings.Contains(out, "1\t# Deploys") || strings.Contains(out, "Thursdays") {
		t.Fatalf("memory_view of line 1 after memory_insert: %q", out)
	}
	mustCall(t, cs, "memory_rename", map[string]any{"store": st.ID, "old_path": "/deploy.md", "new_path": "/ops/deploy.md"})
	if ms := memories(t, admin, st.ID); len(ms) != 1 || ms[0].Path != "/ops/deploy.md" {
		t.Fatalf("after memory_rename the REST API lists %+v", ms)
	}

	// Refusals say what to do and change nothing.
	before := memories(t, admin, st.ID)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"memory_create", map[string]any{"store": st.ID, "path": "/ops/deploy.md", "file_text": "x"}, "pick another path"},
		{"memory_str_replace", map[string]any{"store": st.ID, "path": "/ops/deploy.md", "old_str": "Mondays", "new_str": "x"}, "does not occur"},
		{"memory_insert", map[string]any{"store": st.ID, "path": "/ops/deploy.md", "insert_line": 99, "insert_text": "x"}, "outside the memory"},
		{"memory_delete", map[string]any{"store": st.ID, "path": "/nope.md"}, "no memory at /nope.md"},
		{"memory_view", map[string]any{"store": "no such store", "path": "/"}, "memory_list_stores"},
	} {
		out, isErr := call(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(out, c.want) {
			t.Errorf("%s %v: error=%v %q, want a refusal saying %q", c.tool, c.args, isErr, out, c.want)
		}
	}
	if after := memories(t, admin, st.ID); !slices.EqualFunc(before, after, func(a, b api.Memory) bool { return a.MemoryVersionID == b.MemoryVersionID }) {
		t.Fatalf("a refused call changed the store: %+v -> %+v", before, after)
	}

	mustCall(t, cs, "memory_delete", map[string]any{"store": st.ID, "path": "/ops/deploy.md"})
	if ms := memories(t, admin, st.ID); len(ms) != 0 {
		t.Fatalf("after memory_delete the REST API lists %+v", ms)
	}
}

// Without a key, or with an unknown one, /mcp answers 401 before any tool
// runs, and nothing is written.
func TestMCPRefusesARequestWithoutACredential(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "sk-not-a-key"} {
		if _, err := connect(t, srv.URL, key); err == nil {
			t.Fatalf("key %q: an MCP session opened", key)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_create","arguments":{"store":"` + st.ID + `","path":"/x.md","file_text":"x"}}}`
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("key %q: a tools/call answered %d, want 401", key, resp.StatusCode)
		}
	}
	if ms := memories(t, admin, st.ID); len(ms) != 0 {
		t.Fatalf("a refused request wrote %+v", ms)
	}
}

// A sessions token reaches over MCP what it reaches on the REST API: its
// session's stores, and writes only where the attachment is read_write.
func TestMCPKeepsASessionsTokenToItsScope(t *testing.T) {
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Options{})
	admin := srv.Admin(t)
	ro, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "handbook"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "private"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateMemory(ctx, ro.ID, api.CreateMemoryRequest{Path: "/rules.md", Content: "Be kind.\n"}); err != nil {
		t.Fatal(err)
	}
	w := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	if _, err := admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: w.Agent.ID}, EnvironmentID: w.Env.ID,
		Resources: []api.SessionResourceParams{{Type: api.ResourceMemoryStore, MemoryStoreID: ro.ID, Access: api.AccessReadOnly}},
	}); err != nil {
		t.Fatal(err)
	}
	work, err := srv.Client(t, client.WithAPIKey(w.Key)).PollWork(ctx, w.Env.ID, api.WorkPollParams{WorkerID: "w1"})
	if err != nil || work == nil || work.Secret == nil {
		t.Fatalf("no work to claim: %+v %v", work, err)
	}
	secret, err := api.DecodeWorkSecret(*work.Secret)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := connect(t, srv.URL, secret.SessionsToken)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCall(t, cs, "memory_list_stores", nil); !strings.Contains(out, ro.ID) || strings.Contains(out, other.ID) {
		t.Fatalf("memory_list_stores for the sessions token: %q", out)
	}
	if out := mustCall(t, cs, "memory_view", map[string]any{"store": ro.ID, "path": "/rules.md"}); !strings.Contains(out, "Be kind.") {
		t.Fatalf("memory_view of the read_only store: %q", out)
	}
	before := memories(t, admin, ro.ID)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"memory_create", map[string]any{"store": ro.ID, "path": "/new.md", "file_text": "x"}},
		{"memory_str_replace", map[string]any{"store": ro.ID, "path": "/rules.md", "old_str": "kind", "new_str": "rude"}},
		{"memory_delete", map[string]any{"store": ro.ID, "path": "/rules.md"}},
	} {
		if out, isErr := call(t, cs, c.tool, c.args); !isErr || !strings.Contains(out, "read_only") {
			t.Errorf("%s on a read_only store: error=%v %q, want a read_only refusal", c.tool, isErr, out)
		}
	}
	if out, isErr := call(t, cs, "memory_view", map[string]any{"store": other.ID, "path": "/"}); !isErr || !strings.Contains(out, "not attached") {
		t.Errorf("memory_view of an unattached store: error=%v %q", isErr, out)
	}
	// Resources keep to the same scope: only the attached store's memories
	// are listed, and one of another store cannot be read.
	if _, err := admin.CreateMemory(ctx, other.ID, api.CreateMemoryRequest{Path: "/secret.md", Content: "hidden\n"}); err != nil {
		t.Fatal(err)
	}
	listed, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Resources) != 1 || listed.Resources[0].URI != "memstore://"+ro.ID+"/rules.md" {
		t.Errorf("resources/list for the sessions token: %+v, want only memstore://%s/rules.md", listed.Resources, ro.ID)
	}
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memstore://" + other.ID + "/secret.md"}); err == nil || !strings.Contains(err.Error(), "not attached") {
		t.Errorf("reading a memory of an unattached store: %+v %v, want a refusal", res, err)
	}
	if after := memories(t, admin, ro.ID); !slices.EqualFunc(before, after, func(a, b api.Memory) bool { return a.MemoryVersionID == b.MemoryVersionID }) {
		t.Fatalf("a refused write changed the store: %+v -> %+v", before, after)
	}
}
