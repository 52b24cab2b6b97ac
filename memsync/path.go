package memsync

import (
	"strings"
	"unicode"
)

// relPath turns a memory path ("/a/b.md") into the folder-relative path
// confined uses ("a/b.md").
func relPath(p string) string { return strings.TrimPrefix(p, "/") }

// foldCase maps s to a key shared by every string that equals it under
// Unicode simple case folding (the equivalence strings.EqualFold tests), by
// replacing each rune with the smallest rune of its folding orbit. It
// approximates how case-insensitive filesystems compare names.
func foldCase(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

// pathPrefixes returns the folders a memory path lives in and the path
// itself: "/a/b/c" gives "/a", "/a/b", "/a/b/c".
func pathPrefixes(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}
