package console_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/client"
)

// The Skills page lists the skills; following a skill's rendered link
// shows its versions and the latest SKILL.md (escaped, never run), and
// following a version's link shows that version's SKILL.md and files.
func TestSkillsPagesFollowTheirLinks(t *testing.T) {
	srv := startConsole(t)
	admin := srv.Admin(t)
	ctx := context.Background()
	md := func(body string) []byte {
		return []byte("---\nname: pdf-tools\ndescription: Fills PDF forms.\n---\n" + body)
	}
	sk, err := admin.CreateSkill(ctx, "PDF tools", []client.SkillFile{
		{Path: "pdf-tools/SKILL.md", Content: md("FIRST <script>alert(1)</script>\n")},
		{Path: "pdf-tools/scripts/fill.py", Content: []byte("print(1)\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := admin.CreateSkillVersion(ctx, sk.ID, []client.SkillFile{{Path: "pdf-tools/SKILL.md", Content: md("SECOND\n")}})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)

	status, page := v.do("GET", "/console/", nil)
	if status != http.StatusOK || !strings.Contains(page, `href="/console/skills"`) {
		t.Fatalf("the navigation has no Skills link (status %d)", status)
	}
	status, page = v.do("GET", "/console/skills", nil)
	link := regexp.MustCompile(`<a href="(/console/skills/skill_[^"]+)">PDF tools</a>`).FindStringSubmatch(page)
	if status != http.StatusOK || link == nil {
		t.Fatalf("the skills list has no link to the skill (status %d):\n%s", status, page)
	}
	status, page = v.do("GET", link[1], nil)
	if status != http.StatusOK || !strings.Contains(page, "SECOND") || strings.Contains(page, "FIRST") || !strings.Contains(page, second.ID+"</strong> (latest)") {
		t.Fatalf("the skill's page does not show the latest version (status %d):\n%s", status, page)
	}
	versionLink := regexp.MustCompile(`<a href="(/console/skills/` + sk.ID + `\?version=[^"]+)">`).FindStringSubmatch(page)
	if versionLink == nil {
		t.Fatalf("the skill's page has no link to the first version:\n%s", page)
	}
	status, page = v.do("GET", html.UnescapeString(versionLink[1]), nil)
	if status != http.StatusOK || !strings.Contains(page, "FIRST &lt;script&gt;") || strings.Contains(page, "<script>alert") || !strings.Contains(page, "<code>scripts/fill.py</code>") {
		t.Fatalf("the first version's page (status %d):\n%s", status, page)
	}

	for path, want := range map[string]int{
		"/console/skills/skill_01JZZZZZZZZZZZZZZZZZZZZZZZ":                          http.StatusNotFound,
		"/console/skills/nonsense":                                                  http.StatusNotFound,
		"/console/skills/" + sk.ID + "?version=skillver_01JZZZZZZZZZZZZZZZZZZZZZZZ": http.StatusNotFound,
	} {
		if status, page := v.do("GET", path, nil); status != want || !strings.Contains(page, "pick one") {
			t.Errorf("%s: status %d, want %d saying what to do:\n%s", path, status, want, page)
		}
	}
}
