package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// markdownLink finds the target of an inline link or image: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// docLink is one relative link of a documentation file.
type docLink struct {
	file   string // where it is, relative to the repository root
	line   int
	target string // as written
}

func (l docLink) String() string { return fmt.Sprintf("%s:%d: link %s", l.file, l.line, l.target) }

// docLinks returns the links of a file outside its fenced blocks, and the
// anchors of its headings as GitHub makes them.
func docLinks(t *testing.T, file string) (links []docLink, anchors map[string]bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors = map[string]bool{}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "#") {
			a := headingAnchor(strings.TrimLeft(line, "#"))
			if k := seen[a]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			links = append(links, docLink{file: file, line: n, target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return links, anchors
}

// headingAnchor is GitHub's anchor for a heading: lower case, punctuation
// (backticks, dashes of other kinds, dots) dropped, each space a hyphen.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link in README.md and docs/*.md points at a file or folder
// of the repository, and a link with #anchor into a Markdown file at one of
// its headings: a guide renamed or a heading reworded breaks the test, not
// the reader's click.
func TestDocsLinksResolve(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	var links []docLink
	for _, file := range docFiles(t) {
		l, a := docLinks(t, file)
		links, anchorsOf[file] = append(links, l...), a
	}
	checked := 0
	for _, l := range links {
		if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
			continue
		}
		name, anchor, _ := strings.Cut(l.target, "#")
		target := l.file
		if name != "" {
			target = path.Clean(path.Join(path.Dir(l.file), name))
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(target))); err != nil {
				t.Errorf("%s: %s does not exist", l, target)
				continue
			}
		}
		checked++
		if anchor == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		anchors, ok := anchorsOf[target]
		if !ok {
			_, anchors = docLinks(t, target)
			anchorsOf[target] = anchors
		}
		if !anchors[anchor] {
			t.Errorf("%s: %s has no heading whose anchor is #%s", l, target, anchor)
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link in README.md and docs/*.md; is the link pattern still right?")
	}
}

// The README is a front page: what memstore is, the two commands, install,
// the shortest path to each job, and links. Details go to docs/.
func TestReadmeIsAFrontPage(t *testing.T) {
	const maxLines = 300
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxLines {
		t.Errorf("README.md has %d lines, over %d: move the details into a guide in docs/ and link to it", n, maxLines)
	}
	if guides := docFiles(t)[1:]; len(guides) < 4 {
		t.Errorf("docs/ holds %d guides (%v); the README's details need their own pages", len(guides), guides)
	}
}

func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		" Behaviour worth knowing":                        "behaviour-worth-knowing",
		" Environments, agents and sessions from the CLI": "environments-agents-and-sessions-from-the-cli",
		" `memstore up` — server and worker":              "memstore-up--server-and-worker",
		" What an acknowledged write survives.":           "what-an-acknowledged-write-survives",
	} {
		if got := headingAnchor(heading); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
