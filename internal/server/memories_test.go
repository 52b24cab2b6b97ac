package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/validate"
)

// snapshot is everything the memory API stores, read back through the
// storage interface, to prove that a refused request changed nothing.
func (e *testEnv) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	stores, err := e.db.ListMemoryStores(e.ctx, storage.MemoryStoreQuery{Limit: 100, IncludeArchived: true})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, st := range stores.Items {
		j, _ := json.Marshal(st)
		b.Write(j)
		for cursor := ""; ; {
			page, err := e.db.ListMemories(e.ctx, storage.MemoryQuery{StoreID: st.ID, Limit: 100, Cursor: cursor, WithContent: true})
			if err != nil {
				e.t.Fatal(err)
			}
			j, _ := json.Marshal(page.Items)
			b.Write(j)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		for cursor := ""; ; {
			page, err := e.db.ListMemoryVersions(e.ctx, storage.MemoryVersionQuery{StoreID: st.ID, Limit: 100, Cursor: cursor, WithContent: true})
			if err != nil {
				e.t.Fatal(err)
			}
			j, _ := json.Marshal(page.Items)
			b.Write(j)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	return b.String()
}

// fixture: a store with a few memories, a full store (limit 3), an archived
// store.
type fixture struct {
	*testEnv
	store, full, archived api.MemoryStore
	doc, file             api.Memory // /notes/doc.md and /file
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{testEnv: newEnv(t, app.Config{MaxMemoriesPerStore: 3})}
	f.ok("POST", "/v1/memory_stores", map[string]any{"name": "main", "metadata": map[string]string{"a": "1"}}, &f.store)
	f.ok("POST", "/v1/memory_stores/"+f.store.ID+"/memories", api.CreateMemoryRequest{Path: "/notes/doc.md", Content: "doc"}, &f.doc)
	f.ok("POST", "/v1/memory_stores/"+f.store.ID+"/memories", api.CreateMemoryRequest{Path: "/file", Content: "file"}, &f.file)
	f.ok("POST", "/v1/memory_stores", map[string]any{"name": "full"}, &f.full)
	for i := range 3 {
		f.ok("POST", "/v1/memory_stores/"+f.full.ID+"/memories", api.CreateMemoryRequest{Path: fmt.Sprintf("/m%d", i), Content: "x"}, nil)
	}
	f.ok("POST", "/v1/memory_stores", map[string]any{"name": "archived"}, &f.archived)
	var m api.Memory
	f.ok("POST", "/v1/memory_stores/"+f.archived.ID+"/memories", api.CreateMemoryRequest{Path: "/kept", Content: "kept"}, &m)
	f.ok("POST", "/v1/memory_stores/"+f.archived.ID+"/archive", nil, nil)
	return f
}

// refusal is one request that must be refused.
type refusal struct {
	name         string
	method, path string
	body         any
	headers      []string
	status       int
	typ          api.ErrorType
	mention      []string // substrings of the message: the field, the fix
}

// check sends each request and verifies status, type, message, the
// envelope, and that storage did not change.
func (f *fixture) check(t *testing.T, cases []refusal) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.snapshot()
			res := f.do(c.method, c.path, c.body, c.headers...)
			ae := f.apiError(res)
			if res.status != c.status || ae.Type != c.typ {
				t.Fatalf("got %d %s, want %d %s: %s", res.status, ae.Type, c.status, c.typ, ae.Message)
			}
			for _, m := range c.mention {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q does not mention %q", ae.Message, m)
				}
			}
			if res.header.Get("x-should-retry") != "false" {
				t.Errorf("a %d refusal without x-should-retry: false", res.status)
			}
			if after := f.snapshot(); after != before {
				t.Fatalf("a refused request changed storage")
			}
		})
	}
}

func TestValidationAndLimits(t *testing.T) {
	f := newFixture(t)
	s, full, arch := "/v1/memory_stores/"+f.store.ID, "/v1/memory_stores/"+f.full.ID, "/v1/memory_stores/"+f.archived.ID
	mem := s + "/memories/" + f.doc.ID
	longName := strings.Repeat("n", 256)
	meta17 := map[string]string{}
	for i := range 17 {
		meta17[fmt.Sprintf("k%d", i)] = "v"
	}
	meta16 := map[string]*string{}
	for i := range 16 {
		v := "v"
		meta16[fmt.Sprintf("new%d", i)] = &v
	}
	path1025 := "/" + strings.Repeat("p", 1024)
	hex64 := strings.Repeat("ab", 32)

	f.check(t, []refusal{
		// Store fields.
		{"store name missing", "POST", "/v1/memory_stores", map[string]any{}, nil, 400, api.InvalidRequest, []string{"name", "required"}},
		{"store name empty", "POST", "/v1/memory_stores", map[string]any{"name": ""}, nil, 400, api.InvalidRequest, []string{"name"}},
		{"store name 256 chars", "POST", "/v1/memory_stores", map[string]any{"name": longName}, nil, 400, api.InvalidRequest, []string{"name", "256", "255"}},
		{"store name control char", "POST", "/v1/memory_stores", map[string]any{"name": "a\tb"}, nil, 400, api.InvalidRequest, []string{"name", "control"}},
		{"store name wrong type", "POST", "/v1/memory_stores", `{"name": 5}`, nil, 400, api.InvalidRequest, []string{"name", "string"}},
		{"description 1025 chars", "POST", "/v1/memory_stores", map[string]any{"name": "n", "description": strings.Repeat("d", 1025)}, nil, 400, api.InvalidRequest, []string{"description", "1024"}},
		{"metadata 17 pairs", "POST", "/v1/memory_stores", map[string]any{"name": "n", "metadata": meta17}, nil, 400, api.InvalidRequest, []string{"metadata", "17", "16"}},
		{"metadata key 65 chars", "POST", "/v1/memory_stores", map[string]any{"name": "n", "metadata": map[string]string{strings.Repeat("k", 65): "v"}}, nil, 400, api.InvalidRequest, []string{"metadata", "64"}},
		{"metadata empty key", "POST", "/v1/memory_stores", map[string]any{"name": "n", "metadata": map[string]string{"": "v"}}, nil, 400, api.InvalidRequest, []string{"metadata", "empty key"}},
		{"metadata value 513 chars", "POST", "/v1/memory_stores", map[string]any{"name": "n", "metadata": map[string]string{"k": strings.Repeat("v", 513)}}, nil, 400, api.InvalidRequest, []string{"metadata", "512"}},
		{"metadata null on create", "POST", "/v1/memory_stores", `{"name":"n","metadata":{"k":null}}`, nil, 400, api.InvalidRequest, []string{"metadata", "null"}},
		{"metadata wrong type", "POST", "/v1/memory_stores", `{"name":"n","metadata":"k=v"}`, nil, 400, api.InvalidRequest, []string{"metadata", "object"}},
		{"update name empty", "POST", s, map[string]any{"name": ""}, nil, 400, api.InvalidRequest, []string{"name"}},
		{"update metadata merged over 16", "POST", s, map[string]any{"metadata": meta16}, nil, 400, api.InvalidRequest, []string{"metadata", "17", "16"}},
		{"update name 256 chars", "POST", s, map[string]any{"name": longName}, nil, 400, api.InvalidRequest, []string{"name", "256", "255"}},
		{"update name control char", "POST", s, map[string]any{"name": "a\nb"}, nil, 400, api.InvalidRequest, []string{"name", "control"}},
		{"update description 1025 chars", "POST", s, map[string]any{"description": strings.Repeat("d", 1025)}, nil, 400, api.InvalidRequest, []string{"description", "1024"}},
		{"update metadata key 65 chars", "POST", s, map[string]any{"metadata": map[string]string{strings.Repeat("k", 65): "v"}}, nil, 400, api.InvalidRequest, []string{"metadata", "64"}},
		{"update metadata value 513 chars", "POST", s, map[string]any{"metadata": map[string]string{"a": strings.Repeat("v", 513)}}, nil, 400, api.InvalidRequest, []string{"metadata", "512"}},
		{"update archived store", "POST", arch, map[string]any{"name": "x"}, nil, 409, api.Conflict, []string{"archived", "read-only"}},

		// Memory paths.
		{"path missing", "POST", s + "/memories", map[string]any{"content": "x"}, nil, 400, api.InvalidRequest, []string{"path", "required"}},
		{"content missing", "POST", s + "/memories", map[string]any{"path": "/x"}, nil, 400, api.InvalidRequest, []string{"content", "required"}},
		{"path 1025 bytes", "POST", s + "/memories", api.CreateMemoryRequest{Path: path1025, Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "1025", "1024"}},
		{"path relative", "POST", s + "/memories", api.CreateMemoryRequest{Path: "notes/x.md", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "start with"}},
		{"path trailing slash", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/notes/", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "trailing slash"}},
		{"path not NFC", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/cafe\u0301.md", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "Normalization Form C"}},
		{"path dot segment", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a/./b", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", `"."`}},
		{"path dotdot segment", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a/../../etc/passwd", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", `".."`}},
		{"path empty segment", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a//b", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "empty segment"}},
		{"path control char", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a\x01b", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "control character"}},
		{"path newline", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a\nb", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "control character"}},
		{"path format char", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a\u200bb", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "format character"}},
		{"path U+2028", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a\u2028b", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "line separator"}},
		{"path U+2029", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a\u2029b", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "paragraph separator"}},
		{"path wrong type", "POST", s + "/memories", `{"path":["/a"],"content":"x"}`, nil, 400, api.InvalidRequest, []string{"path", "string"}},
		// Paths no worker can put on disk.
		{"path segment 256 bytes", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/a/" + strings.Repeat("s", 256), Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", "256 bytes", "255"}},
		{"path the marker's name", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/" + validate.MarkerName, Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", validate.MarkerName, "marker file"}},
		{"path a temporary file's name", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/notes/" + validate.TempPrefix + "1", Content: "x"}, nil, 400, api.InvalidRequest, []string{"path", validate.TempPrefix, "temporary files"}},
		{"rename to a segment of 256 bytes", "POST", mem, map[string]any{"path": "/" + strings.Repeat("s", 256)}, nil, 400, api.InvalidRequest, []string{"path", "256 bytes"}},
		{"rename to the marker's name", "POST", mem, map[string]any{"path": "/d/" + validate.MarkerName + "/x"}, nil, 400, api.InvalidRequest, []string{"path", "marker file"}},

		// A rename is held to the same path rules as a create.
		{"rename path 1025 bytes", "POST", mem, map[string]any{"path": path1025}, nil, 400, api.InvalidRequest, []string{"path", "1025", "1024"}},
		{"rename relative", "POST", mem, map[string]any{"path": "notes/x.md"}, nil, 400, api.InvalidRequest, []string{"path", "start with"}},
		{"rename trailing slash", "POST", mem, map[string]any{"path": "/notes/"}, nil, 400, api.InvalidRequest, []string{"path", "trailing slash"}},
		{"rename not NFC", "POST", mem, map[string]any{"path": "/cafe\u0301.md"}, nil, 400, api.InvalidRequest, []string{"path", "Normalization Form C"}},
		{"rename dot segment", "POST", mem, map[string]any{"path": "/a/./b"}, nil, 400, api.InvalidRequest, []string{"path", `"."`}},
		{"rename dotdot segment", "POST", mem, map[string]any{"path": "/../b"}, nil, 400, api.InvalidRequest, []string{"path", `".."`}},
		{"rename empty segment", "POST", mem, map[string]any{"path": "/a//b"}, nil, 400, api.InvalidRequest, []string{"path", "empty segment"}},
		{"rename control char", "POST", mem, map[string]any{"path": "/a\tb"}, nil, 400, api.InvalidRequest, []string{"path", "control character"}},
		{"rename format char", "POST", mem, map[string]any{"path": "/a\u202eb"}, nil, 400, api.InvalidRequest, []string{"path", "format character"}},
		{"rename U+2028", "POST", mem, map[string]any{"path": "/a\u2028b"}, nil, 400, api.InvalidRequest, []string{"path", "line separator"}},
		{"rename with content, bad path", "POST", mem, map[string]any{"path": "/a/../b", "content": "changed"}, nil, 400, api.InvalidRequest, []string{"path", `".."`}},

		// Content.
		{"content 102401 bytes", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/big", Content: strings.Repeat("c", 102_401)}, nil, 413, api.RequestTooLarge, []string{"content", "102401", "102400"}},
		{"content not UTF-8", "POST", s + "/memories", []byte("{\"path\":\"/x\",\"content\":\"a\xffb\"}"), nil, 400, api.InvalidRequest, []string{"UTF-8"}},
		{"content lone surrogate", "POST", s + "/memories", `{"path":"/x","content":"a\ud800b"}`, nil, 400, api.InvalidRequest, []string{"surrogate"}},
		{"content wrong type", "POST", s + "/memories", `{"path":"/x","content":{"text":"x"}}`, nil, 400, api.InvalidRequest, []string{"content", "string"}},
		{"update content 102401 bytes", "POST", mem, map[string]any{"content": strings.Repeat("c", 102_401)}, nil, 413, api.RequestTooLarge, []string{"content"}},

		// Collisions, preconditions, limits, archive.
		{"create at occupied path", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/notes/doc.md", Content: "x"}, nil, 409, api.MemoryPathConflict, []string{"path", f.doc.ID}},
		{"file beside directory", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/notes", Content: "x"}, nil, 409, api.MemoryPathConflict, []string{"/notes/doc.md"}},
		{"directory beside file", "POST", s + "/memories", api.CreateMemoryRequest{Path: "/file/inner", Content: "x"}, nil, 409, api.MemoryPathConflict, []string{"/file"}},
		{"rename onto a memory", "POST", mem, map[string]any{"path": "/file"}, nil, 409, api.MemoryPathConflict, []string{"/file"}},
		{"update changes nothing", "POST", mem, map[string]any{}, nil, 400, api.InvalidRequest, []string{"content", "path"}},
		{"stale precondition", "POST", mem, map[string]any{"content": "new", "precondition": map[string]any{"type": "content_sha256", "content_sha256": hex64}}, nil, 409, api.MemoryPreconditionFailed, []string{"precondition", "re-read"}},
		{"precondition sha malformed", "POST", mem, map[string]any{"content": "new", "precondition": map[string]any{"type": "content_sha256", "content_sha256": "ABC"}}, nil, 400, api.InvalidRequest, []string{"precondition.content_sha256"}},
		{"precondition sha missing", "POST", mem, map[string]any{"content": "new", "precondition": map[string]any{"type": "content_sha256"}}, nil, 400, api.InvalidRequest, []string{"precondition.content_sha256", "required"}},
		{"precondition type unknown", "POST", mem, map[string]any{"content": "new", "precondition": map[string]any{"type": "etag", "content_sha256": hex64}}, nil, 400, api.InvalidRequest, []string{"precondition.type"}},
		{"precondition wrong type", "POST", mem, `{"content":"new","precondition":"abc"}`, nil, 400, api.InvalidRequest, []string{"precondition", "object"}},
		{"delete guard mismatch", "DELETE", mem + "?expected_content_sha256=" + hex64, nil, nil, 409, api.MemoryPreconditionFailed, []string{"expected_content_sha256"}},
		{"delete guard malformed", "DELETE", mem + "?expected_content_sha256=xyz", nil, nil, 400, api.InvalidRequest, []string{"expected_content_sha256"}},
		{"store full", "POST", full + "/memories", api.CreateMemoryRequest{Path: "/m3", Content: "x"}, nil, 400, api.InvalidRequest, []string{"memory_store_id", "3 memories", "delete"}},
		{"create in archived store", "POST", arch + "/memories", api.CreateMemoryRequest{Path: "/new", Content: "x"}, nil, 409, api.Conflict, []string{"archived", "read-only"}},

		// Query parameters.
		{"limit 0", "GET", s + "/memories?limit=0", nil, nil, 400, api.InvalidRequest, []string{"limit", "1 to 100"}},
		{"limit 101", "GET", s + "/memories?limit=101", nil, nil, 400, api.InvalidRequest, []string{"limit"}},
		{"limit not a number", "GET", "/v1/memory_stores?limit=ten", nil, nil, 400, api.InvalidRequest, []string{"limit"}},
		{"view unknown", "GET", s + "/memories?view=fat", nil, nil, 400, api.InvalidRequest, []string{"view", "basic", "full"}},
		{"view unknown on get", "GET", mem + "?view=fat", nil, nil, 400, api.InvalidRequest, []string{"view"}},
		{"view unknown on create", "POST", s + "/memories?view=fat", api.CreateMemoryRequest{Path: "/v", Content: "x"}, nil, 400, api.InvalidRequest, []string{"view"}},
		{"depth negative", "GET", s + "/memories?depth=-1", nil, nil, 400, api.InvalidRequest, []string{"depth"}},
		{"path_prefix without slash", "GET", s + "/memories?path_prefix=/notes", nil, nil, 400, api.InvalidRequest, []string{"path_prefix", "/notes/"}},
		{"path_prefix dotdot", "GET", s + "/memories?path_prefix=" + url.QueryEscape("/../"), nil, nil, 400, api.InvalidRequest, []string{"path_prefix"}},
		{"page garbage", "GET", s + "/memories?page=garbage", nil, nil, 400, api.InvalidRequest, []string{"page", "next_page"}},
		{"page from another listing", "GET", s + "/memories?page=" + storage.EncodeCursor(storage.CursorMemoryVersions, "memver_x"), nil, nil, 400, api.InvalidRequest, []string{"page"}},
		{"include_archived not a bool", "GET", "/v1/memory_stores?include_archived=maybe", nil, nil, 400, api.InvalidRequest, []string{"include_archived"}},
		{"created_at not RFC 3339", "GET", "/v1/memory_stores?" + url.QueryEscape("created_at[gte]") + "=yesterday", nil, nil, 400, api.InvalidRequest, []string{"created_at[gte]", "RFC 3339"}},
		{"versions operation unknown", "GET", s + "/memory_versions?operation=edited", nil, nil, 400, api.InvalidRequest, []string{"operation"}},
		{"versions memory_id wrong kind", "GET", s + "/memory_versions?memory_id=" + f.store.ID, nil, nil, 400, api.InvalidRequest, []string{"memory_id"}},
		{"versions two authors", "GET", s + "/memory_versions?session_id=sesn_x&api_key_id=apikey_y", nil, nil, 400, api.InvalidRequest, []string{"session_id", "api_key_id"}},
		{"redact head of live memory", "POST", s + "/memory_versions/" + f.doc.MemoryVersionID + "/redact", nil, nil, 400, api.InvalidRequest, []string{"memory_version_id", "current version"}},
	})
}

// A path conflict names the memory in the way, in conflicting_memory_id and
// conflicting_path, whichever way the two paths collide: the same path, a
// file where a directory is (/notes beside /notes/doc.md) or a directory
// where a file is (/file/inner beside /file), by create or by rename.
func TestPathConflictsNameTheMemoryInTheWay(t *testing.T) {
	f := newFixture(t)
	s := "/v1/memory_stores/" + f.store.ID
	for _, c := range []struct {
		name, path string
		body       any
		blocker    api.Memory
	}{
		{"create at the same path", s + "/memories", api.CreateMemoryRequest{Path: "/file", Content: "x"}, f.file},
		{"create a file where a directory is", s + "/memories", api.CreateMemoryRequest{Path: "/notes", Content: "x"}, f.doc},
		{"create under a file", s + "/memories", api.CreateMemoryRequest{Path: "/file/inner", Content: "x"}, f.file},
		{"rename onto a memory", s + "/memories/" + f.doc.ID, map[string]any{"path": "/file"}, f.file},
		{"rename onto a directory", s + "/memories/" + f.file.ID, map[string]any{"path": "/notes"}, f.doc},
		{"rename under a file", s + "/memories/" + f.doc.ID, map[string]any{"path": "/file/doc.md"}, f.file},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.snapshot()
			res := f.do("POST", c.path, c.body)
			ae := f.apiError(res)
			if res.status != 409 || ae.Type != api.MemoryPathConflict {
				t.Fatalf("got %d %s, want 409 %s", res.status, ae.Type, api.MemoryPathConflict)
			}
			if ae.ConflictingMemoryID != c.blocker.ID || ae.ConflictingPath != c.blocker.Path {
				t.Fatalf("conflict names %s at %q, want %s at %q", ae.ConflictingMemoryID, ae.ConflictingPath, c.blocker.ID, c.blocker.Path)
			}
			if !strings.Contains(ae.Message, c.blocker.Path) || !strings.HasPrefix(ae.Message, "path: ") {
				t.Errorf("message %q does not name the field and the path in the way", ae.Message)
			}
			if f.snapshot() != before {
				t.Fatal("a refused write changed storage")
			}
		})
	}
}

// Limits at their boundary are accepted (the refusals above are one past
// them).
func TestLimitsAtTheBoundaryAreAccepted(t *testing.T) {
	e := newEnv(t, app.Config{})
	meta := map[string]string{}
	for i := range api.MaxMetadataPairs {
		meta[fmt.Sprintf("%064d", i)] = strings.Repeat("v", api.MaxMetadataValueChars)
	}
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{
		"name": strings.Repeat("é", api.MaxStoreNameChars), "description": strings.Repeat("d", api.MaxDescriptionChars), "metadata": meta,
	}, &st)
	if len(st.Metadata) != 16 || len([]rune(st.Name)) != 255 {
		t.Fatalf("store at the limits = %d pairs, name of %d characters", len(st.Metadata), len([]rune(st.Name)))
	}
	var m api.Memory
	big := strings.Repeat("🧠", api.MaxContentBytes/4)                            // 102,400 bytes
	path := strings.Repeat("/"+strings.Repeat("p", validate.MaxSegmentBytes), 4) // 1,024 bytes
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories?view=full", api.CreateMemoryRequest{Path: path, Content: big}, &m)
	if m.ContentSizeBytes != api.MaxContentBytes || m.Content == nil || *m.Content != big || m.Path != path {
		t.Fatalf("memory at the limits: size %d, path of %d bytes", m.ContentSizeBytes, len(m.Path))
	}
	// An update and a rename to the limits are accepted too.
	var small, grown api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/small", Content: "x"}, &small)
	other := strings.Repeat("/"+strings.Repeat("q", validate.MaxSegmentBytes), 4)
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories/"+small.ID+"?view=full", map[string]any{"path": other, "content": big}, &grown)
	if grown.ID != small.ID || grown.Path != other || grown.ContentSizeBytes != api.MaxContentBytes || *grown.Content != big {
		t.Fatalf("update to the limits: path of %d bytes, size %d", len(grown.Path), grown.ContentSizeBytes)
	}
	var empty api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/empty", Content: ""}, &empty)
	if empty.ContentSizeBytes != 0 {
		t.Fatalf("empty memory size %d", empty.ContentSizeBytes)
	}
	// A surrogate pair and raw UTF-8 are both fine; only lone halves are not.
	var emoji api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories?view=full", `{"path":"/emoji","content":"\ud83e\udde0 and 🧠"}`, &emoji)
	if *emoji.Content != "🧠 and 🧠" {
		t.Fatalf("surrogate pair decoded as %q", *emoji.Content)
	}
}

// The per-store limit is 10,000 memories unless configured (the fixture's
// limit of 3 shows that it is, and the refusals at that limit run in every
// test run): the 10,000th create is accepted, the 10,001st is refused naming
// the field and changing nothing, and updates still work. A long test:
// seeding 10,000 memories, each its own transaction as in production, takes
// about a minute under -race.
func TestDefaultStoreLimit(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, app.Config{})
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "big"}, &st)
	e.seed(t, st.ID, api.DefaultMaxMemories-1)
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/the-10000th", Content: "x"}, nil)
	before := e.snapshot()
	res := e.do("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/one-too-many", Content: "x"})
	ae := e.apiError(res)
	if res.status != 400 || ae.Type != api.InvalidRequest || !strings.HasPrefix(ae.Message, "memory_store_id: ") || !strings.Contains(ae.Message, "10000 memories") {
		t.Fatalf("10,001st memory: %d %s %s", res.status, ae.Type, ae.Message)
	}
	if e.snapshot() != before {
		t.Fatal("the refused create changed storage")
	}
	var page api.Page[api.MemoryListItem]
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memories?limit=1", nil, &page)
	var m api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories/"+page.Data[0].Memory.ID, map[string]any{"content": "still editable"}, &m)
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories/"+page.Data[0].Memory.ID, map[string]any{"path": "/renamed"}, &m)
}

func TestFullViewCapsPages(t *testing.T) {
	e := newEnv(t, app.Config{})
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "s"}, &st)
	e.seed(t, st.ID, 30)
	var full, basic api.Page[api.MemoryListItem]
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memories?view=full&limit=100", nil, &full)
	if len(full.Data) != api.MaxFullViewListLimit || full.NextPage == nil || full.Data[0].Memory.Content == nil {
		t.Fatalf("full view, limit 100: %d items, next %v", len(full.Data), full.NextPage)
	}
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memories?view=full&limit=100&page="+url.QueryEscape(*full.NextPage), nil, &full)
	if len(full.Data) != 10 || full.NextPage != nil {
		t.Fatalf("second full page: %d items, next %v", len(full.Data), full.NextPage)
	}
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memories?limit=100", nil, &basic)
	if len(basic.Data) != 30 || basic.NextPage != nil || basic.Data[0].Memory.Content != nil {
		t.Fatalf("basic view, limit 100: %d items", len(basic.Data))
	}
	var vs api.Page[api.MemoryVersion]
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memory_versions?view=full&limit=50", nil, &vs)
	if len(vs.Data) != api.MaxFullViewListLimit || vs.Data[0].Content == nil {
		t.Fatalf("full version listing, limit 50: %d items", len(vs.Data))
	}
}

// Bad input of every shape gets the error envelope, never a 500 or a panic.
func TestMalformedRequests(t *testing.T) {
	f := newFixture(t)
	s := "/v1/memory_stores/" + f.store.ID
	mem := s + "/memories/" + f.doc.ID
	unknownStore := "memstore_01AAAAAAAAAAAAAAAAAAAAAAAA"
	// Cursors issued by the main store's listings, handed to another store.
	var versions api.Page[api.MemoryVersion]
	var memories api.Page[api.MemoryListItem]
	f.ok("GET", s+"/memory_versions?limit=1", nil, &versions)
	f.ok("GET", s+"/memories?limit=1", nil, &memories)
	if versions.NextPage == nil || memories.NextPage == nil {
		t.Fatalf("the main store's listings gave no cursor: %+v %+v", versions, memories)
	}
	full := "/v1/memory_stores/" + f.full.ID
	f.check(t, []refusal{
		{"versions cursor of another store", "GET", full + "/memory_versions?page=" + url.QueryEscape(*versions.NextPage), nil, nil, 400, api.InvalidRequest, []string{"page", "next_page"}},
		{"memories cursor of another store", "GET", full + "/memories?page=" + url.QueryEscape(*memories.NextPage), nil, nil, 400, api.InvalidRequest, []string{"page", "next_page"}},

		{"not JSON", "POST", "/v1/memory_stores", "{name: x}", nil, 400, api.InvalidRequest, []string{"not valid JSON"}},
		{"truncated JSON", "POST", s + "/memories", `{"path":"/x","content":"ab`, nil, 400, api.InvalidRequest, []string{"truncated JSON"}},
		{"empty body", "POST", s + "/memories", "", nil, 400, api.InvalidRequest, []string{"empty"}},
		{"array body", "POST", s + "/memories", `[{"path":"/x"}]`, nil, 400, api.InvalidRequest, []string{"JSON object"}},
		{"string body", "POST", mem, `"content"`, nil, 400, api.InvalidRequest, []string{"JSON object"}},
		{"two objects", "POST", mem, `{"content":"a"}{"content":"b"}`, nil, 400, api.InvalidRequest, []string{"single JSON object"}},
		{"a stray brace after the object", "POST", mem, `{"content":"a"} }`, nil, 400, api.InvalidRequest, []string{"single JSON object"}},
		{"blank body", "POST", s + "/memories", " \n ", nil, 400, api.InvalidRequest, []string{"empty"}},
		{"number where string", "POST", mem, `{"content":12}`, nil, 400, api.InvalidRequest, []string{"content"}},
		{"bool where object", "POST", s, `{"metadata":true}`, nil, 400, api.InvalidRequest, []string{"metadata"}},
		{"oversized body", "POST", s + "/memories", `{"path":"/x","content":"` + strings.Repeat("a", server.DefaultMaxBodyBytes) + `"}`, nil, 413, api.RequestTooLarge, []string{"exceeds"}},
		{"oversized store body", "POST", "/v1/memory_stores", `{"name":"` + strings.Repeat("a", server.DefaultMaxBodyBytes) + `"}`, nil, 413, api.RequestTooLarge, nil},

		{"unknown store", "GET", "/v1/memory_stores/" + unknownStore, nil, nil, 404, api.NotFound, []string{unknownStore}},
		{"unknown store, memories", "GET", "/v1/memory_stores/" + unknownStore + "/memories", nil, nil, 404, api.NotFound, []string{unknownStore}},
		{"unknown store, create", "POST", "/v1/memory_stores/" + unknownStore + "/memories", api.CreateMemoryRequest{Path: "/x", Content: "x"}, nil, 404, api.NotFound, []string{unknownStore}},
		{"unknown store, versions", "GET", "/v1/memory_stores/" + unknownStore + "/memory_versions", nil, nil, 404, api.NotFound, []string{unknownStore}},
		{"unknown store, delete", "DELETE", "/v1/memory_stores/" + unknownStore, nil, nil, 404, api.NotFound, []string{unknownStore}},
		{"unknown store, archive", "POST", "/v1/memory_stores/" + unknownStore + "/archive", nil, nil, 404, api.NotFound, []string{unknownStore}},
		{"memory id as store id", "GET", "/v1/memory_stores/" + f.doc.ID, nil, nil, 404, api.NotFound, []string{"memory id", "not a memory store id"}},
		{"garbage store id", "GET", "/v1/memory_stores/hello", nil, nil, 404, api.NotFound, []string{"memstore_"}},
		{"escaped traversal as id", "GET", "/v1/memory_stores/..%2F..%2Fetc", nil, nil, 404, api.NotFound, nil},
		{"unknown memory", "GET", s + "/memories/mem_01AAAAAAAAAAAAAAAAAAAAAAAA", nil, nil, 404, api.NotFound, []string{"mem_01AAAAAAAAAAAAAAAAAAAAAAAA", f.store.ID}},
		{"memory of another store", "GET", "/v1/memory_stores/" + f.full.ID + "/memories/" + f.doc.ID, nil, nil, 404, api.NotFound, []string{f.doc.ID}},
		{"store id as memory id", "GET", s + "/memories/" + f.store.ID, nil, nil, 404, api.NotFound, []string{"memory store id", "not a memory id"}},
		{"store id as memory id, update", "POST", s + "/memories/" + f.store.ID, map[string]any{"content": "x"}, nil, 404, api.NotFound, []string{"not a memory id"}},
		{"store id as memory id, delete", "DELETE", s + "/memories/" + f.store.ID, nil, nil, 404, api.NotFound, []string{"not a memory id"}},
		{"unknown memory, delete", "DELETE", s + "/memories/mem_01AAAAAAAAAAAAAAAAAAAAAAAA", nil, nil, 404, api.NotFound, []string{"not found"}},
		{"memory id as version id", "GET", s + "/memory_versions/" + f.doc.ID, nil, nil, 404, api.NotFound, []string{"memory id", "not a memory version id"}},
		{"unknown version", "GET", s + "/memory_versions/memver_01AAAAAAAAAAAAAAAAAAAAAAAA", nil, nil, 404, api.NotFound, []string{"memver_01AAAAAAAAAAAAAAAAAAAAAAAA"}},
		{"unknown version, redact", "POST", s + "/memory_versions/memver_01AAAAAAAAAAAAAAAAAAAAAAAA/redact", nil, nil, 404, api.NotFound, nil},
		{"unknown route", "GET", "/v1/memory_stores/" + f.store.ID + "/nope", nil, nil, 404, api.NotFound, []string{"no route"}},
		{"wrong method", "PUT", s, map[string]any{"name": "x"}, nil, 404, api.NotFound, []string{"PUT"}},
	})
}

func TestCredentials(t *testing.T) {
	f := newFixture(t)
	envKey := f.credential(storage.EnvironmentKey)
	token := f.credential(storage.SessionsToken)
	s := "/v1/memory_stores/" + f.store.ID
	mem := s + "/memories/" + f.doc.ID
	var cases []refusal
	for _, ep := range []struct{ method, path string }{
		{"GET", s}, {"GET", s + "/memories"}, {"GET", mem}, {"POST", s + "/memories"}, {"POST", mem},
		{"DELETE", mem}, {"GET", s + "/memory_versions"}, {"GET", s + "/memory_versions/" + f.doc.MemoryVersionID},
	} {
		body := any(nil)
		if ep.method == "POST" {
			body = api.CreateMemoryRequest{Path: "/new", Content: "x"}
		}
		name := ep.method + " " + strings.ReplaceAll(strings.TrimPrefix(ep.path, s), "/", "_")
		cases = append(cases,
			refusal{"no credential: " + name, ep.method, ep.path, body, []string{"x-api-key", ""}, 401, api.Authentication, []string{"x-api-key"}},
			refusal{"unknown key: " + name, ep.method, ep.path, body, []string{"x-api-key", "sk-memstore-nope"}, 401, api.Authentication, []string{"unknown"}},
			refusal{"environment key: " + name, ep.method, ep.path, body, []string{"Authorization", "Bearer " + envKey}, 403, api.Permission, []string{"API key", "sessions token"}},
			refusal{"sessions token: " + name, ep.method, ep.path, body, []string{"Authorization", "Bearer " + token}, 403, api.Permission, []string{"sessions token"}},
		)
	}
	// Store management needs an API key outright.
	for _, ep := range []struct{ method, path string }{
		{"POST", "/v1/memory_stores"}, {"GET", "/v1/memory_stores"}, {"POST", s}, {"POST", s + "/archive"}, {"DELETE", s},
		{"POST", s + "/memory_versions/" + f.doc.MemoryVersionID + "/redact"},
	} {
		for kind, secret := range map[string]string{"environment key": envKey, "sessions token": token} {
			cases = append(cases, refusal{kind + ": " + ep.method + " " + ep.path, ep.method, ep.path, map[string]any{"name": "x"}, []string{"Authorization", "Bearer " + secret}, 403, api.Permission, []string{"API key"}})
		}
	}
	f.check(t, cases)

	// The API key works in either header, and the beta flags of the
	// official SDKs are accepted and ignored.
	for _, h := range [][]string{
		{"x-api-key", f.key},
		{"Authorization", "Bearer " + f.key},
		{"x-api-key", f.key, "anthropic-version", "2023-06-01", "anthropic-beta", "agent-memory-2026-07-22,managed-agents-2026-04-01"},
	} {
		res := f.do("GET", s+"/memories?beta=true", nil, h...)
		if res.status != 200 || res.header.Get("request-id") == "" {
			t.Fatalf("headers %v: %d %s", h[0], res.status, res.body)
		}
	}
}

// Writes are attributed to the API key that made them.
func TestWritesAreAttributedToTheKey(t *testing.T) {
	e := newEnv(t, app.Config{})
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "s"}, &st)
	var m api.Memory
	e.ok("POST", "/v1/memory_stores/"+st.ID+"/memories", api.CreateMemoryRequest{Path: "/a", Content: "x"}, &m)
	var v api.MemoryVersion
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memory_versions/"+m.MemoryVersionID, nil, &v)
	if want := (api.Actor{Type: api.APIActor, APIKeyID: e.keyID}); !reflect.DeepEqual(v.CreatedBy, want) {
		t.Fatalf("created_by = %+v, want %+v", v.CreatedBy, want)
	}
	var page api.Page[api.MemoryVersion]
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memory_versions?api_key_id="+e.keyID, nil, &page)
	if len(page.Data) != 1 {
		t.Fatalf("api_key_id filter: %d versions", len(page.Data))
	}
	e.ok("GET", "/v1/memory_stores/"+st.ID+"/memory_versions?session_id=sesn_01AAAAAAAAAAAAAAAAAAAAAAAA", nil, &page)
	if len(page.Data) != 0 || page.Data == nil {
		t.Fatalf("session_id filter: %+v (want an empty, non-null data array)", page)
	}
}
