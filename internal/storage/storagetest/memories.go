package storagetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testclock"
	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/internal/testenv"
)

var (
	apiActor     = storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_01TESTTESTTESTTESTTESTTEST"}
	sessionActor = storage.Actor{Kind: storage.ActorSession, ID: "sesn_01TESTTESTTESTTESTTESTTEST"}
)

func ptr[T any](v T) *T { return &v }

// fixture is one open store with helpers that fail the test on error.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	s     storage.Store
	clock *testclock.Clock
}

func newFixture(t *testing.T, open Factory) *fixture {
	clock := newClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	return &fixture{t: t, ctx: context.Background(), s: s, clock: clock}
}

func (f *fixture) store(name string) storage.MemoryStoreRow {
	f.t.Helper()
	st, err := f.s.CreateMemoryStore(f.ctx, storage.NewMemoryStore{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) create(storeID, path, content string) storage.MemoryRow {
	f.t.Helper()
	m, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: storeID, Path: path, Content: content, By: apiActor, MaxMemories: api.DefaultMaxMemories})
	if err != nil {
		f.t.Fatalf("create %s: %v", path, err)
	}
	return m
}

func (f *fixture) versions(q storage.MemoryVersionQuery) []storage.VersionRow {
	f.t.Helper()
	var all []storage.VersionRow
	for {
		page, err := f.s.ListMemoryVersions(f.ctx, q)
		if err != nil {
			f.t.Fatal(err)
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		q.Cursor = page.Next
	}
}

func (f *fixture) count(storeID string) int {
	f.t.Helper()
	n, err := f.s.CountMemories(f.ctx, storeID)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// listAll pages through a memory listing and returns each item as a string:
// a memory's path, or a prefix's path followed by " (prefix)".
func (f *fixture) listAll(q storage.MemoryQuery) []string {
	f.t.Helper()
	var out []string
	for range 100_000 {
		page, err := f.s.ListMemories(f.ctx, q)
		if err != nil {
			f.t.Fatalf("list %+v: %v", q, err)
		}
		if len(page.Items) > max(q.Limit, 1) && q.Limit > 0 {
			f.t.Fatalf("page of %d items for limit %d", len(page.Items), q.Limit)
		}
		if page.Next != "" && len(page.Items) == 0 {
			f.t.Fatalf("empty page with a next cursor")
		}
		for _, it := range page.Items {
			out = append(out, itemString(it))
		}
		if page.Next == "" {
			return out
		}
		q.Cursor = page.Next
	}
	f.t.Fatal("listing never ended")
	return nil
}

func itemString(it storage.MemoryEntry) string {
	if it.Prefix != "" {
		return it.Prefix + " (prefix)"
	}
	return it.Memory.Path
}

func testMemoryStores(t *testing.T, open Factory) {
	t.Run("CreateGetList", func(t *testing.T) {
		f := newFixture(t, open)
		a, err := f.s.CreateMemoryStore(f.ctx, storage.NewMemoryStore{Name: "alpha", Description: "first", Metadata: map[string]string{"team": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(a.ID, "memstore_") || a.Name != "alpha" || a.Description != "first" ||
			a.Metadata["team"] != "x" || !a.CreatedAt.Equal(f.clock.Now()) || !a.UpdatedAt.Equal(f.clock.Now()) || a.Archived() {
			t.Fatalf("created store = %+v", a)
		}
		got, err := f.s.GetMemoryStore(f.ctx, a.ID)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("GetMemoryStore = %+v, %v; want %+v", got, err, a)
		}
		if b := f.store("no metadata"); b.Metadata == nil || len(b.Metadata) != 0 {
			t.Fatalf("metadata of a store created without it = %#v, want an empty map", b.Metadata)
		}
		if _, err := f.s.GetMemoryStore(f.ctx, "memstore_01NOPENOPENOPENOPENOPENOPE"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown store: %v, want ErrNotFound", err)
		}
	})

	t.Run("ListPagingFiltersArchived", func(t *testing.T) {
		f := newFixture(t, open)
		var made []storage.MemoryStoreRow
		for i := range 7 {
			made = append(made, f.store(fmt.Sprintf("s%d", i)))
			f.clock.Advance(time.Minute)
		}
		if _, err := f.s.ArchiveMemoryStore(f.ctx, made[3].ID); err != nil {
			t.Fatal(err)
		}
		list := func(q storage.MemoryStoreQuery) []string {
			var names []string
			for {
				page, err := f.s.ListMemoryStores(f.ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) > q.Limit {
					t.Fatalf("page of %d for limit %d", len(page.Items), q.Limit)
				}
				for _, st := range page.Items {
					names = append(names, st.Name)
				}
				if page.Next == "" {
					return names
				}
				q.Cursor = page.Next
			}
		}
		if got, want := list(storage.MemoryStoreQuery{Limit: 2}), []string{"s6", "s5", "s4", "s2", "s1", "s0"}; !slices.Equal(got, want) {
			t.Fatalf("newest first without archived = %v, want %v", got, want)
		}
		if got := list(storage.MemoryStoreQuery{Limit: 3, IncludeArchived: true}); len(got) != 7 || got[3] != "s3" {
			t.Fatalf("with archived = %v", got)
		}
		gte, lte := made[2].CreatedAt, made[5].CreatedAt
		if got, want := list(storage.MemoryStoreQuery{Limit: 10, IncludeArchived: true, CreatedGTE: &gte, CreatedLTE: &lte}), []string{"s5", "s4", "s3", "s2"}; !slices.Equal(got, want) {
			t.Fatalf("created_at window = %v, want %v (inclusive)", got, want)
		}
		if _, err := f.s.ListMemoryStores(f.ctx, storage.MemoryStoreQuery{Limit: 2, Cursor: "garbage"}); !errors.Is(err, storage.ErrBadCursor) {
			t.Fatalf("garbage cursor: %v, want ErrBadCursor", err)
		}
	})

	t.Run("UpdateMetadataAndNoOp", func(t *testing.T) {
		f := newFixture(t, open)
		st, err := f.s.CreateMemoryStore(f.ctx, storage.NewMemoryStore{Name: "n", Metadata: map[string]string{"keep": "1", "drop": "2", "change": "3"}})
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		got, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{
			Name:     ptr("renamed"),
			Metadata: map[string]*string{"drop": nil, "change": ptr("33"), "new": ptr("4"), "absent": nil},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"keep": "1", "change": "33", "new": "4"}
		if got.Name != "renamed" || got.Description != "" || !reflect.DeepEqual(got.Metadata, want) || !got.UpdatedAt.Equal(f.clock.Now()) || !got.CreatedAt.Equal(st.CreatedAt) {
			t.Fatalf("updated = %+v, want name renamed, metadata %v, updated_at now", got, want)
		}
		f.clock.Advance(time.Hour)
		same, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Name: ptr("renamed"), Metadata: map[string]*string{"keep": ptr("1"), "absent": nil}})
		if err != nil {
			t.Fatal(err)
		}
		if !same.UpdatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("a patch that changes nothing moved updated_at from %v to %v", got.UpdatedAt, same.UpdatedAt)
		}
		if d, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Description: ptr("desc")}); err != nil || d.Description != "desc" {
			t.Fatalf("description update = %+v, %v", d, err)
		}
		if d, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Description: ptr("")}); err != nil || d.Description != "" {
			t.Fatalf("clearing the description = %+v, %v", d, err)
		}
		if _, err := f.s.UpdateMemoryStore(f.ctx, "memstore_01NOPENOPENOPENOPENOPENOPE", storage.MemoryStorePatch{Name: ptr("x")}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown store: %v", err)
		}
	})

	t.Run("MetadataLimitIsAtomic", func(t *testing.T) {
		f := newFixture(t, open)
		meta := map[string]string{}
		for i := range api.MaxMetadataPairs - 1 {
			meta[fmt.Sprintf("k%02d", i)] = "v"
		}
		st, err := f.s.CreateMemoryStore(f.ctx, storage.NewMemoryStore{Name: "n", Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		// One more fits; two more do not, unless one key is deleted at once.
		_, err = f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Name: ptr("changed"), Metadata: map[string]*string{"a": ptr("1"), "b": ptr("2")}})
		var lim *storage.MetadataLimitError
		if !errors.As(err, &lim) || lim.Count != api.MaxMetadataPairs+1 {
			t.Fatalf("17 pairs: err = %v, want MetadataLimitError{17}", err)
		}
		if got, _ := f.s.GetMemoryStore(f.ctx, st.ID); got.Name != "n" || len(got.Metadata) != api.MaxMetadataPairs-1 {
			t.Fatalf("a refused patch changed the store: %+v", got)
		}
		got, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Metadata: map[string]*string{"a": ptr("1"), "b": ptr("2"), "k00": nil}})
		if err != nil || len(got.Metadata) != api.MaxMetadataPairs {
			t.Fatalf("16 pairs after a delete and two adds: %+v, %v", got.Metadata, err)
		}
	})

	t.Run("ArchiveIsReadOnly", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("a")
		keep := f.create(st.ID, "/keep", "one")
		gone := f.create(st.ID, "/gone", "two")
		old := keep
		keep, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: keep.ID, Content: ptr("one, edited"), By: apiActor})
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		arch, err := f.s.ArchiveMemoryStore(f.ctx, st.ID)
		if err != nil || !arch.Archived() || !arch.ArchivedAt.Equal(f.clock.Now()) || !arch.UpdatedAt.Equal(f.clock.Now()) {
			t.Fatalf("archive = %+v, %v", arch, err)
		}
		f.clock.Advance(time.Hour)
		again, err := f.s.ArchiveMemoryStore(f.ctx, st.ID)
		if err != nil || !reflect.DeepEqual(again, arch) {
			t.Fatalf("archiving twice = %+v, %v; want it unchanged %+v", again, err, arch)
		}
		before := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID}))
		if _, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/new", Content: "x", By: apiActor, MaxMemories: 10}); !errors.Is(err, storage.ErrStoreArchived) {
			t.Fatalf("create in archived store: %v", err)
		}
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: keep.ID, Content: ptr("x"), By: apiActor}); !errors.Is(err, storage.ErrStoreArchived) {
			t.Fatalf("update in archived store: %v", err)
		}
		if _, err := f.s.UpdateMemoryStore(f.ctx, st.ID, storage.MemoryStorePatch{Name: ptr("x")}); !errors.Is(err, storage.ErrStoreArchived) {
			t.Fatalf("patching an archived store: %v", err)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID})); n != before {
			t.Fatalf("refused writes added versions: %d -> %d", before, n)
		}
		// Reads, deletes and redactions still work.
		if got, err := f.s.GetMemory(f.ctx, st.ID, keep.ID); err != nil || *got.Content != "one, edited" {
			t.Fatalf("read from archived store: %+v, %v", got, err)
		}
		if err := f.s.DeleteMemory(f.ctx, st.ID, gone.ID, "", apiActor); err != nil {
			t.Fatalf("delete in archived store: %v", err)
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, old.VersionID, apiActor); err != nil {
			t.Fatalf("redact in archived store: %v", err)
		}
	})

	t.Run("DeleteCascades", func(t *testing.T) {
		f := newFixture(t, open)
		st, other := f.store("doomed"), f.store("other")
		m := f.create(st.ID, "/a", "x")
		o := f.create(other.ID, "/a", "y")
		if err := f.s.DeleteMemoryStore(f.ctx, st.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.GetMemoryStore(f.ctx, st.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("deleted store still found: %v", err)
		}
		if _, err := f.s.GetMemory(f.ctx, st.ID, m.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("memory of a deleted store still found: %v", err)
		}
		if _, err := f.s.GetMemoryVersion(f.ctx, st.ID, m.VersionID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("version of a deleted store still found: %v", err)
		}
		if _, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: st.ID}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("listing a deleted store: %v", err)
		}
		if _, err := f.s.ListMemoryVersions(f.ctx, storage.MemoryVersionQuery{StoreID: st.ID}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("listing versions of a deleted store: %v", err)
		}
		if err := f.s.DeleteMemoryStore(f.ctx, st.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		if got, err := f.s.GetMemory(f.ctx, other.ID, o.ID); err != nil || *got.Content != "y" {
			t.Fatalf("the other store lost its memory: %+v, %v", got, err)
		}
		// A new store may reuse the freed path space without collisions.
		again := f.store("again")
		f.create(again.ID, "/a", "z")
	})
}

func testMemories(t *testing.T, open Factory) {
	t.Run("CreateAndGet", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		content := "hello, wörld\n"
		m, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/notes/hello.md", Content: content, By: sessionActor, MaxMemories: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.ID, "mem_") || m.StoreID != st.ID || m.Path != "/notes/hello.md" ||
			m.Content == nil || *m.Content != content || m.ContentSHA256 != testdigest.SHA256(content) || m.ContentSizeBytes != int64(len(content)) ||
			!strings.HasPrefix(m.VersionID, "memver_") || !m.CreatedAt.Equal(f.clock.Now()) || !m.UpdatedAt.Equal(f.clock.Now()) {
			t.Fatalf("created = %+v", m)
		}
		got, err := f.s.GetMemory(f.ctx, st.ID, m.ID)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("GetMemory = %+v, %v; want %+v", got, err, m)
		}
		v, err := f.s.GetMemoryVersion(f.ctx, st.ID, m.VersionID)
		if err != nil {
			t.Fatal(err)
		}
		if v.Operation != storage.OpCreated || v.MemoryID != m.ID || v.StoreID != st.ID || v.Path != m.Path || v.Content != content ||
			v.ContentSHA256 != testdigest.SHA256(content) || v.ContentSizeBytes != int64(len(content)) || v.CreatedBy != sessionActor || v.Redacted() || v.RedactedBy != (storage.Actor{}) ||
			!v.HasContent() || v.Sequence != 1 {
			t.Fatalf("created version = %+v", v)
		}
		empty := f.create(st.ID, "/empty", "")
		if *empty.Content != "" || empty.ContentSHA256 != testdigest.SHA256("") || empty.ContentSizeBytes != 0 {
			t.Fatalf("empty memory = %+v", empty)
		}
		// Content with bytes SQL engines like to mangle survives exactly.
		odd := "nul\x00byte, crlf\r\n, emoji 🧠, trailing space "
		if got := f.create(st.ID, "/odd", odd); *got.Content != odd || got.ContentSHA256 != testdigest.SHA256(odd) {
			t.Fatalf("content changed in storage: %q", *got.Content)
		}
		// A memory is invisible through another store's id.
		other := f.store("other")
		if _, err := f.s.GetMemory(f.ctx, other.ID, m.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("memory reached through another store: %v", err)
		}
		// By path (a recovery looks its file up so): the same memory, with
		// its content; nothing at a directory's path nor in another store.
		if got, err := f.s.GetMemoryAt(f.ctx, st.ID, "/notes/hello.md"); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("GetMemoryAt = %+v, %v; want %+v", got, err, m)
		}
		for _, at := range []struct{ store, path string }{{st.ID, "/notes"}, {st.ID, "/notes/hello"}, {other.ID, "/notes/hello.md"}} {
			if _, err := f.s.GetMemoryAt(f.ctx, at.store, at.path); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("GetMemoryAt(%s, %s): %v, want ErrNotFound", at.store, at.path, err)
			}
		}
		if _, err := f.s.GetMemoryVersion(f.ctx, other.ID, m.VersionID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("version reached through another store: %v", err)
		}
		if _, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: "memstore_01NOPENOPENOPENOPENOPENOPE", Path: "/x", By: apiActor, MaxMemories: 10}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("create in unknown store: %v", err)
		}
	})

	t.Run("PathConflicts", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		a := f.create(st.ID, "/a", "file a")
		deep := f.create(st.ID, "/x/y/z", "deep")
		f.create(st.ID, "/ab", "sibling sharing a string prefix")
		f.create(st.ID, "/a.txt", "sibling sorting next to /a/")
		tests := []struct {
			path       string
			wantPath   string
			wantMemory string
		}{
			{"/a", "/a", a.ID},              // occupied
			{"/a/b", "/a", a.ID},            // /a is a file, cannot be a directory
			{"/a/b/c", "/a", a.ID},          // ... at any depth
			{"/x", "/x/y/z", deep.ID},       // /x is a directory of /x/y/z
			{"/x/y", "/x/y/z", deep.ID},     // ... and so is /x/y
			{"/x/y/z", "/x/y/z", deep.ID},   // occupied
			{"/x/y/z/w", "/x/y/z", deep.ID}, // /x/y/z is a file
		}
		for _, tt := range tests {
			n := f.count(st.ID)
			_, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: tt.path, Content: "new", By: apiActor, MaxMemories: 100})
			var pc *storage.PathConflictError
			if !errors.As(err, &pc) || pc.Path != tt.wantPath || pc.MemoryID != tt.wantMemory {
				t.Errorf("create %s: err = %v, want a conflict with %s (%s)", tt.path, err, tt.wantPath, tt.wantMemory)
			}
			if f.count(st.ID) != n {
				t.Errorf("create %s: a refused create changed the count", tt.path)
			}
		}
		if got, _ := f.s.GetMemory(f.ctx, st.ID, a.ID); *got.Content != "file a" || got.VersionID != a.VersionID {
			t.Fatalf("a refused create touched the existing memory: %+v", got)
		}
		// Neighbours that only share a string prefix do not collide.
		for _, p := range []string{"/a-b", "/x/y2", "/x/yy/z", "/A", "/a.txt2"} {
			f.create(st.ID, p, "ok")
		}
		// Paths are case-sensitive.
		f.create(st.ID, "/X", "capital")
	})

	t.Run("StoreLimit", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		const limit = 3
		var made []storage.MemoryRow
		for i := range limit {
			m, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/m%d", i), Content: "x", By: apiActor, MaxMemories: limit})
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, m)
		}
		_, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/over", Content: "x", By: apiActor, MaxMemories: limit})
		var full *storage.StoreFullError
		if !errors.As(err, &full) || full.Limit != limit {
			t.Fatalf("create over the limit: %v, want StoreFullError{%d}", err, limit)
		}
		if f.count(st.ID) != limit {
			t.Fatalf("count = %d after a refused create", f.count(st.ID))
		}
		// A retried create of an existing path still learns the id.
		_, err = f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/m0", Content: "x", By: apiActor, MaxMemories: limit})
		var pc *storage.PathConflictError
		if !errors.As(err, &pc) || pc.MemoryID != made[0].ID {
			t.Fatalf("conflict in a full store: %v", err)
		}
		// Updates, renames included, still work in a full store.
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: made[1].ID, Content: ptr("y"), Path: ptr("/renamed"), By: apiActor}); err != nil {
			t.Fatalf("update in a full store: %v", err)
		}
		if err := f.s.DeleteMemory(f.ctx, st.ID, made[2].ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/over", Content: "x", By: apiActor, MaxMemories: limit}); err != nil {
			t.Fatalf("create after a delete freed a slot: %v", err)
		}
		// The limit is the caller's: a larger one admits more.
		if _, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/more", Content: "x", By: apiActor, MaxMemories: limit + 1}); err != nil {
			t.Fatalf("create under a raised limit: %v", err)
		}
	})

	t.Run("UpdatePreconditionAndNoOp", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/doc", "v1")
		f.clock.Advance(time.Minute)

		up, changed, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("v2"), IfSHA256: testdigest.SHA256("v1"), By: sessionActor})
		if err != nil || !changed {
			t.Fatalf("update with a matching precondition: changed=%v err=%v", changed, err)
		}
		if up.ID != m.ID || *up.Content != "v2" || up.ContentSHA256 != testdigest.SHA256("v2") || up.VersionID == m.VersionID ||
			!up.UpdatedAt.Equal(f.clock.Now()) || !up.CreatedAt.Equal(m.CreatedAt) {
			t.Fatalf("updated = %+v", up)
		}
		v, _ := f.s.GetMemoryVersion(f.ctx, st.ID, up.VersionID)
		if v.Operation != storage.OpModified || v.Content != "v2" || v.CreatedBy != sessionActor {
			t.Fatalf("modified version = %+v", v)
		}

		// Stale precondition: refused, with the current hash, nothing written.
		_, _, err = f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("v3"), IfSHA256: testdigest.SHA256("v1"), By: apiActor})
		var pf *storage.PreconditionFailedError
		if !errors.As(err, &pf) || pf.CurrentSHA256 != testdigest.SHA256("v2") {
			t.Fatalf("stale precondition: %v", err)
		}
		if got, _ := f.s.GetMemory(f.ctx, st.ID, m.ID); *got.Content != "v2" || got.VersionID != up.VersionID {
			t.Fatalf("a refused update changed the memory: %+v", got)
		}

		// Stale precondition but the state already equals the request:
		// success, no new version.
		before := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID}))
		f.clock.Advance(time.Minute)
		same, changed, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("v2"), IfSHA256: testdigest.SHA256("v1"), By: apiActor})
		if err != nil || changed || same.VersionID != up.VersionID || !same.UpdatedAt.Equal(up.UpdatedAt) || *same.Content != "v2" {
			t.Fatalf("no-op with stale precondition = %+v, changed=%v, %v", same, changed, err)
		}
		if _, changed, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Path: ptr("/doc"), By: apiActor}); err != nil || changed {
			t.Fatalf("rename to the same path: changed=%v, %v", changed, err)
		}
		if n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID})); n != before {
			t.Fatalf("no-op updates wrote versions: %d -> %d", before, n)
		}
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: "mem_01NOPENOPENOPENOPENOPENOPE", Content: ptr("x"), By: apiActor}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("update of unknown memory: %v", err)
		}
	})

	t.Run("Rename", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		a := f.create(st.ID, "/a", "A")
		b := f.create(st.ID, "/dir/b", "B")

		r, changed, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Path: ptr("/moved/a"), IfSHA256: testdigest.SHA256("A"), By: apiActor})
		if err != nil || !changed || r.ID != a.ID || r.Path != "/moved/a" || *r.Content != "A" || r.ContentSHA256 != a.ContentSHA256 {
			t.Fatalf("rename = %+v, changed=%v, %v", r, changed, err)
		}
		v, _ := f.s.GetMemoryVersion(f.ctx, st.ID, r.VersionID)
		if v.Operation != storage.OpModified || v.Path != "/moved/a" || v.Content != "A" {
			t.Fatalf("rename version = %+v", v)
		}
		// The old path is free again; the id keeps the history.
		f.create(st.ID, "/a", "new A")
		if h := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: a.ID}); len(h) != 2 {
			t.Fatalf("history of the renamed memory has %d versions, want 2", len(h))
		}

		n := len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID}))
		for _, tt := range []struct{ to, conflictPath, conflictID string }{
			{"/dir/b", "/dir/b", b.ID},   // occupied
			{"/dir", "/dir/b", b.ID},     // a directory
			{"/dir/b/c", "/dir/b", b.ID}, // under a file
		} {
			_, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Path: ptr(tt.to), By: apiActor})
			var pc *storage.PathConflictError
			if !errors.As(err, &pc) || pc.Path != tt.conflictPath || pc.MemoryID != tt.conflictID {
				t.Errorf("rename to %s: %v, want conflict with %s", tt.to, err, tt.conflictPath)
			}
		}
		if len(f.versions(storage.MemoryVersionQuery{StoreID: st.ID})) != n {
			t.Fatal("refused renames wrote versions")
		}
		// A memory may move below or above its own old path: it no longer
		// occupies it once moved.
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: b.ID, Path: ptr("/dir/b/inner"), By: apiActor}); err != nil {
			t.Fatalf("rename /dir/b -> /dir/b/inner: %v", err)
		}
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: b.ID, Path: ptr("/dir"), By: apiActor}); err != nil {
			t.Fatalf("rename /dir/b/inner -> /dir: %v", err)
		}
		// Content and path together: one version.
		r, _, err = f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: b.ID, Path: ptr("/both"), Content: ptr("B2"), By: apiActor})
		if err != nil || r.Path != "/both" || *r.Content != "B2" {
			t.Fatalf("rename+edit = %+v, %v", r, err)
		}
		if h := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: b.ID}); len(h) != 4 {
			t.Fatalf("b has %d versions, want 4 (created, 2 renames, rename+edit)", len(h))
		}
	})

	t.Run("GuardedDelete", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/d", "content")
		err := f.s.DeleteMemory(f.ctx, st.ID, m.ID, testdigest.SHA256("other"), sessionActor)
		var pf *storage.PreconditionFailedError
		if !errors.As(err, &pf) || pf.CurrentSHA256 != testdigest.SHA256("content") {
			t.Fatalf("guard mismatch: %v", err)
		}
		if _, err := f.s.GetMemory(f.ctx, st.ID, m.ID); err != nil || f.count(st.ID) != 1 {
			t.Fatalf("a refused delete removed the memory: %v", err)
		}
		f.clock.Advance(time.Minute)
		if err := f.s.DeleteMemory(f.ctx, st.ID, m.ID, testdigest.SHA256("content"), sessionActor); err != nil {
			t.Fatalf("guarded delete: %v", err)
		}
		if _, err := f.s.GetMemory(f.ctx, st.ID, m.ID); !errors.Is(err, storage.ErrNotFound) || f.count(st.ID) != 0 {
			t.Fatalf("deleted memory still there: %v", err)
		}
		h := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID, WithContent: true})
		if len(h) != 2 || h[0].Operation != storage.OpDeleted || h[1].Operation != storage.OpCreated {
			t.Fatalf("history after delete = %+v", h)
		}
		del := h[0]
		if del.Path != "/d" || del.HasContent() || del.Content != "" || del.ContentSHA256 != "" || del.ContentSizeBytes != 0 ||
			del.CreatedBy != sessionActor || !del.CreatedAt.Equal(f.clock.Now()) {
			t.Fatalf("deleted version = %+v", del)
		}
		if err := f.s.DeleteMemory(f.ctx, st.ID, m.ID, "", apiActor); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		// Unguarded delete, and the path is free again.
		m2 := f.create(st.ID, "/d", "again")
		if err := f.s.DeleteMemory(f.ctx, st.ID, m2.ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ConcurrentWritesAreAtomic", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/race", Content: fmt.Sprint(i), By: apiActor, MaxMemories: 100})
			}()
		}
		wg.Wait()
		if ok, conflicts := countResults(errs); ok != 1 || conflicts != n-1 {
			t.Fatalf("concurrent creates of one path: %d succeeded, %d conflicts, errors %v", ok, conflicts, errs)
		}
		m, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: st.ID, Limit: 10})
		if err != nil || len(m.Items) != 1 {
			t.Fatalf("listing after the race: %+v, %v", m, err)
		}
		cur := m.Items[0].Memory
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: cur.ID, Content: ptr(fmt.Sprintf("writer %d", i)), IfSHA256: cur.ContentSHA256, By: apiActor})
			}()
		}
		wg.Wait()
		if ok, conflicts := countResults(errs); ok != 1 || conflicts != n-1 {
			t.Fatalf("concurrent updates with one precondition: %d succeeded, %d refused, errors %v", ok, conflicts, errs)
		}
		if h := f.versions(storage.MemoryVersionQuery{StoreID: st.ID}); len(h) != 2 {
			t.Fatalf("%d versions after the races, want 2", len(h))
		}
		// Concurrent creates of distinct paths into a nearly full store: the
		// limit holds exactly.
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: fmt.Sprintf("/fill/%d", i), Content: "x", By: apiActor, MaxMemories: 4})
			}()
		}
		wg.Wait()
		full := 0
		for _, err := range errs {
			var sf *storage.StoreFullError
			if errors.As(err, &sf) {
				full++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if full != n-3 || f.count(st.ID) != 4 {
			t.Fatalf("limit 4 under concurrency: %d refused, count %d", full, f.count(st.ID))
		}
	})
}

func countResults(errs []error) (ok, refused int) {
	for _, err := range errs {
		var pc *storage.PathConflictError
		var pf *storage.PreconditionFailedError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &pc), errors.As(err, &pf):
			refused++
		}
	}
	return ok, refused
}

func testMemoryListing(t *testing.T, open Factory) {
	t.Run("OrderDepthPrefix", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		paths := []string{"/b", "/a/x", "/a/y/z", "/a.txt", "/a-b/c", "/ä", "/Z", "/notes/todo.md", "/notes-archive/old.md", "/a/y/w/deep"}
		for _, p := range paths {
			f.create(st.ID, p, "content of "+p)
		}
		sorted := slices.Clone(paths)
		sort.Strings(sorted) // byte order
		if got := f.listAll(storage.MemoryQuery{StoreID: st.ID, Limit: 3}); !slices.Equal(got, sorted) {
			t.Fatalf("full listing = %v, want byte order %v", got, sorted)
		}
		if got, want := f.listAll(storage.MemoryQuery{StoreID: st.ID, Depth: 1, Limit: 2}),
			[]string{"/Z", "/a-b/ (prefix)", "/a.txt", "/a/ (prefix)", "/b", "/notes-archive/ (prefix)", "/notes/ (prefix)", "/ä"}; !slices.Equal(got, want) {
			t.Fatalf("depth 1 = %v, want %v", got, want)
		}
		if got, want := f.listAll(storage.MemoryQuery{StoreID: st.ID, Prefix: "/a/", Depth: 1, Limit: 1}), []string{"/a/x", "/a/y/ (prefix)"}; !slices.Equal(got, want) {
			t.Fatalf("depth 1 under /a/ = %v, want %v", got, want)
		}
		if got, want := f.listAll(storage.MemoryQuery{StoreID: st.ID, Prefix: "/a/", Depth: 2, Limit: 5}), []string{"/a/x", "/a/y/w/ (prefix)", "/a/y/z"}; !slices.Equal(got, want) {
			t.Fatalf("depth 2 under /a/ = %v, want %v", got, want)
		}
		if got, want := f.listAll(storage.MemoryQuery{StoreID: st.ID, Prefix: "/notes/"}), []string{"/notes/todo.md"}; !slices.Equal(got, want) {
			t.Fatalf("prefix /notes/ = %v, want whole segments only %v", got, want)
		}
		if got := f.listAll(storage.MemoryQuery{StoreID: st.ID, Prefix: "/nothing/"}); len(got) != 0 {
			t.Fatalf("empty prefix listing = %v", got)
		}
		// Content only when asked for.
		page, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: st.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if it.Memory.Content != nil || it.Memory.ContentSHA256 != testdigest.SHA256("content of "+it.Memory.Path) || it.Memory.VersionID == "" {
				t.Fatalf("basic item = %+v", it.Memory)
			}
		}
		page, err = f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: st.ID, Limit: 100, WithContent: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if it.Memory.Content == nil || *it.Memory.Content != "content of "+it.Memory.Path {
				t.Fatalf("full item = %+v", it.Memory)
			}
		}
		if page.Next != "" {
			t.Fatalf("a page holding everything has a next cursor")
		}
		for _, c := range []string{"garbage", storage.EncodeCursor(storage.CursorMemoryStores, "memstore_x"), storage.EncodeCursor(storage.CursorMemories, "no-slash")} {
			if _, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: st.ID, Cursor: c}); !errors.Is(err, storage.ErrBadCursor) {
				t.Errorf("cursor %q: %v, want ErrBadCursor", c, err)
			}
		}
		if _, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: "memstore_01NOPENOPENOPENOPENOPENOPE"}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown store: %v", err)
		}
	})

	// Against a model: random trees, every prefix/depth/limit combination,
	// pages concatenated. Page boundaries then fall everywhere, including
	// just before, at and after a rolled-up directory. Each tree costs
	// thousands of page reads (seconds under -race): one tree in the quick
	// run, ten in the long one.
	t.Run("MatchesModel", func(t *testing.T) {
		f := newFixture(t, open)
		rng := rand.New(rand.NewPCG(1, 2))
		names := []string{"a", "b", "a.b", "a-b", "ab", "é", "Z"}
		for round := range testenv.Scale(1, 10) {
			st := f.store(fmt.Sprintf("model %d", round))
			var paths []string
			for range 60 {
				depth := 1 + rng.IntN(4)
				p := ""
				for range depth {
					p += "/" + names[rng.IntN(len(names))]
				}
				_, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: p, Content: p, By: apiActor, MaxMemories: 1000})
				var pc *storage.PathConflictError
				switch {
				case err == nil:
					paths = append(paths, p)
				case !errors.As(err, &pc):
					t.Fatalf("create %s: %v", p, err)
				}
			}
			prefixes := map[string]bool{"/": true}
			for _, p := range paths {
				for i := 1; i < len(p); i++ {
					if p[i] == '/' {
						prefixes[p[:i+1]] = true
					}
				}
			}
			for prefix := range prefixes {
				for depth := range 4 {
					want := modelList(paths, prefix, depth)
					for _, limit := range []int{1, 2, 5, 100} {
						got := f.listAll(storage.MemoryQuery{StoreID: st.ID, Prefix: prefix, Depth: depth, Limit: limit})
						if !slices.Equal(got, want) {
							t.Fatalf("prefix %s depth %d limit %d:\n got %v\nwant %v", prefix, depth, limit, got, want)
						}
					}
				}
			}
		}
	})
}

// modelList is the listing the API promises, computed the obvious way.
func modelList(paths []string, prefix string, depth int) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		rel := strings.Split(p[len(prefix):], "/")
		if depth > 0 && len(rel) > depth {
			dir := prefix + strings.Join(rel[:depth], "/") + "/"
			if !seen[dir] {
				seen[dir] = true
				out = append(out, dir+" (prefix)")
			}
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.TrimSuffix(out[i], " (prefix)") < strings.TrimSuffix(out[j], " (prefix)")
	})
	return out
}

func testMemoryVersions(t *testing.T, open Factory) {
	// "Newest first" is the order the writes committed in, as the change
	// feed numbers them, even when the clock steps back between two writes
	// (an NTP correction) and the later version has the earlier time.
	t.Run("NewestFirstIsCommitOrder", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		a := f.create(st.ID, "/a", "a1")
		f.clock.Advance(-time.Hour)
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("a2"), By: sessionActor}); err != nil {
			t.Fatal(err)
		}
		f.create(st.ID, "/b", "b1")
		var got []string
		for _, v := range f.versions(storage.MemoryVersionQuery{StoreID: st.ID, Limit: 1}) {
			got = append(got, string(v.Operation)+" "+v.Path)
		}
		if want := []string{"created /b", "modified /a", "created /a"}; !slices.Equal(got, want) {
			t.Fatalf("newest first, one per page = %v, want %v", got, want)
		}
	})
	t.Run("ListFilters", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		t0 := f.clock.Now()
		a := f.create(st.ID, "/a", "a1")
		f.clock.Advance(time.Minute)
		b, err := f.s.CreateMemory(f.ctx, storage.NewMemory{StoreID: st.ID, Path: "/b", Content: "b1", By: sessionActor, MaxMemories: 10})
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		t2 := f.clock.Now()
		if _, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: a.ID, Content: ptr("a2"), By: sessionActor}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		if err := f.s.DeleteMemory(f.ctx, st.ID, b.ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
		other := f.store("other")
		f.create(other.ID, "/a", "elsewhere")

		ops := func(vs []storage.VersionRow) []string {
			var out []string
			for _, v := range vs {
				p := "<nil>"
				if !v.Redacted() {
					p = v.Path
				}
				out = append(out, string(v.Operation)+" "+p)
			}
			return out
		}
		all := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, Limit: 1})
		if got, want := ops(all), []string{"deleted /b", "modified /a", "created /b", "created /a"}; !slices.Equal(got, want) {
			t.Fatalf("newest first = %v, want %v", got, want)
		}
		for _, v := range all {
			if v.Content != "" {
				t.Fatalf("content without WithContent: %+v", v)
			}
			if v.Operation != storage.OpDeleted && (v.ContentSHA256 == "" || v.ContentSizeBytes == 0) {
				t.Fatalf("basic version lacks hash or size: %+v", v)
			}
		}
		cases := []struct {
			name string
			q    storage.MemoryVersionQuery
			want []string
		}{
			{"memory_id", storage.MemoryVersionQuery{MemoryID: a.ID}, []string{"modified /a", "created /a"}},
			{"memory_id of a deleted memory", storage.MemoryVersionQuery{MemoryID: b.ID}, []string{"deleted /b", "created /b"}},
			{"operation", storage.MemoryVersionQuery{Operation: storage.OpCreated}, []string{"created /b", "created /a"}},
			{"session", storage.MemoryVersionQuery{CreatedBy: sessionActor}, []string{"modified /a", "created /b"}},
			{"api key", storage.MemoryVersionQuery{CreatedBy: apiActor}, []string{"deleted /b", "created /a"}},
			{"created_at gte", storage.MemoryVersionQuery{CreatedGTE: &t2}, []string{"deleted /b", "modified /a"}},
			{"created_at window", storage.MemoryVersionQuery{CreatedGTE: &t0, CreatedLTE: &t2}, []string{"modified /a", "created /b", "created /a"}},
			{"combined", storage.MemoryVersionQuery{MemoryID: a.ID, Operation: storage.OpCreated}, []string{"created /a"}},
			{"no match", storage.MemoryVersionQuery{MemoryID: "mem_01NOPENOPENOPENOPENOPENOPE"}, nil},
		}
		for _, c := range cases {
			c.q.StoreID, c.q.Limit = st.ID, 1
			if got := ops(f.versions(c.q)); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
		full := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, WithContent: true})
		if full[1].Content != "a2" || full[0].Content != "" {
			t.Fatalf("full view: %+v / %+v", full[1], full[0])
		}
		if _, err := f.s.ListMemoryVersions(f.ctx, storage.MemoryVersionQuery{StoreID: st.ID, Cursor: storage.EncodeCursor(storage.CursorMemories, "=/a")}); !errors.Is(err, storage.ErrBadCursor) {
			t.Fatalf("memory cursor on versions: %v", err)
		}
	})

	// A page cursor names the store whose listing issued it: handed to
	// another store's listing it is refused, not read as a position there
	// (a version id of store A would page store B from A's sequence).
	t.Run("CursorFromAnotherStoreRefused", func(t *testing.T) {
		f := newFixture(t, open)
		a, b := f.store("a"), f.store("b")
		for _, p := range []string{"/1", "/2", "/3"} {
			f.create(a.ID, p, "a"+p)
			f.create(b.ID, p, "b"+p)
		}
		vers, err := f.s.ListMemoryVersions(f.ctx, storage.MemoryVersionQuery{StoreID: a.ID, Limit: 1})
		if err != nil || vers.Next == "" {
			t.Fatalf("first page of a's versions: %+v, %v", vers, err)
		}
		if page, err := f.s.ListMemoryVersions(f.ctx, storage.MemoryVersionQuery{StoreID: b.ID, Cursor: vers.Next}); !errors.Is(err, storage.ErrBadCursor) {
			t.Fatalf("a's versions cursor on b = %d items, %v; want ErrBadCursor", len(page.Items), err)
		}
		mems, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: a.ID, Limit: 1})
		if err != nil || mems.Next == "" {
			t.Fatalf("first page of a's memories: %+v, %v", mems, err)
		}
		if page, err := f.s.ListMemories(f.ctx, storage.MemoryQuery{StoreID: b.ID, Cursor: mems.Next}); !errors.Is(err, storage.ErrBadCursor) {
			t.Fatalf("a's memories cursor on b = %d items, %v; want ErrBadCursor", len(page.Items), err)
		}
		// Each cursor still pages its own store, and nothing was lost.
		if got := f.versions(storage.MemoryVersionQuery{StoreID: a.ID, Limit: 1}); len(got) != 3 {
			t.Fatalf("a's versions = %d, want 3", len(got))
		}
		if got := f.listAll(storage.MemoryQuery{StoreID: b.ID, Limit: 1}); !slices.Equal(got, []string{"/1", "/2", "/3"}) {
			t.Fatalf("b's memories = %v", got)
		}
	})

	t.Run("Redaction", func(t *testing.T) {
		f := newFixture(t, open)
		st := f.store("s")
		m := f.create(st.ID, "/secret", "password=hunter2")
		up, _, err := f.s.UpdateMemory(f.ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: ptr("password=<removed>"), By: apiActor})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, up.VersionID, apiActor); !errors.Is(err, storage.ErrRedactHead) {
			t.Fatalf("redacting the head: %v, want ErrRedactHead", err)
		}
		if v, _ := f.s.GetMemoryVersion(f.ctx, st.ID, up.VersionID); v.Redacted() || v.Content != "password=<removed>" {
			t.Fatalf("a refused redaction changed the head: %+v", v)
		}
		f.clock.Advance(time.Hour)
		v, err := f.s.RedactMemoryVersion(f.ctx, st.ID, m.VersionID, apiActor)
		if err != nil {
			t.Fatal(err)
		}
		if v.Content != "" || v.ContentSHA256 != "" || v.ContentSizeBytes != 0 || v.Path != "" || v.HasContent() ||
			!v.Redacted() || !v.RedactedAt.Equal(f.clock.Now()) || v.RedactedBy != apiActor ||
			v.Operation != storage.OpCreated || v.CreatedBy != apiActor || v.MemoryID != m.ID || !v.CreatedAt.Equal(m.CreatedAt) {
			t.Fatalf("redacted = %+v", v)
		}
		if got, _ := f.s.GetMemoryVersion(f.ctx, st.ID, m.VersionID); !reflect.DeepEqual(got, v) {
			t.Fatalf("stored redaction = %+v, want %+v", got, v)
		}
		f.clock.Advance(time.Hour)
		again, err := f.s.RedactMemoryVersion(f.ctx, st.ID, m.VersionID, sessionActor)
		if err != nil || !reflect.DeepEqual(again, v) {
			t.Fatalf("second redaction = %+v, %v; want unchanged", again, err)
		}
		// The live memory is untouched.
		if cur, _ := f.s.GetMemory(f.ctx, st.ID, m.ID); *cur.Content != "password=<removed>" {
			t.Fatalf("redacting an old version changed the memory: %+v", cur)
		}
		// Once the memory is deleted its last content version is no longer a
		// head and may be redacted; so may the deletion record.
		if err := f.s.DeleteMemory(f.ctx, st.ID, m.ID, "", apiActor); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, up.VersionID, apiActor); err != nil {
			t.Fatalf("redacting the last version of a deleted memory: %v", err)
		}
		h := f.versions(storage.MemoryVersionQuery{StoreID: st.ID, MemoryID: m.ID})
		if len(h) != 3 {
			t.Fatalf("history = %d versions, want 3 (redaction keeps the audit rows)", len(h))
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, h[0].ID, apiActor); err != nil {
			t.Fatalf("redacting a deletion record: %v", err)
		}
		if _, err := f.s.RedactMemoryVersion(f.ctx, st.ID, "memver_01NOPENOPENOPENOPENOPENOPE", apiActor); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown version: %v", err)
		}
	})
}
