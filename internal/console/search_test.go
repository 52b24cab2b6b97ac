package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// The store page's search box finds memories by their words: each hit
// shows its snippet with the words marked and links to the memory, whose
// page opens; results page; a deleted memory and an older version's words
// are not found; a refused query says what was wrong and changes nothing.
func TestConsoleSearchFindsAndOpensMemories(t *testing.T) {
	ctx := context.Background()
	srv := startConsole(t)
	admin := srv.Admin(t)
	st, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "runbooks"})
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: "/ops/deploy.md", Content: "Before a deploy, drain the <queue> & check the zanzibar dashboard.\n"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 22 {
		if _, err := admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: fmt.Sprintf("/log/%02d.md", i), Content: "a quokka sighting"}); err != nil {
			t.Fatal(err)
		}
	}
	old, err := admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: "/old.md", Content: "obsidian"})
	if err != nil {
		t.Fatal(err)
	}
	newer := "basalt"
	if _, err := admin.UpdateMemory(ctx, st.ID, old.ID, api.UpdateMemoryRequest{Content: &newer}); err != nil {
		t.Fatal(err)
	}
	gone, err := admin.CreateMemory(ctx, st.ID, api.CreateMemoryRequest{Path: "/gone.md", Content: "pumice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteMemory(ctx, st.ID, gone.ID, client.DeleteMemoryParams{}); err != nil {
		t.Fatal(err)
	}

	v := newVisitor(t, srv)
	if status := v.login("ada", testPassword); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	storePage := "/console/stores/" + st.ID + "/"
	_, page := v.do("GET", storePage, nil)
	links, err := linksOf(page)
	if err != nil {
		t.Fatal(err)
	}
	var form string
	for _, l := range links {
		if strings.HasPrefix(l, "/console/stores/"+st.ID+"/search?") {
			form = l
		}
	}
	if form == "" {
		t.Fatalf("the store page has no search box:\n%s", page)
	}
	u, _ := url.Parse(form)
	q := u.Query()
	q.Set("q", "ZANZIBAR")
	status, results := v.do("GET", u.Path+"?"+q.Encode(), nil)
	if status != http.StatusOK || !strings.Contains(results, "drain the &lt;queue&gt; &amp; check the <mark>zanzibar</mark> dashboard") {
		t.Fatalf("searching zanzibar: %d, no marked snippet:\n%s", status, results)
	}
	memoryLink := "/console/stores/" + st.ID + "/memories/" + deploy.ID
	if !strings.Contains(results, `href="`+memoryLink+`"`) {
		t.Fatalf("the hit does not link to the memory %s:\n%s", memoryLink, results)
	}
	if status, mem := v.do("GET", memoryLink, nil); status != http.StatusOK || !strings.Contains(html.UnescapeString(mem), "/ops/deploy.md") {
		t.Fatalf("the hit's link answered %d", status)
	}

	// 22 hits: a first page of 20 and a next page with the rest.
	_, first := v.do("GET", "/console/stores/"+st.ID+"/search?q=quokka", nil)
	links, _ = linksOf(first)
	next := ""
	for _, l := range links {
		if strings.Contains(l, "page=") {
			next = l
		}
	}
	_, second := v.do("GET", next, nil)
	if n1, n2 := strings.Count(first, "<mark>quokka</mark>"), strings.Count(second, "<mark>quokka</mark>"); next == "" || n1 != 20 || n2 != 2 {
		t.Fatalf("quokka: %d hits then %d on the next page (%q), want 20 and 2", n1, n2, next)
	}

	for _, word := range []string{"obsidian", "pumice"} {
		if _, out := v.do("GET", "/console/stores/"+st.ID+"/search?q="+word, nil); !strings.Contains(out, "No memory in this store holds") {
			t.Errorf("%s (an older version's / a deleted memory's word) was found:\n%s", word, out)
		}
	}

	before, _ := admin.ListMemoryVersions(ctx, st.ID, client.ListMemoryVersionsParams{})
	for q, want := range map[string]string{
		"":                           "Type one or more words",
		"%21%3F":                     "holds no word",
		strings.Repeat("word+", 101): "at most 500",
	} {
		status, out := v.do("GET", "/console/stores/"+st.ID+"/search?q="+q, nil)
		if status != http.StatusBadRequest || !strings.Contains(out, want) || !strings.Contains(out, `name="q"`) {
			t.Errorf("q=%.20s: %d, want 400 saying %q beside the search box", q, status, want)
		}
	}
	after, _ := admin.ListMemoryVersions(ctx, st.ID, client.ListMemoryVersionsParams{})
	if len(before.Data) != len(after.Data) {
		t.Fatalf("a refused search changed the store: %d versions, then %d", len(before.Data), len(after.Data))
	}
	if status, _ := v.do("GET", "/console/stores/"+st.ID+"/search?q=x&page=garbage", nil); status != http.StatusBadRequest {
		t.Fatalf("a made-up page cursor: %d, want 400", status)
	}
}
