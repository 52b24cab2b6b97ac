package storagetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// search runs one search and returns the paths it found, in rank order.
func (f *fixture) search(q storage.SearchQuery) ([]string, storage.Page[storage.SearchHit]) {
	f.t.Helper()
	if q.Limit == 0 {
		q.Limit = 50
	}
	page, err := f.s.SearchMemories(f.ctx, q)
	if err != nil {
		f.t.Fatalf("search %v: %v", q.Terms, err)
	}
	paths := make([]string, len(page.Items))
	for i, h := range page.Items {
		paths[i] = h.Memory.Path
	}
	return paths, page
}

// testSearch: the index follows every write (create, update, move,
// delete, redaction of an older version) at once, scopes hits to the
// stores and subtree asked for, ranks, cuts snippets and pages.
func testSearch(t *testing.T, open Factory) {
	f := newFixture(t, open)
	a, b := f.store("a"), f.store("b")
	find := func(terms string, stores ...string) []string {
		t.Helper()
		paths, _ := f.search(storage.SearchQuery{StoreIDs: stores, Terms: storage.SearchTerms(terms)})
		return paths
	}

	walrus := f.create(a.ID, "/notes/animals.md", "The walrus sleeps on the ice floe; a narwhal swims below.")
	f.create(a.ID, "/notes/birds.md", "Puffins nest on cliffs.")
	f.create(b.ID, "/other/walrus.md", "Also about a walrus, in another store.")

	if got := find("walrus", a.ID); !slices.Equal(got, []string{"/notes/animals.md"}) {
		t.Fatalf("walrus in store a = %v, want only /notes/animals.md (store b's memory must not leak)", got)
	}
	if got := find("WALRUS narwhal", a.ID); !slices.Equal(got, []string{"/notes/animals.md"}) {
		t.Fatalf("two words, any case = %v", got)
	}
	if got := find("walrus puffins", a.ID); len(got) != 0 {
		t.Fatalf("every word must match, got %v", got)
	}
	if got := find("birds", a.ID); !slices.Equal(got, []string{"/notes/birds.md"}) {
		t.Fatalf("a path word = %v, want /notes/birds.md", got)
	}
	if got := find("walrus", a.ID, b.ID); len(got) != 2 {
		t.Fatalf("walrus across both stores = %v, want two hits", got)
	}
	_, page := f.search(storage.SearchQuery{StoreIDs: []string{a.ID}, Terms: []string{"narwhal"}})
	if h := page.Items[0]; h.Memory.ID != walrus.ID || h.Memory.StoreID != a.ID || h.Memory.VersionID != walrus.VersionID ||
		!strings.Contains(h.Snippet, storage.SnippetOpen+"narwhal"+storage.SnippetClose) {
		t.Fatalf("hit = %+v, want memory %s with narwhal marked in its snippet", h, walrus.ID)
	}

	// An update replaces what is found: the old words go, the new come.
	next := "The walrus moved to the beach with a seal."
	moved := "/zoo/animals.md"
	updated, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: a.ID, MemoryID: walrus.ID, Content: &next, Path: &moved, By: apiActor})
	if err != nil {
		t.Fatal(err)
	}
	if got := find("narwhal", a.ID); len(got) != 0 {
		t.Fatalf("narwhal after the update removed it = %v", got)
	}
	if got := find("seal zoo", a.ID); !slices.Equal(got, []string{moved}) {
		t.Fatalf("new words and new path = %v, want %s", got, moved)
	}
	// Redacting the first version takes nothing from the index (only
	// head versions are in it) and finds nothing old.
	if _, err := f.s.RedactMemoryVersion(f.ctx, a.ID, walrus.VersionID, apiActor); err != nil {
		t.Fatal(err)
	}
	if got := find("narwhal floe", a.ID); len(got) != 0 {
		t.Fatalf("redacted text found: %v", got)
	}
	if got := find("seal", a.ID); !slices.Equal(got, []string{moved}) {
		t.Fatalf("head after redacting an old version = %v", got)
	}
	if err := f.s.DeleteMemory(f.ctx, a.ID, updated.ID, "", apiActor); err != nil {
		t.Fatal(err)
	}
	if got := find("walrus seal", a.ID); len(got) != 0 {
		t.Fatalf("deleted memory found: %v", got)
	}

	// Ranking: the word in the path and twice in a short text beats it
	// once in a long one; path_prefix keeps to a subtree.
	f.create(a.ID, "/kb/otter.md", "Otter notes: an otter floats.")
	f.create(a.ID, "/kb/misc.md", "Rivers, lakes and stones; "+strings.Repeat("pebbles and sand ", 40)+"and once an otter.")
	f.create(a.ID, "/archive/otter.md", "An old otter memory.")
	if got := find("otter", a.ID); len(got) != 3 || got[0] != "/kb/otter.md" || got[2] != "/kb/misc.md" {
		t.Fatalf("otter ranking = %v, want /kb/otter.md first and /kb/misc.md last", got)
	}
	paths, _ := f.search(storage.SearchQuery{StoreIDs: []string{a.ID}, Terms: []string{"otter"}, PathPrefix: "/kb/"})
	if !slices.Equal(paths, []string{"/kb/otter.md", "/kb/misc.md"}) {
		t.Fatalf("otter under /kb/ = %v", paths)
	}

	// Pages: two, then one, then none more.
	var all []string
	q := storage.SearchQuery{StoreIDs: []string{a.ID}, Terms: []string{"otter"}, Limit: 2}
	for i := 0; ; i++ {
		paths, page := f.search(q)
		all = append(all, paths...)
		if page.Next == "" {
			break
		}
		if i > 2 {
			t.Fatal("paging does not end")
		}
		q.Cursor = page.Next
	}
	if want := find("otter", a.ID); !slices.Equal(all, want) {
		t.Fatalf("pages = %v, want %v", all, want)
	}
	q.Cursor = storage.EncodeCursor(storage.CursorMemories, "/kb/")
	if _, err := f.s.SearchMemories(f.ctx, q); !errors.Is(err, storage.ErrBadCursor) {
		t.Fatalf("a listing's cursor: err = %v, want ErrBadCursor", err)
	}

	// Deleting a store takes its memories out of the index.
	if err := f.s.DeleteMemoryStore(f.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := find("walrus", b.ID); len(got) != 0 {
		t.Fatalf("deleted store's memory found: %v", got)
	}
}
