package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

var nextLink = regexp.MustCompile(`<a href="([^"]+)">Older (?:sessions|environments|agents)</a>`)

// followNext reads the "Older" link of a list page, unescaped, "" when the
// page has none.
func followNext(page string) string {
	m := nextLink.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// The sessions list filters by status and agent, and its paging link keeps
// the filter: the second page of one agent's sessions holds only that
// agent's.
func TestSessionsListFiltersAndPagesWithTheFilter(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	agent := func(name string) *api.Agent {
		a, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: name, Model: api.ModelConfig{ID: api.ScriptedModel}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	busy, quiet := agent("busy"), agent("quiet")
	session := func(a *api.Agent, title string) {
		if _, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: a.ID}, EnvironmentID: env.ID, Title: &title}); err != nil {
			t.Fatal(err)
		}
	}
	session(quiet, "quiet-old")
	const busySessions = 102 // more than one page (100)
	for i := range busySessions {
		session(busy, fmt.Sprintf("busy-%03d", i))
	}
	session(quiet, "quiet-new")

	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	status, page := v.do("GET", "/console/sessions?status=&agent="+quiet.ID, nil)
	if status != http.StatusOK || !strings.Contains(page, "quiet-old") || !strings.Contains(page, "quiet-new") || strings.Contains(page, "busy-") {
		t.Fatalf("filtered by agent quiet: status %d, want only its two sessions:\n%s", status, page)
	}
	if followNext(page) != "" {
		t.Fatal("two sessions offer an older page")
	}

	seen := map[string]bool{}
	next := "/console/sessions?agent=" + busy.ID
	for pages := 0; next != ""; pages++ {
		if pages > 2 {
			t.Fatal("the busy agent's sessions take more than two pages")
		}
		status, page = v.do("GET", next, nil)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d", next, status)
		}
		if strings.Contains(page, "quiet-") {
			t.Fatalf("%s lists another agent's session: the paging link lost the filter", next)
		}
		for _, m := range regexp.MustCompile(`busy-\d{3}`).FindAllString(page, -1) {
			seen[m] = true
		}
		next = followNext(page)
	}
	if len(seen) != busySessions {
		t.Fatalf("the busy agent's pages list %d sessions, want %d", len(seen), busySessions)
	}

	if status, page = v.do("GET", "/console/sessions?status=terminated", nil); status != http.StatusOK || !strings.Contains(page, "No session matches the filter.") {
		t.Fatalf("no terminated sessions: status %d:\n%s", status, page)
	}
	for query, want := range map[string]string{
		"status=asleep":  `status &#34;asleep&#34; is not a session status; pick one of idle, running, rescheduling, terminated`,
		"agent=bob":      `agent &#34;bob&#34; is not an agent id`,
		"after=whatever": "this page link is not valid any more",
	} {
		if status, page = v.do("GET", "/console/sessions?"+query, nil); status != http.StatusBadRequest || !strings.Contains(page, want) {
			t.Errorf("?%s: status %d, want 400 saying %q:\n%s", query, status, want, page)
		}
	}
}

// The environments list filters by a part of the name, reading on past
// pages without a match, and its paging link keeps the filter.
func TestEnvironmentsListFiltersByNameAndPagesWithTheFilter(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	create := func(name string) {
		if _, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	create("Lab-old")
	const builds = 103 // more than a page (100) between the two labs
	for i := range builds {
		create(fmt.Sprintf("build-%03d", i))
	}
	create("lab-new")

	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	status, page := v.do("GET", "/console/environments?name=lab", nil)
	if status != http.StatusOK || !strings.Contains(page, "Lab-old") || !strings.Contains(page, "lab-new") || strings.Contains(page, "build-") {
		t.Fatalf("filtered by lab: status %d, want both labs (the older one past a page of builds) and nothing else:\n%s", status, page)
	}
	if followNext(page) != "" {
		t.Fatal("two matches offer an older page")
	}
	seen := map[string]bool{}
	next := "/console/environments?name=BUILD"
	for pages := 0; next != ""; pages++ {
		if pages > 2 {
			t.Fatal("the builds take more than two pages")
		}
		status, page = v.do("GET", next, nil)
		if status != http.StatusOK || strings.Contains(page, "ab-") {
			t.Fatalf("%s: status %d, or it lists a lab: the paging link lost the filter", next, status)
		}
		for _, m := range regexp.MustCompile(`build-\d{3}`).FindAllString(page, -1) {
			seen[m] = true
		}
		next = followNext(page)
	}
	if len(seen) != builds {
		t.Fatalf("the filtered pages list %d builds, want %d", len(seen), builds)
	}
	if status, page = v.do("GET", "/console/environments?name=nothing-like-it", nil); status != http.StatusOK || !strings.Contains(html.UnescapeString(page), "No environment's name contains nothing-like-it.") {
		t.Fatalf("no match: status %d:\n%s", status, page)
	}
}
