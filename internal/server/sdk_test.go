package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/respjson"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/testdigest"
)

// The official Go SDK, pointed at memstore, must work unchanged: this test
// drives every memory-store endpoint through it and checks that every
// typed response decodes with all its fields present.

// fieldsPresent fails unless every field of v's JSON metadata was sent, and
// sent with a valid value, except the nullable ones, which must be present
// (possibly null). It also fails on fields the SDK does not know, which
// would be misspelled names, bar memstore's own extension fields (named
// with its prefix, kept by the SDK among its extra fields).
func fieldsPresent(t *testing.T, what string, v any, nullable ...string) {
	t.Helper()
	rv := reflect.Indirect(reflect.ValueOf(v))
	meta := rv.FieldByName("JSON")
	if !meta.IsValid() {
		t.Fatalf("%s: %T has no JSON metadata", what, v)
	}
	fieldType := reflect.TypeOf(respjson.Field{})
	for i := range meta.NumField() {
		f := meta.Type().Field(i)
		switch {
		case f.Name == "ExtraFields":
			var unknown []string
			for _, k := range meta.Field(i).MapKeys() {
				if k.String() != api.ExtensionRetentionField {
					unknown = append(unknown, k.String())
				}
			}
			if len(unknown) > 0 {
				t.Errorf("%s: fields unknown to the SDK: %v", what, unknown)
			}
			continue
		case f.Type != fieldType:
			continue
		}
		field := meta.Field(i).Interface().(respjson.Field)
		if slices.Contains(nullable, f.Name) {
			if field.Raw() == respjson.Omitted {
				t.Errorf("%s: nullable field %s is missing (send null instead)", what, f.Name)
			}
			continue
		}
		if !field.Valid() {
			t.Errorf("%s: required field %s is missing, null or of the wrong type (raw %q)", what, f.Name, field.Raw())
		}
	}
}

func checkStore(t *testing.T, st *anthropic.BetaManagedAgentsMemoryStore) {
	t.Helper()
	fieldsPresent(t, "memory_store", st, "ArchivedAt")
	if st.Type != "memory_store" || !strings.HasPrefix(st.ID, "memstore_") {
		t.Fatalf("memory_store = %s", st.RawJSON())
	}
}

func checkMemory(t *testing.T, m *anthropic.BetaManagedAgentsMemory, full bool) {
	t.Helper()
	fieldsPresent(t, "memory", m, "Content")
	if m.Type != "memory" || !strings.HasPrefix(m.ID, "mem_") || !strings.HasPrefix(m.MemoryVersionID, "memver_") {
		t.Fatalf("memory = %s", m.RawJSON())
	}
	if full != m.JSON.Content.Valid() {
		t.Fatalf("memory content present=%v, want %v (view full=%v): %s", m.JSON.Content.Valid(), full, full, m.RawJSON())
	}
	if full && (testdigest.SHA256(m.Content) != m.ContentSha256 || int64(len(m.Content)) != m.ContentSizeBytes) {
		t.Fatalf("content_sha256/size do not describe content: %s", m.RawJSON())
	}
}

func checkVersion(t *testing.T, v *anthropic.BetaManagedAgentsMemoryVersion) {
	t.Helper()
	fieldsPresent(t, "memory_version", v, "Content", "ContentSha256", "ContentSizeBytes", "Path", "RedactedAt", "RedactedBy")
	if v.Type != "memory_version" || !strings.HasPrefix(v.ID, "memver_") {
		t.Fatalf("memory_version = %s", v.RawJSON())
	}
	by := v.CreatedBy.AsAPIActor()
	fieldsPresent(t, "created_by", &by)
	if v.JSON.RedactedAt.Valid() {
		rb := v.RedactedBy.AsAPIActor()
		fieldsPresent(t, "redacted_by", &rb)
	}
}

// sdkError unwraps the SDK's error and decodes memstore's envelope from it.
func sdkError(t *testing.T, err error, status int, typ api.ErrorType) *api.Error {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an API error %d %s", err, status, typ)
	}
	if ae.StatusCode != status || string(ae.Type()) != string(typ) {
		t.Fatalf("error %d %s, want %d %s: %s", ae.StatusCode, ae.Type(), status, typ, ae.RawJSON())
	}
	var env api.ErrorEnvelope
	if err := json.Unmarshal([]byte(ae.RawJSON()), &env); err != nil || env.Error == nil {
		t.Fatalf("error body: %s", ae.RawJSON())
	}
	return env.Error
}

func TestOfficialSDK(t *testing.T) {
	e := newEnv(t, app.Config{})
	ctx := context.Background()
	// Default retries stay on: the server must tell the SDK not to repeat
	// a 409, which the request counter below checks.
	client := anthropic.NewClient(option.WithBaseURL(e.url), option.WithAPIKey(e.key))
	stores := client.Beta.MemoryStores
	mems := client.Beta.MemoryStores.Memories
	vers := client.Beta.MemoryStores.MemoryVersions

	// ---- stores ----
	st, err := stores.New(ctx, anthropic.BetaMemoryStoreNewParams{
		Name:        "Team notes",
		Description: param.NewOpt("What the team decided"),
		Metadata:    map[string]string{"owner": "ana", "tier": "gold"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, st)
	if st.Name != "Team notes" || st.Description != "What the team decided" || st.Metadata["owner"] != "ana" || st.JSON.ArchivedAt.Raw() != "null" {
		t.Fatalf("created store = %s", st.RawJSON())
	}
	got, err := stores.Get(ctx, st.ID, anthropic.BetaMemoryStoreGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, got)
	// Metadata keys set to null are deleted; the SDK's typed map cannot say
	// null, so this uses its raw-JSON option.
	up, err := stores.Update(ctx, st.ID, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("Team memory")},
		option.WithJSONSet("metadata", map[string]any{"tier": nil, "team": "core"}))
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, up)
	if up.Name != "Team memory" || !reflect.DeepEqual(up.Metadata, map[string]string{"owner": "ana", "team": "core"}) {
		t.Fatalf("updated store = %s", up.RawJSON())
	}
	for i := range 4 {
		if _, err := stores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "extra " + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	pager := stores.ListAutoPaging(ctx, anthropic.BetaMemoryStoreListParams{Limit: param.NewOpt(int64(2))})
	for pager.Next() {
		cur := pager.Current()
		checkStore(t, &cur)
		listed = append(listed, cur.Name)
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"extra d", "extra c", "extra b", "extra a", "Team memory"}; !slices.Equal(listed, want) {
		t.Fatalf("stores paged to the end = %v, want %v", listed, want)
	}

	// ---- memories: create, get, both views ----
	content := map[string]string{}
	var created []*anthropic.BetaManagedAgentsMemory
	for _, p := range []string{"/projects/alpha/notes.md", "/projects/alpha/todo.md", "/projects/beta/plan.md", "/readme.md", "/people/ana.md"} {
		content[p] = "# " + p + "\nsome text ✓\n"
		m, err := mems.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: param.NewOpt(content[p])})
		if err != nil {
			t.Fatal(err)
		}
		checkMemory(t, m, false) // create defaults to basic
		created = append(created, m)
	}
	full, err := mems.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/empty.md", Content: param.NewOpt(""), View: anthropic.BetaManagedAgentsMemoryViewFull})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, full, true)
	content["/empty.md"] = ""
	m0, err := mems.Get(ctx, created[0].ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, m0, true) // get defaults to full
	if m0.Content != content["/projects/alpha/notes.md"] {
		t.Fatalf("content = %q", m0.Content)
	}
	basic, err := mems.Get(ctx, created[0].ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID, View: anthropic.BetaManagedAgentsMemoryViewBasic})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, basic, false)

	// Create never overwrites; the SDK does not retry the 409.
	before := e.requests.Load()
	_, err = mems.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/projects/alpha/notes.md", Content: param.NewOpt("clobber")})
	pc := sdkError(t, err, http.StatusConflict, api.MemoryPathConflict)
	if pc.ConflictingMemoryID != created[0].ID || pc.ConflictingPath != "/projects/alpha/notes.md" {
		t.Fatalf("conflict names %s at %s, want %s", pc.ConflictingMemoryID, pc.ConflictingPath, created[0].ID)
	}
	if n := e.requests.Load() - before; n != 1 {
		t.Fatalf("the SDK sent %d requests for one 409; x-should-retry must stop it retrying", n)
	}
	_, err = mems.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/readme.md/inner", Content: param.NewOpt("x")})
	if pc := sdkError(t, err, http.StatusConflict, api.MemoryPathConflict); pc.ConflictingPath != "/readme.md" {
		t.Fatalf("file-as-directory conflict names %s", pc.ConflictingPath)
	}

	// ---- listing: both views, paged to the end, depth rollups ----
	allPaths := func(params anthropic.BetaMemoryStoreMemoryListParams, full bool) []string {
		t.Helper()
		var out []string
		pager := mems.ListAutoPaging(ctx, st.ID, params)
		for pager.Next() {
			it := pager.Current()
			switch it.Type {
			case "memory":
				m := it.AsMemory()
				checkMemory(t, &m, full)
				if full && m.Content != content[m.Path] {
					t.Fatalf("listed content of %s = %q", m.Path, m.Content)
				}
				out = append(out, m.Path)
			case "memory_prefix":
				p := it.AsMemoryPrefix()
				fieldsPresent(t, "memory_prefix", &p)
				out = append(out, p.Path)
			default:
				t.Fatalf("list item of type %q: %s", it.Type, it.RawJSON())
			}
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	wantAll := []string{"/empty.md", "/people/ana.md", "/projects/alpha/notes.md", "/projects/alpha/todo.md", "/projects/beta/plan.md", "/readme.md"}
	if got := allPaths(anthropic.BetaMemoryStoreMemoryListParams{Limit: param.NewOpt(int64(2))}, false); !slices.Equal(got, wantAll) {
		t.Fatalf("basic listing = %v, want %v", got, wantAll)
	}
	if got := allPaths(anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt(int64(4))}, true); !slices.Equal(got, wantAll) {
		t.Fatalf("full listing = %v, want %v", got, wantAll)
	}
	if got, want := allPaths(anthropic.BetaMemoryStoreMemoryListParams{Depth: param.NewOpt(int64(1)), Limit: param.NewOpt(int64(1))}, false),
		[]string{"/empty.md", "/people/", "/projects/", "/readme.md"}; !slices.Equal(got, want) {
		t.Fatalf("depth 1 = %v, want %v", got, want)
	}
	if got, want := allPaths(anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: param.NewOpt("/projects/"), Depth: param.NewOpt(int64(1))}, false),
		[]string{"/projects/alpha/", "/projects/beta/"}; !slices.Equal(got, want) {
		t.Fatalf("depth 1 under /projects/ = %v, want %v", got, want)
	}
	// Full view caps pages at 20 even when more are asked for.
	page, err := mems.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt(int64(100))})
	if err != nil {
		t.Fatal(err)
	}
	fieldsPresent(t, "page", page, "NextPage")

	// ---- update: matching and stale preconditions, no-op, rename ----
	target := created[1] // /projects/alpha/todo.md
	oldSHA := target.ContentSha256
	upd, err := mems.Update(ctx, target.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: st.ID,
		Content:       param.NewOpt("- [x] ship\n"),
		Precondition:  anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt(oldSHA)},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, upd, false)
	if upd.ID != target.ID || upd.ContentSha256 != testdigest.SHA256("- [x] ship\n") || upd.MemoryVersionID == target.MemoryVersionID {
		t.Fatalf("update = %s", upd.RawJSON())
	}
	before = e.requests.Load()
	_, err = mems.Update(ctx, target.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: st.ID,
		Content:       param.NewOpt("a concurrent edit that lost"),
		Precondition:  anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt(oldSHA)},
	})
	sdkError(t, err, http.StatusConflict, api.MemoryPreconditionFailed)
	if n := e.requests.Load() - before; n != 1 {
		t.Fatalf("the SDK retried a precondition failure (%d requests)", n)
	}
	// The same request as the one that landed, with its now stale
	// precondition: 200, and no new version.
	same, err := mems.Update(ctx, target.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: st.ID,
		Content:       param.NewOpt("- [x] ship\n"),
		Precondition:  anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt(oldSHA)},
		View:          anthropic.BetaManagedAgentsMemoryViewFull,
	})
	if err != nil {
		t.Fatalf("repeat of a landed update: %v", err)
	}
	checkMemory(t, same, true)
	if same.MemoryVersionID != upd.MemoryVersionID {
		t.Fatalf("a no-op update wrote version %s", same.MemoryVersionID)
	}
	ren, err := mems.Update(ctx, target.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Path: param.NewOpt("/archive/todo.md")})
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, ren, false)
	if ren.ID != target.ID || ren.Path != "/archive/todo.md" || ren.ContentSha256 != upd.ContentSha256 {
		t.Fatalf("rename = %s", ren.RawJSON())
	}
	_, err = mems.Update(ctx, target.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st.ID, Path: param.NewOpt("/readme.md")})
	if pc := sdkError(t, err, http.StatusConflict, api.MemoryPathConflict); pc.ConflictingMemoryID != created[3].ID {
		t.Fatalf("rename conflict names %s, want %s", pc.ConflictingMemoryID, created[3].ID)
	}

	// ---- guarded delete ----
	victim := created[4] // /people/ana.md
	_, err = mems.Delete(ctx, victim.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID, ExpectedContentSha256: param.NewOpt(testdigest.SHA256("not the content"))})
	sdkError(t, err, http.StatusConflict, api.MemoryPreconditionFailed)
	del, err := mems.Delete(ctx, victim.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID, ExpectedContentSha256: param.NewOpt(victim.ContentSha256)})
	if err != nil {
		t.Fatal(err)
	}
	fieldsPresent(t, "memory_deleted", del)
	if del.ID != victim.ID || del.Type != "memory_deleted" {
		t.Fatalf("delete = %s", del.RawJSON())
	}
	_, err = mems.Get(ctx, victim.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID})
	sdkError(t, err, http.StatusNotFound, api.NotFound)

	// ---- versions: newest first, filters, actors, redaction ----
	var history []anthropic.BetaManagedAgentsMemoryVersion
	vp := vers.ListAutoPaging(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: param.NewOpt(target.ID), Limit: param.NewOpt(int64(1))})
	for vp.Next() {
		v := vp.Current()
		checkVersion(t, &v)
		if v.JSON.Content.Valid() {
			t.Fatalf("basic version listing carries content: %s", v.RawJSON())
		}
		if by := v.CreatedBy.AsAPIActor(); by.Type != "api_actor" || by.APIKeyID != e.keyID {
			t.Fatalf("created_by = %s, want api_actor %s", v.CreatedBy.RawJSON(), e.keyID)
		}
		history = append(history, v)
	}
	if err := vp.Err(); err != nil {
		t.Fatal(err)
	}
	if len(history) != 3 || history[0].Operation != "modified" || history[0].Path != "/archive/todo.md" || history[1].Operation != "modified" || history[2].Operation != "created" {
		t.Fatalf("history of the updated memory (newest first) = %+v", history)
	}
	delPage, err := vers.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: anthropic.BetaManagedAgentsMemoryVersionOperationDeleted, APIKeyID: param.NewOpt(e.keyID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(delPage.Data) != 1 || delPage.Data[0].MemoryID != victim.ID || delPage.Data[0].JSON.ContentSha256.Valid() || delPage.Data[0].Path != "/people/ana.md" {
		t.Fatalf("deleted versions = %s", delPage.RawJSON())
	}
	checkVersion(t, &delPage.Data[0])
	window, err := vers.List(ctx, st.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{CreatedAtGte: param.NewOpt(time.Now().Add(-time.Hour)), CreatedAtLte: param.NewOpt(time.Now().Add(time.Hour)), Limit: param.NewOpt(int64(100))})
	if err != nil || len(window.Data) != 9 { // 6 creates, a content update, a rename, a delete
		t.Fatalf("versions in the last hour: %d, %v", len(window.Data), err)
	}

	oldest := history[2]
	fullV, err := vers.Get(ctx, oldest.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkVersion(t, fullV)
	if fullV.Content != content["/projects/alpha/todo.md"] {
		t.Fatalf("version content = %q", fullV.Content)
	}
	_, err = vers.Redact(ctx, history[0].ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID})
	sdkError(t, err, http.StatusBadRequest, api.InvalidRequest) // the head of a live memory
	red, err := vers.Redact(ctx, oldest.ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID})
	if err != nil {
		t.Fatal(err)
	}
	checkVersion(t, red)
	for name, f := range map[string]respjson.Field{"content": red.JSON.Content, "content_sha256": red.JSON.ContentSha256, "content_size_bytes": red.JSON.ContentSizeBytes, "path": red.JSON.Path} {
		if f.Raw() != "null" {
			t.Errorf("redacted version %s = %s, want null", name, f.Raw())
		}
	}
	if !red.JSON.RedactedAt.Valid() || red.RedactedBy.AsAPIActor().APIKeyID != e.keyID || red.Operation != "created" {
		t.Fatalf("redacted = %s", red.RawJSON())
	}
	again, err := vers.Get(ctx, oldest.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID})
	if err != nil {
		t.Fatalf("a redacted version must still be retrievable: %v", err)
	}
	checkVersion(t, again)

	// ---- archive, then delete ----
	arch, err := stores.Archive(ctx, st.ID, anthropic.BetaMemoryStoreArchiveParams{})
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, arch)
	if !arch.JSON.ArchivedAt.Valid() {
		t.Fatalf("archived store = %s", arch.RawJSON())
	}
	_, err = mems.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/late.md", Content: param.NewOpt("x")})
	sdkError(t, err, http.StatusConflict, api.Conflict)
	if _, err := mems.Get(ctx, created[0].ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: st.ID}); err != nil {
		t.Fatalf("reading an archived store: %v", err)
	}
	var names []string
	sp := stores.ListAutoPaging(ctx, anthropic.BetaMemoryStoreListParams{})
	for sp.Next() {
		names = append(names, sp.Current().Name)
	}
	if slices.Contains(names, "Team memory") {
		t.Fatalf("archived store listed by default: %v", names)
	}
	withArchived, err := stores.List(ctx, anthropic.BetaMemoryStoreListParams{IncludeArchived: param.NewOpt(true)})
	if err != nil || len(withArchived.Data) != 5 {
		t.Fatalf("include_archived: %d stores, %v", len(withArchived.Data), err)
	}
	gone, err := stores.Delete(ctx, st.ID, anthropic.BetaMemoryStoreDeleteParams{})
	if err != nil {
		t.Fatal(err)
	}
	fieldsPresent(t, "memory_store_deleted", gone)
	if gone.ID != st.ID || gone.Type != "memory_store_deleted" {
		t.Fatalf("store delete = %s", gone.RawJSON())
	}
	_, err = vers.Get(ctx, oldest.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st.ID})
	sdkError(t, err, http.StatusNotFound, api.NotFound)
}
