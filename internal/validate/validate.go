// Package validate holds the input rules of the API: memory paths, path
// prefixes and content (SPEC §2), and the names, free texts and metadata
// of every object. The server applies them to every request, and the worker's sync
// applies the same path and content rules before it uploads a file, so a
// file the server would refuse is recognised locally instead of being sent
// again and again.
//
// Every check returns nil or an *api.Error (invalid_request_error, or
// request_too_large for content size) whose message starts with the field
// name and says what to change. The functions return the error interface,
// never a typed nil pointer, so `if err != nil` is always right.
package validate

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
)

// MaxPathSegments is the deepest a memory path may be. The official API
// documents "1 to 20 segments"; memstore enforces the same so that a store
// built here can move to the hosted service and back.
const MaxPathSegments = 20

// MaxSegmentBytes is the longest one path segment may be: NAME_MAX of the
// filesystems a worker mounts stores on, so that every memory can be a file.
const MaxSegmentBytes = 255

// MarkerName is the file at the root of every store folder that binds the
// folder to its store (SPEC §5). The worker never syncs it, so no memory may
// take its name.
const MarkerName = ".anthropic-memory-store"

// TempPrefix starts the name of every temporary file an atomic write makes
// in a store's folder. The worker skips such files (they are leftovers of
// an interrupted write), so no memory may take a name that starts with it.
const TempPrefix = ".memstore-tmp-"

func invalid(field, format string, args ...any) error {
	return api.Errorf(api.InvalidRequest, "%s: %s", field, fmt.Sprintf(format, args...))
}

// Path checks a memory path: it starts with "/", is at most
// api.MaxPathBytes bytes of valid UTF-8 in Unicode NFC, has 1 to
// MaxPathSegments segments, none of them empty, "." or "..", and holds no
// control or format character (which includes U+2028/U+2029 line and
// paragraph separators as well as zero-width and bidi controls that would
// make two different paths look the same). field names the request field in
// the error ("path").
func Path(field, p string) error {
	if p == "" {
		return invalid(field, "is required; send an absolute path such as /notes/todo.md")
	}
	if err := pathText(field, p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") {
		return invalid(field, "%q must start with \"/\"; send it as %q", p, "/"+p)
	}
	if strings.HasSuffix(p, "/") {
		return invalid(field, "%q ends with \"/\", but a memory path names a file; remove the trailing slash", p)
	}
	if err := segments(field, p[1:]); err != nil {
		return err
	}
	return fileSegments(field, p[1:])
}

// fileSegments refuses the segments no worker can put on disk as a file or
// folder of a store: they would be skipped on every sync, forever. Listing
// prefixes are not checked, so memories stored before these rules can
// still be listed and renamed away.
func fileSegments(field, rel string) error {
	for _, s := range strings.Split(rel, "/") {
		switch {
		case len(s) > MaxSegmentBytes:
			return invalid(field, "has a segment of %d bytes; a worker stores each segment as a file or folder name, which is at most %d bytes, so shorten it", len(s), MaxSegmentBytes)
		case s == MarkerName:
			return invalid(field, "uses the name %q, which the worker reserves for the marker file of a store's folder; choose another name", s)
		case strings.HasPrefix(s, TempPrefix):
			return invalid(field, "has the segment %q, but names starting with %q are reserved for the worker's temporary files; choose another name", s, TempPrefix)
		}
	}
	return nil
}

// PathPrefix checks a listing prefix: "/" or a valid path followed by "/",
// so that it matches whole segments ("/notes/" never matches
// "/notes-archive/x").
func PathPrefix(field, p string) error {
	if p == "/" {
		return nil
	}
	if p == "" {
		return invalid(field, "must not be empty; omit it to list the whole store, or send a prefix such as /notes/")
	}
	if err := pathText(field, p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") {
		return invalid(field, "%q must start with \"/\", e.g. %q", p, "/"+p)
	}
	if !strings.HasSuffix(p, "/") {
		return invalid(field, "%q must end with \"/\" (prefixes match whole segments); send %q", p, p+"/")
	}
	return segments(field, p[1:len(p)-1])
}

// pathText checks the rules that apply to the whole string.
func pathText(field, p string) error {
	if len(p) > api.MaxPathBytes {
		return invalid(field, "is %d bytes long; the limit is %d bytes (UTF-8), so shorten it", len(p), api.MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return invalid(field, "is not valid UTF-8; send the path as UTF-8 text")
	}
	for i, r := range p {
		if bad := forbiddenRune(r); bad != "" {
			return invalid(field, "contains %s %U at byte %d; remove it", bad, r, i)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return invalid(field, "is not in Unicode Normalization Form C; normalise it to NFC (it would be %q)", norm.NFC.String(p))
	}
	return nil
}

// forbiddenRune names the kind of a rune that may not appear in a path, or
// returns "".
func forbiddenRune(r rune) string {
	switch {
	case r == '\u2028':
		return "the line separator"
	case r == '\u2029':
		return "the paragraph separator"
	case unicode.Is(unicode.Cc, r):
		return "the control character"
	case unicode.Is(unicode.Cf, r):
		return "the format character"
	}
	return ""
}

// segments checks the slash-separated segments of rel (a path without its
// leading slash).
func segments(field, rel string) error {
	segs := strings.Split(rel, "/")
	if len(segs) > MaxPathSegments {
		return invalid(field, "has %d segments; the limit is %d, so use a shallower path", len(segs), MaxPathSegments)
	}
	for _, s := range segs {
		switch s {
		case "":
			return invalid(field, "has an empty segment (\"//\" or a lone \"/\"); every segment between slashes must be a name")
		case ".", "..":
			return invalid(field, "has a %q segment; paths are taken literally, so write the path without %q", s, s)
		}
	}
	return nil
}

// Content checks memory content: valid UTF-8 and at most
// api.MaxContentBytes bytes ("" is allowed). Oversized content is a 413
// request_too_large; anything else is a 400.
func Content(field, c string) error {
	if len(c) > api.MaxContentBytes {
		return api.Errorf(api.RequestTooLarge, "%s: is %d bytes; a memory holds at most %d bytes (UTF-8), so split it into several memories", field, len(c), api.MaxContentBytes)
	}
	if !utf8.ValidString(c) {
		return invalid(field, "is not valid UTF-8; memories hold text only")
	}
	return nil
}

// Name checks the name of a memory store, an environment, an agent or a
// key: 1 to api.MaxStoreNameChars characters, no control characters.
func Name(field, name string) error {
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0:
		return invalid(field, "is required and must not be empty; send 1 to %d characters", api.MaxStoreNameChars)
	case n > api.MaxStoreNameChars:
		return invalid(field, "is %d characters long; the limit is %d, so shorten it", n, api.MaxStoreNameChars)
	case !utf8.ValidString(name):
		return invalid(field, "is not valid UTF-8")
	}
	for _, r := range name {
		if unicode.Is(unicode.Cc, r) {
			return invalid(field, "contains the control character %U; names are one line of text, so remove it", r)
		}
	}
	return nil
}

// Description checks a description: at most api.MaxDescriptionChars
// characters ("" clears it). Line breaks are allowed: it is free text that
// goes into the agent's system prompt.
func Description(field, d string) error { return Text(field, d, api.MaxDescriptionChars) }

// Text checks free text (a title, a prompt, instructions): valid UTF-8 and
// at most max characters.
func Text(field, v string, max int) error {
	if !utf8.ValidString(v) {
		return invalid(field, "is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(v); n > max {
		return invalid(field, "is %d characters long; the limit is %d, so shorten it", n, max)
	}
	return nil
}

// MetadataPair checks one metadata key and value: a key of 1 to
// api.MaxMetadataKeyChars characters without control characters, and a
// value of at most api.MaxMetadataValueChars characters.
func MetadataPair(field, key, value string) error {
	kn := utf8.RuneCountInString(key)
	switch {
	case kn == 0:
		return invalid(field, "has an empty key; keys are 1 to %d characters", api.MaxMetadataKeyChars)
	case kn > api.MaxMetadataKeyChars:
		return invalid(field, "key %.20q… is %d characters long; keys are at most %d", key, kn, api.MaxMetadataKeyChars)
	case !utf8.ValidString(key) || !utf8.ValidString(value):
		return invalid(field, "key %q: keys and values must be valid UTF-8", key)
	}
	for _, r := range key {
		if unicode.Is(unicode.Cc, r) {
			return invalid(field, "key %q contains the control character %U; remove it", key, r)
		}
	}
	if vn := utf8.RuneCountInString(value); vn > api.MaxMetadataValueChars {
		return invalid(field, "value of key %q is %d characters long; values are at most %d", key, vn, api.MaxMetadataValueChars)
	}
	return nil
}

// Metadata checks a whole metadata map: at most api.MaxMetadataPairs
// pairs, each valid.
func Metadata(field string, m map[string]string) error {
	if len(m) > api.MaxMetadataPairs {
		return TooManyMetadataPairs(field, len(m))
	}
	for k, v := range m {
		if err := MetadataPair(field, k, v); err != nil {
			return err
		}
	}
	return nil
}

// TooManyMetadataPairs is the error for a metadata map that would hold n
// pairs, over the limit. The server also uses it when a patch merged into
// stored metadata would exceed the limit.
func TooManyMetadataPairs(field string, n int) error {
	return invalid(field, "would hold %d key-value pairs; at most %d are allowed, so remove some (in an update, a key set to null is deleted)", n, api.MaxMetadataPairs)
}

// SHA256 checks a content hash given by a client: 64 lowercase hex digits.
func SHA256(field, h string) error {
	if len(h) != 64 {
		return invalid(field, "must be the 64-character lowercase hex SHA-256 of the content; got %d characters", len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return invalid(field, "must be lowercase hex (0-9, a-f); found %q at position %d", c, i)
		}
	}
	return nil
}

// ID refuses, as not_found, an id that is not of the expected kind, before
// storage is asked: a memory id where a store id belongs is a typo the
// caller should see named, not a generic "not found". field is where the
// body sent it ("" for the URL).
func ID(field, prefix, kind, id string) error {
	if ids.Valid(prefix, id) {
		return nil
	}
	lead, fix := "", "check the URL"
	if field != "" {
		lead, fix = field+": ", "check "+field
	}
	for _, other := range []struct{ prefix, kind string }{
		{ids.MemoryStore, "memory store"}, {ids.Memory, "memory"}, {ids.MemoryVersion, "memory version"},
		{ids.Session, "session"}, {ids.Environment, "environment"}, {ids.Work, "work item"}, {ids.Agent, "agent"},
	} {
		if other.prefix != prefix && strings.HasPrefix(id, other.prefix) {
			return api.Errorf(api.NotFound, "%s%q is %s id, not %s id (%s ids start with %q); %s", lead, id, withArticle(other.kind), withArticle(kind), kind, prefix, fix)
		}
	}
	return api.Errorf(api.NotFound, "%s%s %q not found: %s ids look like %s…; %s", lead, kind, id, kind, prefix, fix)
}

// withArticle puts "a" or "an" before a noun.
func withArticle(noun string) string {
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// Missing is the not_found refusal of a well-formed id, in field ("" for
// the URL), that names nothing; list is the request that lists what does
// exist.
func Missing(field, kind, id, list string) *api.Error {
	lead := ""
	if field != "" {
		lead = field + ": "
	}
	return api.Errorf(api.NotFound, "%sno %s %s: it does not exist or was deleted; check the id (%s lists them)", lead, kind, id, list)
}
