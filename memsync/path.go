package memsync

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits of the memory API that the folder side must respect too.
const (
	// MaxPathBytes is the longest memory path the server accepts.
	MaxPathBytes = 1024
	// MaxContentBytes is the largest memory content the server accepts; a
	// bigger file is never uploaded.
	MaxContentBytes = 102400
)

// ValidatePath checks a memory path against the server's rules: it starts
// with "/", is at most [MaxPathBytes] bytes of NFC UTF-8, has no empty, "."
// or ".." segment, and has no control or format characters and no line or
// paragraph separator. The folder side applies the same rules so that a
// file the server would refuse is never mistaken for a memory, and a path
// from the server that could not be a file is refused before any I/O.
func ValidatePath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return errors.New("a memory path must start with /")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("a memory path is at most %d bytes; this one has %d", MaxPathBytes, len(p))
	case !utf8.ValidString(p):
		return errors.New("a memory path must be valid UTF-8")
	case !norm.NFC.IsNormalString(p):
		return errors.New("a memory path must be in Unicode normal form C (NFC)")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return errors.New("a memory path has no empty segment (no doubled or trailing /)")
		case ".", "..":
			return fmt.Errorf("a memory path has no %q segment", seg)
		}
	}
	for _, r := range p {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("a memory path has no control, format or separator characters (found %U)", r)
		}
	}
	return nil
}

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
