package console_test

import (
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// htmlElement is one start tag: its name and attributes, unescaped.
type htmlElement struct {
	name  string
	attrs map[string]string
}

// readElements lists the start tags of an HTML page in order. It reads
// tokens without checking that tags nest (encoding/xml's RawToken in its
// lenient mode, which knows HTML's entities and void elements), which is
// all link-finding needs.
func readElements(page string) ([]htmlElement, error) {
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var out []htmlElement
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			el := htmlElement{name: strings.ToLower(se.Name.Local), attrs: map[string]string{}}
			for _, a := range se.Attr {
				el.attrs[strings.ToLower(a.Name.Local)] = html.UnescapeString(a.Value)
			}
			out = append(out, el)
		}
	}
}

// linksOf lists every URL a page leads to by GET: <a href>, <link href>,
// <script src>, and each GET form submitted as a browser would submit it
// (the fields inside it and those naming it with form="id", checked boxes
// only; an empty text field gets its placeholder, the example a person is
// shown, so that the filter the form offers is exercised).
func linksOf(page string) ([]string, error) {
	els, err := readElements(page)
	if err != nil {
		return nil, err
	}
	var out []string
	type getForm struct {
		action string
		fields url.Values
	}
	var forms []*getForm
	byID := map[string]*getForm{}
	var open *getForm // the GET form whose fields come next
	for _, el := range els {
		switch el.name {
		case "a", "link":
			if h, ok := el.attrs["href"]; ok {
				out = append(out, h)
			}
		case "script":
			if s, ok := el.attrs["src"]; ok {
				out = append(out, s)
			}
		case "form":
			open = nil
			if m := strings.ToLower(el.attrs["method"]); m == "" || m == "get" {
				open = &getForm{action: el.attrs["action"], fields: url.Values{}}
				forms = append(forms, open)
				if id := el.attrs["id"]; id != "" {
					byID[id] = open
				}
			}
		case "input", "select", "textarea":
			f := open
			if id, ok := el.attrs["form"]; ok {
				f = byID[id]
			}
			name, ok := el.attrs["name"]
			if f == nil || !ok {
				continue
			}
			value := el.attrs["value"]
			switch el.attrs["type"] {
			case "radio", "checkbox":
				if _, checked := el.attrs["checked"]; !checked {
					continue
				}
			case "submit", "button", "file":
				continue
			}
			if value == "" {
				value = el.attrs["placeholder"]
			}
			f.fields.Add(name, value)
		}
	}
	for _, f := range forms {
		out = append(out, f.action+"?"+f.fields.Encode())
	}
	return out, nil
}

// crawl visits every same-origin URL reachable by GET from start as the
// signed-in visitor v and returns, for each URL visited, the page that
// first linked it. A page that answers other than 200, or a tree whose
// caption is not the folder its link named, is an error naming the page
// that rendered the link.
func crawl(t *testing.T, v *browserless, start string) map[string]string {
	t.Helper()
	base, _ := url.Parse(v.base)
	from := map[string]string{start: "(start)"}
	queue := []string{start}
	var bad []string
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		resp, err := v.hc.Get(v.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s answered %d (linked from %s)", path, resp.StatusCode, from[path]))
			continue
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			continue
		}
		page := string(body)
		if u, _ := url.Parse(path); u.Query().Has("prefix") && u.Query().Get("filter") == "" {
			if !strings.Contains(html.UnescapeString(page), "Contents of "+u.Query().Get("prefix")) {
				bad = append(bad, fmt.Sprintf("%s does not show the folder %q it names (linked from %s)", path, u.Query().Get("prefix"), from[path]))
			}
		}
		links, err := linksOf(page)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: cannot read its HTML: %v", path, err))
			continue
		}
		here, _ := url.Parse(v.base + path)
		for _, l := range links {
			u, err := here.Parse(l)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s links to %q, which is not a URL: %v", path, l, err))
				continue
			}
			if u.Host != base.Host || (u.Scheme != "http" && u.Scheme != "https") {
				continue
			}
			u.Fragment, u.RawFragment = "", ""
			next := u.RequestURI()
			if _, seen := from[next]; !seen {
				from[next] = path
				queue = append(queue, next)
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d console URLs failed:\n%s", len(bad), len(from), strings.Join(bad, "\n"))
	}
	return from
}

// TestEveryConsoleLinkAnswers signs in and follows every link and GET form
// of the console, from the stores list down through nested folders, a
// folder's second page, memories, histories, versions, diffs, sessions,
// agents, environments and webhooks; every one must answer 200.
func TestEveryConsoleLinkAnswers(t *testing.T) {
	srv, f := startSeededConsole(t)
	v := newVisitor(t, srv)
	if status := v.login("ada", testPassword); status != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d, want 303", status)
	}
	visited := crawl(t, v, "/console/")

	// The crawl reached every kind of page, so a page that stopped
	// linking to the rest would not pass unseen.
	store := "/console/stores/" + f.StoreID + "/"
	// tree answers whether u is the store's tree with these query values.
	tree := func(u string, want url.Values) bool {
		p, _ := url.Parse(u)
		if p.Path != store {
			return false
		}
		for k := range want {
			if p.Query().Get(k) != want.Get(k) {
				return false
			}
		}
		return true
	}
	want := map[string]func(string) bool{
		"the nested folder " + f.Nested: func(u string) bool { return tree(u, url.Values{"prefix": {f.Nested}}) },
		"the second page of " + f.Paged: func(u string) bool {
			p, _ := url.Parse(u)
			return tree(u, url.Values{"prefix": {f.Paged}}) && p.Query().Get("page") != ""
		},
		"a filtered tree":                 func(u string) bool { return tree(u, url.Values{"filter": {"/notes/2026"}}) },
		"the edited memory's history":     func(u string) bool { return u == store+"memories/"+f.Edited+"/history" },
		"a diff of two versions":          func(u string) bool { return strings.HasPrefix(u, store+"memories/"+f.Edited+"/diff?") },
		"a version":                       func(u string) bool { return strings.HasPrefix(u, store+"versions/") },
		"the store's settings":            func(u string) bool { return u == store+"settings" },
		"a search's results":              func(u string) bool { return strings.HasPrefix(u, store+"search?q=plan") },
		"the store's export":              func(u string) bool { return strings.HasPrefix(u, store+"export?") },
		"the session":                     func(u string) bool { return u == "/console/sessions/"+f.SessionID },
		"the environment":                 func(u string) bool { return u == "/console/environments/"+f.EnvironmentID },
		"the webhooks page":               func(u string) bool { return u == "/console/webhooks" },
		"the sessions list":               func(u string) bool { return u == "/console/sessions" },
		"the environments list":           func(u string) bool { return u == "/console/environments" },
		"the agents list":                 func(u string) bool { return u == "/console/agents" },
		"a filtered agents list":          func(u string) bool { return strings.HasPrefix(u, "/console/agents?name=") },
		"the agent":                       func(u string) bool { return u == "/console/agents/"+f.AgentID },
		"the new agent form":              func(u string) bool { return u == "/console/agents/new" },
		"the agent's sessions":            func(u string) bool { return u == "/console/sessions?agent="+f.AgentID },
		"the skills list":                 func(u string) bool { return u == "/console/skills" },
		"the skill's older version":       func(u string) bool { return strings.HasPrefix(u, "/console/skills/"+f.SkillID+"?version=") },
		"the stylesheet and script files": func(u string) bool { return strings.HasPrefix(u, "/console/static/") },
	}
	for what, match := range want {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(visited)), match) {
			t.Errorf("the crawl never reached %s", what)
		}
	}
	t.Logf("visited %d console URLs", len(visited))
}

// A folder link opened while signed out comes back to that folder after
// sign-in: the detour through the login page keeps the escaped prefix.
func TestAFolderLinkSurvivesSigningIn(t *testing.T) {
	srv, f := startSeededConsole(t)
	v := newVisitor(t, srv)
	folder := "/console/stores/" + f.StoreID + "/?prefix=" + url.QueryEscape(f.Nested)
	status, _ := v.do("GET", folder, nil)
	if status != http.StatusSeeOther {
		t.Fatalf("signed out, the folder answered %d, want 303 to the login page", status)
	}
	req, _ := http.NewRequest("GET", v.base+folder, nil)
	resp, err := v.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := resp.Header.Get("Location")
	_, page := v.do("GET", login, nil)
	m, token := regexpNext.FindStringSubmatch(page), csrfField.FindStringSubmatch(page)
	if m == nil || token == nil {
		t.Fatalf("the login page at %s carries no next field:\n%s", login, page)
	}
	req, _ = http.NewRequest("POST", v.base+"/console/login", strings.NewReader(url.Values{"csrf": {token[1]}, "name": {"ada"}, "password": {testPassword}, "next": {html.UnescapeString(m[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = v.hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with next: status %d, want 303", resp.StatusCode)
	}
	back := resp.Header.Get("Location")
	status, page = v.do("GET", back, nil)
	if status != http.StatusOK || !strings.Contains(html.UnescapeString(page), "Contents of "+f.Nested) {
		t.Fatalf("after sign-in the console sent ada to %s (status %d), want the folder %s", back, status, f.Nested)
	}
}

var regexpNext = regexp.MustCompile(`name="next" value="([^"]*)"`)
