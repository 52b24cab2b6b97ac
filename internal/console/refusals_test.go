package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// Every refusal a console user can meet answers with its status and its
// reason in words, and changes nothing.
func TestConsoleRefusalsSayWhyAndChangeNothing(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	store, _ := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	a, _ := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/a.md", Content: "alpha"})
	b, _ := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/dir/b.md", Content: "beta"})
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	token := v.csrf("/console/")
	base := "/console/stores/" + store.ID
	snapshot := func() string {
		t.Helper()
		var parts []string
		for it, err := range admin.ListAllMemories(ctx, store.ID, client.ListMemoriesParams{View: api.ViewFull, Limit: 20}) {
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, it.Memory.ID+" "+it.Memory.Path+" "+*it.Memory.Content)
		}
		s, err := admin.GetMemoryStore(ctx, store.ID)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(parts, "|") + "|" + s.Name
	}
	before := snapshot()

	for _, c := range []struct {
		name, path string
		form       url.Values
		status     int
		says       string
	}{
		{"create at an occupied path", base + "/memories", url.Values{"path": {"/a.md"}, "content": {"x"}}, http.StatusConflict, "path is taken"},
		{"create a file where a folder is", base + "/memories", url.Values{"path": {"/dir"}, "content": {"x"}}, http.StatusConflict, "/dir/b.md is in the way"},
		{"create at an invalid path", base + "/memories", url.Values{"path": {"/a/../b"}, "content": {"x"}}, http.StatusBadRequest, "path:"},
		{"rename onto another memory", base + "/memories/" + a.ID, url.Values{"path": {"/dir/b.md"}, "content": {"alpha"}, "sha": {a.ContentSHA256}}, http.StatusConflict, "path is taken"},
		{"save with a stale hash", base + "/memories/" + b.ID, url.Values{"path": {"/dir/b.md"}, "content": {"mine"}, "sha": {a.ContentSHA256}}, http.StatusConflict, "someone else changed this memory"},
		{"delete with a stale hash", base + "/memories/" + b.ID + "/delete", url.Values{"sha": {a.ContentSHA256}}, http.StatusConflict, "Nothing was deleted"},
		{"rename the store to nothing", base + "/settings", url.Values{"name": {""}}, http.StatusBadRequest, "name:"},
		{"delete the store without its name", base + "/delete", url.Values{"confirm": {"note"}}, http.StatusBadRequest, `type the store&#39;s name, &#34;notes&#34;`},
	} {
		c.form.Set("csrf", token)
		status, page := v.do("POST", c.path, c.form)
		if status != c.status || !strings.Contains(page, c.says) {
			t.Errorf("%s: status %d, want %d with %q in the page:\n%s", c.name, status, c.status, c.says, page)
		}
		if after := snapshot(); after != before {
			t.Fatalf("%s changed the store:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}

	// A rename keeps the memory's id, as the API's does.
	status, _ := v.do("POST", base+"/memories/"+a.ID, url.Values{"csrf": {token}, "path": {"/renamed.md"}, "content": {"alpha"}, "sha": {a.ContentSHA256}})
	if m, err := admin.GetMemory(ctx, store.ID, a.ID, client.GetMemoryParams{}); status != http.StatusSeeOther || err != nil || m.Path != "/renamed.md" {
		t.Fatalf("rename: status %d, memory %+v, %v", status, m, err)
	}

	// An archived store refuses writes in words and keeps its memories.
	if status, _ := v.do("POST", base+"/archive", url.Values{"csrf": {token}}); status != http.StatusSeeOther {
		t.Fatalf("archive: status %d", status)
	}
	before = snapshot()
	status, page := v.do("POST", base+"/memories", url.Values{"csrf": {token}, "path": {"/new.md"}, "content": {"x"}})
	if status != http.StatusConflict || !strings.Contains(page, "archived") || snapshot() != before {
		t.Fatalf("create in an archived store: status %d:\n%s", status, page)
	}

	// The typed name deletes it.
	if status, _ := v.do("POST", base+"/delete", url.Values{"csrf": {token}, "confirm": {"notes"}}); status != http.StatusSeeOther {
		t.Fatalf("delete with the name typed: status %d", status)
	}
	if _, err := admin.GetMemoryStore(ctx, store.ID); err == nil {
		t.Fatal("the store survived its confirmed deletion")
	}
}

// Every page names itself: a <title> that says what it shows, and one <h1>.
func TestEveryPageHasATitleAndAHeading(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	store, _ := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	m, _ := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/dir/a.md", Content: "a"})
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	agent, _ := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "bot", Model: api.ModelConfig{ID: api.ScriptedModel}})
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	if status, page := v.do("GET", "/console/login", nil); status != http.StatusOK || !strings.Contains(page, "<title>Sign in · memstore console</title>") {
		t.Fatalf("login page: %d\n%s", status, page)
	}
	v.login("ada", testPassword)
	s := "/console/stores/" + store.ID
	for path, title := range map[string]string{
		"/console/":                                "Memory stores",
		s + "/":                                    "notes",
		s + "/?prefix=/dir/":                       "notes /dir/",
		s + "/settings":                            "Settings of notes",
		s + "/memories/" + m.ID:                    "/dir/a.md — notes",
		s + "/memories/" + m.ID + "/history":       "History of /dir/a.md",
		s + "/versions/" + m.MemoryVersionID:       "Version " + m.MemoryVersionID,
		"/console/sessions":                        "Sessions",
		"/console/sessions/" + sess.ID:             "Session " + sess.ID,
		"/console/environments":                    "Environments",
		"/console/environments/" + env.ID:          "Environment laptop",
		"/console/stores/memstore_nope/":           "Not Found",
		s + "/memories/mem_01M8QGKPR24H0Z5E2VQ6DJ": "Not Found",
	} {
		_, page := v.do("GET", path, nil)
		if !strings.Contains(page, "<title>"+title+" · memstore console</title>") || strings.Count(page, "<h1") != 1 {
			t.Errorf("%s: want the title %q and one <h1>:\n%s", path, title, page)
		}
	}
}
