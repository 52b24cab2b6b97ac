package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/memstore/memstore/api"
)

// The memory rules every backend applies the same way, with no I/O of
// their own: a backend reads the rows, asks these, and writes.

// ContentHash is the content_sha256 of a memory's content.
func ContentHash(c string) string {
	sum := sha256.Sum256([]byte(c))
	return hex.EncodeToString(sum[:])
}

// ActorID is the one id an actor carries, whichever its type; versions
// store it beside the type.
func ActorID(a api.Actor) string {
	switch a.Type {
	case api.SessionActor:
		return a.SessionID
	case api.UserActor:
		return a.UserID
	default:
		return a.APIKeyID
	}
}

// ActorFrom rebuilds the actor a version stored as type and id.
func ActorFrom(typ, id string) api.Actor {
	a := api.Actor{Type: typ}
	switch typ {
	case api.SessionActor:
		a.SessionID = id
	case api.UserActor:
		a.UserID = id
	default:
		a.APIKeyID = id
	}
	return a
}

// CheckActor refuses a write without an actor: every version names who
// made it.
func CheckActor(a api.Actor) error {
	if a.Type == "" || ActorID(a) == "" {
		return fmt.Errorf("storage: a write needs an actor with a type and an id, got %+v", a)
	}
	return nil
}

// ApplyStorePatch returns cur with p applied and whether anything changed
// (a patch that changes nothing leaves updated_at alone). It refuses an
// archived store and a patch leaving more than api.MaxMetadataPairs pairs.
func ApplyStorePatch(cur api.MemoryStore, p MemoryStorePatch) (api.MemoryStore, bool, error) {
	if cur.ArchivedAt != nil {
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
	return next, next.Name != cur.Name || next.Description != cur.Description || metaChanged, nil
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

// ListStart is where a memory listing of q begins: the prefix it lists
// ("/" when none is given), the bound its walk starts from (the cursor's,
// never before the prefix) and the end of the prefix's key range.
func ListStart(q MemoryQuery) (prefix string, from ListBound, upper string, err error) {
	prefix = q.Prefix
	if prefix == "" {
		prefix = "/"
	}
	_, upper = SubtreeRange(prefix)
	from = ListBound{Key: prefix}
	if q.Cursor == "" {
		return prefix, from, upper, nil
	}
	key, err := DecodeCursor(CursorMemories, q.Cursor)
	if err != nil {
		return "", ListBound{}, "", err
	}
	if from, err = DecodeListBound(key); err != nil {
		return "", ListBound{}, "", err
	}
	if from.Key < prefix {
		from = ListBound{Key: prefix}
	}
	return prefix, from, upper, nil
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
func PlanUpdate(cur api.Memory, in MemoryUpdate, contentSHA256 string) (MemoryChange, error) {
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
func PageChanges(latest, after int64, limit int, list func(n int) ([]api.MemoryChange, error)) (ChangePage, error) {
	page := ChangePage{Latest: latest, Changes: []api.MemoryChange{}}
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
