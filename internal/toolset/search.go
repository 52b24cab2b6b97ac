package toolset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/memstore/memstore/internal/confined"
)

// Bounds of one glob or grep walk, so a search over an enormous tree cannot
// stall the session. The numbers are the SDK's.
const (
	maxWalkEntries   = 50_000
	grepMaxFileBytes = 8 << 20
)

type searchInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// walkRoot resolves a search's path (the working directory when empty) and
// checks that it is a folder, or for grep also a file.
func (t *Toolset) walkRoot(p string, fileOK bool) (*opened, error) {
	if p == "" {
		p = t.areas[0].prefixes[0]
	}
	o, err := t.open(p)
	if err != nil {
		return nil, err
	}
	switch {
	case o.info == nil:
		return nil, fmt.Errorf("%s: no such file or directory", p)
	case o.info.Mode.IsDir(), fileOK && o.info.Mode.IsRegular():
		return o, nil
	case fileOK:
		return nil, fmt.Errorf("%s is not a regular file or directory", p)
	default:
		return nil, fmt.Errorf("%s is not a directory", p)
	}
}

// walk visits the tree under o in lexical order through package confined,
// which never follows or descends through a symbolic link (and visit is
// not shown them), and stops after maxWalkEntries. It reports whether it
// stopped early. Unreadable folders are skipped: a search reports what it
// can see.
func (o *opened) walk(visit func(rel string, info confined.FileInfo) error) (truncated bool, err error) {
	start := o.rel
	if start == "." {
		start = ""
	}
	seen := 0
	err = o.root.Visit(start, func(rel string, info confined.FileInfo, err error) error {
		if err != nil || info.Mode&fs.ModeSymlink != 0 {
			return nil
		}
		if seen++; seen > maxWalkEntries {
			truncated = true
			return fs.SkipAll
		}
		return visit(rel, info)
	})
	return truncated, err
}

// glob lists the paths under path (default: the working directory) whose
// path relative to it matches pattern, newest first (then by path, so equal
// times still list in a fixed order), as absolute paths in the terms the
// agent used. "**" matches any number of folders, including none; every
// other segment is a filepath.Match pattern (*, ?, [...]) for one name.
// Symbolic links are not listed.
func (t *Toolset) glob(input json.RawMessage) Result {
	var in searchInput
	if res, ok := decode("glob", input, &in, `{"pattern": string, "path"?: string}`); !ok {
		return res
	}
	if in.Pattern == "" {
		return failf("glob: pattern is required")
	}
	if strings.HasPrefix(in.Pattern, "/") {
		return failf("glob: absolute pattern not permitted; pass a relative pattern (and optionally path)")
	}
	segs := strings.Split(in.Pattern, "/")
	for _, s := range segs {
		if s == ".." {
			return failf("glob: pattern %q must not contain a \"..\" segment; pass the folder to search as path", in.Pattern)
		}
		if _, err := path.Match(s, ""); err != nil {
			return failf("glob: invalid pattern %q: %v", in.Pattern, err)
		}
	}
	o, err := t.walkRoot(in.Path, false)
	if err != nil {
		return failf("glob: %v", err)
	}

	type hit struct {
		rel   string
		mtime time.Time
	}
	var hits []hit
	truncated, err := o.walk(func(rel string, info confined.FileInfo) error {
		if matchGlob(segs, strings.Split(relTo(o.rel, rel), "/")) {
			hits = append(hits, hit{rel, info.ModTime})
		}
		return nil
	})
	if err != nil {
		return failf("glob: %s", fsErr(err))
	}
	if len(hits) == 0 {
		return Result{Content: withWalkNote("no matches", truncated)}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := b.mtime.Compare(a.mtime); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	var out strings.Builder
	for i, h := range hits {
		if i == t.cfg.MaxGlobResults {
			fmt.Fprintf(&out, "[%d more matches not shown; narrow the pattern or path]\n", len(hits)-i)
			break
		}
		out.WriteString(o.display(h.rel))
		out.WriteByte('\n')
	}
	return Result{Content: withWalkNote(strings.TrimSuffix(out.String(), "\n"), truncated)}
}

// relTo is rel (a path under the walk's start) relative to that start.
func relTo(start, rel string) string {
	if start == "." {
		return rel
	}
	return strings.TrimPrefix(rel, start+"/")
}

func withWalkNote(s string, truncated bool) string {
	if !truncated {
		return s
	}
	return fmt.Sprintf("%s\n[search stopped after %d entries; results may be incomplete, narrow the path]", s, maxWalkEntries)
}

// matchGlob matches name segments against pattern segments, "**" standing
// for any number of segments. Memoised on the remaining lengths, so patterns
// with many "**" stay polynomial.
func matchGlob(pat, name []string) bool {
	memo := map[[2]int]bool{}
	var match func(p, n int) bool
	match = func(p, n int) bool {
		key := [2]int{p, n}
		if v, ok := memo[key]; ok {
			return v
		}
		var res bool
		switch {
		case p == len(pat):
			res = n == len(name)
		case pat[p] == "**":
			for i := n; i <= len(name) && !res; i++ {
				res = match(p+1, i)
			}
		case n < len(name):
			m, _ := path.Match(pat[p], name[n])
			res = m && match(p+1, n+1)
		}
		memo[key] = res
		return res
	}
	return match(0, 0)
}

// grep searches the files under path (default: the working directory; a
// single file is fine too) for lines matching pattern, a Go regular
// expression (RE2 syntax: (?i) for case-insensitive, no backreferences or
// lookaround). Each match is "path:line:text", in path then line order.
// Symbolic links, .git and node_modules folders, files over 8 MiB and binary
// files (a NUL byte in the first 512 bytes) are skipped.
func (t *Toolset) grep(input json.RawMessage) Result {
	var in searchInput
	if res, ok := decode("grep", input, &in, `{"pattern": string, "path"?: string}`); !ok {
		return res
	}
	if in.Pattern == "" {
		return failf("grep: pattern is required")
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return failf("grep: invalid regular expression: %v (grep uses Go's RE2 syntax: no backreferences or lookaround)", err)
	}
	o, err := t.walkRoot(in.Path, true)
	if err != nil {
		return failf("grep: %v", err)
	}

	var out strings.Builder
	budget := t.cfg.MaxOutputBytes
	cut := 0
	read := func(rel string) ([]byte, error) { return o.root.ReadFile(rel, grepMaxFileBytes) }
	search := func(rel string) {
		data, err := read(rel)
		if err != nil || len(data) > grepMaxFileBytes || bytes.IndexByte(data[:min(len(data), 512)], 0) >= 0 {
			return
		}
		name := o.display(rel)
		for i, line := range bytes.Split(data, []byte("\n")) {
			if !re.Match(line) {
				continue
			}
			entry := fmt.Sprintf("%s:%d:%s\n", name, i+1, line)
			if cut > 0 || len(entry) > budget {
				cut++
				continue
			}
			budget -= len(entry)
			out.WriteString(entry)
		}
	}
	var truncated bool
	if o.info.Mode.IsDir() {
		truncated, err = o.walk(func(rel string, info confined.FileInfo) error {
			switch name := path.Base(rel); {
			case info.Mode.IsDir() && (name == ".git" || name == "node_modules"):
				return fs.SkipDir
			case info.Mode.IsRegular() && info.Size <= grepMaxFileBytes:
				search(rel)
			}
			return nil
		})
		if err != nil {
			return failf("grep: %s", fsErr(err))
		}
	} else if o.info.Size <= grepMaxFileBytes {
		search(o.rel)
	}
	res := strings.TrimSuffix(out.String(), "\n")
	if cut > 0 {
		res += fmt.Sprintf("\n[output truncated: %d more matching lines not shown; narrow the pattern or path]", cut)
	}
	if res == "" {
		res = "no matches"
	}
	return Result{Content: withWalkNote(res, truncated)}
}
