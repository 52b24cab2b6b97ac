package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/retention"
)

// The memory rules every backend applies the same way, with no I/O of
// their own: a backend reads the rows, asks these, and writes.

// ContentHash is the content_sha256 of a memory's content. The content is
// fed to the hash through a buffer on the stack: []byte(c) would copy it
// whole to the heap, once per write, for the garbage collector to free.
func ContentHash(c string) string {
	h := sha256.New()
	var buf [512]byte
	for len(c) > 0 {
		n := copy(buf[:], c)
		h.Write(buf[:n])
		c = c[n:]
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// CheckActor refuses a write without an actor: every version names who
// made it.
func CheckActor(a Actor) error {
	if a.Kind == "" || a.ID == "" {
		return fmt.Errorf("storage: a write needs an actor with a kind and an id, got %+v", a)
	}
	return nil
}

// ApplyStorePatch returns cur with p applied and whether anything changed
// (a patch that changes nothing leaves updated_at alone). It refuses an
// archived store and a patch leaving more than api.MaxMetadataPairs pairs.
func ApplyStorePatch(cur MemoryStoreRow, p MemoryStorePatch) (MemoryStoreRow, bool, error) {
	if cur.Archived() {
		return cur, false, ErrStoreArchived
	}
	next := cur
	next.Metadata = maps.Clone(cur.Metadata)
	if next.Metadata == nil {
		next.Metadata = map[string]string{}
	}
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.Description != nil {
		next.Description = *p.Description
	}
	metaChanged := false
	for k, v := range p.Metadata {
		old, had := next.Metadata[k]
		switch {
		case v == nil && had:
			delete(next.Metadata, k)
			metaChanged = true
		case v != nil && (!had || old != *v):
			next.Metadata[k] = *v
			metaChanged = true
		}
	}
	if len(next.Metadata) > api.MaxMetadataPairs {
		return cur, false, &MetadataLimitError{Count: len(next.Metadata)}
	}
	retentionChanged := false
	if p.Retention != nil {
		var want *retention.Policy
		if !p.Retention.Inherit {
			pol := p.Retention.Policy
			want = &pol
		}
		retentionChanged = (want == nil) != (cur.Retention == nil) || (want != nil && *want != *cur.Retention)
		next.Retention = want
	}
	return next, next.Name != cur.Name || next.Description != cur.Description || metaChanged || retentionChanged, nil
}

// Ancestors lists the directories above p ("/a", "/a/b" for "/a/b/c"): a
// memory at any of them is a file where p needs a directory.
func Ancestors(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// SubtreeRange is the key range [lo, hi) holding every path under dir
// (which ends in "/"), in byte-wise order: '0' follows '/' in ASCII.
func SubtreeRange(dir string) (lo, hi string) {
	return dir, dir[:len(dir)-1] + "0"
}

// ListLimit turns a requested page size into the one to use.
func ListLimit(n int) int {
	if n <= 0 {
		return api.DefaultListLimit
	}
	return n
}

// ListBound is where a memory listing resumes: at Key, or just after it
// (Exclusive). It is what a memories cursor holds.
type ListBound struct {
	Key       string
	Exclusive bool
}

// Op is the comparison a backend's range query uses for the bound.
func (b ListBound) Op() string {
	if b.Exclusive {
		return ">"
	}
	return ">="
}

// Encode renders the bound as a cursor key.
func (b ListBound) Encode() string {
	if b.Exclusive {
		return ">" + b.Key
	}
	return "=" + b.Key
}

// DecodeListBound reads a bound made by Encode, or ErrBadCursor.
func DecodeListBound(s string) (ListBound, error) {
	if len(s) < 2 || !strings.HasPrefix(s[1:], "/") {
		return ListBound{}, ErrBadCursor
	}
	switch s[0] {
	case '>':
		return ListBound{Key: s[1:], Exclusive: true}, nil
	case '=':
		return ListBound{Key: s[1:]}, nil
	}
	return ListBound{}, ErrBadCursor
}

// MemoryListing is one page of a memory listing to walk: what it lists and
// where it starts. A backend plans it before its read transaction and
// walks it inside, with its own range queries.
type MemoryListing struct {
	q      MemoryQuery
	prefix string // "/" when none is given
	from   ListBound
	upper  string // the end of the prefix's key range
}

// PlanListing reads q's cursor, which must come from a listing of the same
// store (ErrBadCursor otherwise), and never starts before the prefix.
func PlanListing(q MemoryQuery) (MemoryListing, error) {
	l := MemoryListing{q: q, prefix: q.Prefix}
	if l.prefix == "" {
		l.prefix = "/"
	}
	_, l.upper = SubtreeRange(l.prefix)
	l.from = ListBound{Key: l.prefix}
	if q.Cursor == "" {
		return l, nil
	}
	key, err := DecodeCursor(StoreCursor(CursorMemories, q.StoreID), q.Cursor)
	if err != nil {
		return l, err
	}
	from, err := DecodeListBound(key)
	if err != nil {
		return l, err
	}
	if from.Key >= l.prefix {
		l.from = from
	}
	return l, nil
}

// MemoryRange is the range reads a listing walks with, inside one
// consistent snapshot of a store.
type MemoryRange interface {
	// Memories reads at most n memories of the store whose path is at
	// or after from (as from.Op says) and before upper, in byte-wise
	// path order, with their content when the query asks for it.
	Memories(from ListBound, upper string, n int) ([]MemoryRow, error)
	// Any reports whether a memory of the store lies in that range.
	Any(from ListBound, upper string) (bool, error)
}

// Page walks the store's path order from the listing's start. A memory
// within the depth is an entry; the first memory deeper than that stands
// for its whole directory, which becomes one prefix entry, and the walk
// jumps past the directory's key range. The cursor is the next lower
// bound, so a page may end right after a prefix, or right before one,
// without the next page repeating or losing anything.
func (l MemoryListing) Page(r MemoryRange) (Page[MemoryEntry], error) {
	limit := ListLimit(l.q.Limit)
	page := Page[MemoryEntry]{Items: make([]MemoryEntry, 0, min(limit, api.MaxListLimit))}
	from := l.from
	for len(page.Items) < limit {
		want := limit - len(page.Items)
		batch, err := r.Memories(from, l.upper, want)
		if err != nil {
			return page, err
		}
		rolledUp := false
		for _, m := range batch {
			if dir, ok := RollUp(m.Path, l.prefix, l.q.Depth); ok {
				page.Items = append(page.Items, MemoryEntry{Prefix: dir})
				_, past := SubtreeRange(dir)
				from = ListBound{Key: past}
				rolledUp = true
				break
			}
			page.Items = append(page.Items, MemoryEntry{Memory: m})
			from = ListBound{Key: m.Path, Exclusive: true}
		}
		if !rolledUp && len(batch) < want {
			return page, nil // the range is exhausted
		}
	}
	// The page is full; it has a successor only if something is left.
	more, err := r.Any(from, l.upper)
	if err != nil || !more {
		return page, err
	}
	page.Next = EncodeCursor(StoreCursor(CursorMemories, l.q.StoreID), from.Encode())
	return page, nil
}

// RollUp decides a memory's place in a listing of prefix with depth > 0:
// a path more than depth segments below prefix is represented by its
// directory depth segments down (dir, true), which the listing emits as
// one prefix item and then skips.
func RollUp(path, prefix string, depth int) (dir string, rolled bool) {
	rel := path[len(prefix):]
	if depth <= 0 || strings.Count(rel, "/") < depth {
		return "", false
	}
	n := depth
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			n--
			if n == 0 {
				return prefix + rel[:i+1], true
			}
		}
	}
	return prefix + rel, true
}

// MemoryChange is what an update turns a memory into.
type MemoryChange struct {
	Path, Content, SHA256 string
	// Noop: the memory already is what the request asks for, so nothing is
	// written and the precondition is not checked (a retry of a request
	// that landed must not fail).
	Noop bool
}

// PlanUpdate decides an update against the memory as stored (cur): the new
// path, content and hash, whether it is a no-op, and the precondition's
// refusal. Every backend calls it inside the transaction that read cur,
// then checks the path and writes. contentSHA256 is in.ContentSHA256(),
// computed before the transaction (writers take turns in it; hashing 100 KB
// is not free); cur needs its content only when in.Content is nil.
func PlanUpdate(cur MemoryRow, in MemoryUpdate, contentSHA256 string) (MemoryChange, error) {
	c := MemoryChange{Path: cur.Path, SHA256: cur.ContentSHA256}
	if in.Path != nil {
		c.Path = *in.Path
	}
	if in.Content != nil {
		c.Content, c.SHA256 = *in.Content, contentSHA256
	} else {
		c.Content = *cur.Content
	}
	if c.Path == cur.Path && c.SHA256 == cur.ContentSHA256 {
		c.Noop = true
		return c, nil
	}
	if in.IfSHA256 != "" && in.IfSHA256 != cur.ContentSHA256 {
		return c, &PreconditionFailedError{CurrentSHA256: cur.ContentSHA256}
	}
	return c, nil
}

// PageChanges is one page of a store's change feed after sequence after,
// for a store whose latest sequence is latest: a cursor above latest is
// refused, one at latest gets an empty page without a query, and list
// (which reads up to n changes after the cursor) is asked for one more
// than limit to tell whether more follow.
func PageChanges(latest, after int64, limit int, list func(n int) ([]VersionRow, error)) (ChangePage, error) {
	page := ChangePage{Latest: latest, Changes: []VersionRow{}}
	if after > latest {
		return page, &SequenceAheadError{After: after, Latest: latest}
	}
	if after == latest {
		return page, nil
	}
	changes, err := list(limit + 1)
	if err != nil {
		return page, err
	}
	page.Changes = changes
	if len(changes) > limit {
		page.Changes, page.More = changes[:limit], true
	}
	return page, nil
}
