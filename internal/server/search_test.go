package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// GET /v1/memory_stores/{id}/search as a user meets it: it finds a memory by
// a word only it holds, forgets deleted and rewritten words, stays inside
// what the credential may read, and refuses bad input with a 4xx that says
// what to send, changing nothing.
func TestSearchEndpoint(t *testing.T) {
	e := newCPEnv(t)
	key := e.apiKey
	var mine, other api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "team notes"}, &mine)
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "elsewhere"}, &other)
	var deploy, gone api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+mine.ID+"/memories", key, api.CreateMemoryRequest{Path: "/runbooks/deploy.md", Content: "Before a deploy, drain the quokka queue and page the on-call."}, &deploy)
	e.must(200, "POST", "/v1/memory_stores/"+mine.ID+"/memories", key, api.CreateMemoryRequest{Path: "/old.md", Content: "The platypus password is hunter2."}, &gone)
	e.must(200, "POST", "/v1/memory_stores/"+other.ID+"/memories", key, api.CreateMemoryRequest{Path: "/secret.md", Content: "The quokka lives here too."}, nil)

	search := func(cred, storeID, query string) (api.Page[api.SearchHit], cpResp) {
		t.Helper()
		var page api.Page[api.SearchHit]
		r := e.must(200, "GET", "/v1/memory_stores/"+storeID+"/search?q="+url.QueryEscape(query), cred, nil, &page)
		return page, r
	}
	page, r := search(key, mine.ID, "Quokka")
	if len(page.Data) != 1 || page.Data[0].Memory.ID != deploy.ID || page.Data[0].Type != "memory_search_hit" ||
		!strings.Contains(page.Data[0].Snippet, "**quokka**") || page.NextPage != nil {
		t.Fatalf("search quokka = %s", r.body)
	}
	if got := r.header.Get(api.ExtensionsHeader); !strings.Contains(got, api.ExtensionSearch) {
		t.Fatalf("%s = %q, want it to list %q", api.ExtensionsHeader, got, api.ExtensionSearch)
	}

	// A deleted memory and a rewritten memory's old words are not found.
	e.must(200, "DELETE", "/v1/memory_stores/"+mine.ID+"/memories/"+gone.ID, key, nil, nil)
	if page, r := search(key, mine.ID, "platypus"); len(page.Data) != 0 {
		t.Fatalf("deleted memory found: %s", r.body)
	}
	e.must(200, "POST", "/v1/memory_stores/"+mine.ID+"/memories/"+deploy.ID, key, map[string]any{"content": "Deploys now drain the wombat queue."}, nil)
	e.must(200, "POST", "/v1/memory_stores/"+mine.ID+"/memory_versions/"+deploy.MemoryVersionID+"/redact", key, nil, nil)
	if page, r := search(key, mine.ID, "quokka"); len(page.Data) != 0 {
		t.Fatalf("rewritten and redacted words found: %s", r.body)
	}
	if page, r := search(key, mine.ID, "wombat"); len(page.Data) != 1 {
		t.Fatalf("new words not found: %s", r.body)
	}

	// A sessions token searches its session's stores, and no other.
	env := e.environment("env")
	e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": []any{
		map[string]any{"type": "memory_store", "memory_store_id": mine.ID, "access": "read_only"},
	}})
	_, secret := e.poll(env.ID, e.envKey(env.ID), "worker-1")
	tok := secret.SessionsToken
	if page, r := search(tok, mine.ID, "wombat"); len(page.Data) != 1 {
		t.Fatalf("sessions token on its store: %s", r.body)
	}

	s := "/v1/memory_stores/" + mine.ID + "/search"
	missing := "/v1/memory_stores/memstore_01NOPENOPENOPENOPENOPENOPE/search?q=x"
	refusals := []struct {
		name, path, cred string
		status           int
		errType          api.ErrorType
		says             []string
	}{
		{"no query", s, key, 400, api.InvalidRequest, []string{"q:", "no word"}},
		{"empty query", s + "?q=", key, 400, api.InvalidRequest, []string{"q:", "no word"}},
		{"only punctuation", s + "?q=%21%3F", key, 400, api.InvalidRequest, []string{"q:", "no word"}},
		{"query too long", s + "?q=" + strings.Repeat("a", 501), key, 400, api.InvalidRequest, []string{"q:", "501 bytes", "at most 500"}},
		{"prefix without slash", s + "?q=x&path_prefix=runbooks", key, 400, api.InvalidRequest, []string{"path_prefix"}},
		{"empty prefix", s + "?q=x&path_prefix=", key, 400, api.InvalidRequest, []string{"path_prefix"}},
		{"limit zero", s + "?q=x&limit=0", key, 400, api.InvalidRequest, []string{"limit"}},
		{"bad page", s + "?q=x&page=nonsense", key, 400, api.InvalidRequest, []string{"page"}},
		{"unknown store", missing, key, 404, api.NotFound, []string{"memory store"}},
		{"unattached store", "/v1/memory_stores/" + other.ID + "/search?q=quokka", tok, 403, api.Permission, []string{"not attached"}},
		{"environment key", s + "?q=wombat", e.envKey(env.ID), 403, api.Permission, []string{"environment key"}},
		{"no credential", s + "?q=wombat", "", 401, api.Authentication, []string{"x-api-key"}},
	}
	for _, c := range refusals {
		before := memorySnapshot(t, e)
		r := e.call("GET", c.path, c.cred, nil)
		if r.status != c.status || r.errType() != string(c.errType) {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.errType)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(string(r.body), w) {
				t.Errorf("%s: %s does not say %q", c.name, r.body, w)
			}
		}
		if memorySnapshot(t, e) != before {
			t.Errorf("%s: a refused search changed storage", c.name)
		}
	}
}
