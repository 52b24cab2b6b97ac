package app_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// App.Search, the search behind the MCP tool memory_search: across every
// store the caller reads, or the ones it names, never beyond its reach.
func TestSearchAcrossReadableStores(t *testing.T) {
	f := newFixture(t, app.Config{})
	a, b, c := f.store(), f.store(), f.store()
	for _, w := range []struct{ store, path, content string }{
		{a.ID, "/tips.md", "Use the gopher linter before review."},
		{b.ID, "/more.md", "The gopher mascot is blue."},
		{c.ID, "/hidden.md", "A gopher secret nobody else may read."},
	} {
		if _, err := f.app.Memories.Create(f.ctx, w.store, w.path, w.content, person); err != nil {
			t.Fatal(err)
		}
	}
	storesOf := func(hits []storage.SearchHit) []string {
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.Memory.StoreID)
		}
		slices.Sort(ids)
		return ids
	}
	want := func(ids ...string) []string { slices.Sort(ids); return ids }

	hits, err := f.app.Search(f.ctx, app.Reach{All: true}, "gopher")
	if err != nil || !slices.Equal(storesOf(hits), want(a.ID, b.ID, c.ID)) {
		t.Fatalf("everything: %v %v", storesOf(hits), err)
	}
	session := app.Reach{StoreIDs: []string{a.ID, b.ID}}
	if hits, err = f.app.Search(f.ctx, session, "gopher"); err != nil || !slices.Equal(storesOf(hits), want(a.ID, b.ID)) {
		t.Fatalf("a session's two stores: %v %v", storesOf(hits), err)
	}
	if hits, err = f.app.Search(f.ctx, session, "GOPHER linter", a.ID); err != nil || len(hits) != 1 || hits[0].Memory.Path != "/tips.md" {
		t.Fatalf("one named store: %+v %v", hits, err)
	}

	// A store outside the reach and one that does not exist get the same
	// 404; bad queries are refused naming q.
	for _, id := range []string{c.ID, "memstore_01NOPENOPENOPENOPENOPENOPE"} {
		var ae *api.Error
		if _, err := f.app.Search(f.ctx, session, "gopher", id); !errors.As(err, &ae) || ae.Type != api.NotFound || !strings.Contains(ae.Message, id) {
			t.Fatalf("store %s: err = %v, want not_found naming it", id, err)
		}
	}
	for _, q := range []string{"", "  ...  ", strings.Repeat("x", app.MaxSearchQueryBytes+1)} {
		_, err := f.app.Search(f.ctx, app.Reach{All: true}, q)
		mustRefuse(t, err, "q")
	}
}
