package client_test

// Every memory-store method of the client against the real server: the
// real handler on httptest, a real SQLite file in t.TempDir(), the admin API
// key bootstrapped as an operator would.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/internal/testserver"
)

func TestMemoryStoresAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()

	desc := "notes the agent keeps"
	s := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Team Notes", Description: &desc, Metadata: map[string]string{"team": "a", "tier": "1"}})).ok(t)
	if !strings.HasPrefix(s.ID, "memstore_") || s.Type != "memory_store" || s.Name != "Team Notes" || s.Description != desc || s.Metadata["team"] != "a" || s.ArchivedAt != nil || s.CreatedAt.IsZero() {
		t.Fatalf("created store = %+v", s)
	}
	got := must(c.GetMemoryStore(ctx, s.ID)).ok(t)
	if got.ID != s.ID || got.Name != s.Name || !got.CreatedAt.Equal(s.CreatedAt) {
		t.Errorf("GetMemoryStore = %+v, want %+v", got, s)
	}

	name := "Team Notes v2"
	upd := must(c.UpdateMemoryStore(ctx, s.ID, api.UpdateMemoryStoreRequest{Name: &name, Metadata: map[string]*string{"tier": nil, "owner": ptr("b")}})).ok(t)
	if upd.Name != name || upd.Metadata["tier"] != "" || upd.Metadata["owner"] != "b" || upd.Metadata["team"] != "a" {
		t.Errorf("UpdateMemoryStore = %+v: want renamed, tier deleted, owner added, team kept", upd)
	}

	// Two more stores, one archived, to page through.
	s2 := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "second"})).ok(t)
	s3 := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "third"})).ok(t)
	arch := must(c.ArchiveMemoryStore(ctx, s3.ID)).ok(t)
	if arch.ArchivedAt == nil {
		t.Errorf("ArchiveMemoryStore = %+v, want archived_at set", arch)
	}

	page := must(c.ListMemoryStores(ctx, client.ListMemoryStoresParams{Limit: 1, IncludeArchived: true})).ok(t)
	if len(page.Data) != 1 || page.NextPage == nil {
		t.Fatalf("first page of 1 = %+v", page)
	}
	var ids []string
	for st, err := range c.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{Limit: 1, IncludeArchived: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	slices.Sort(ids)
	want := []string{s.ID, s2.ID, s3.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("ListAllMemoryStores with archived = %v, want %v", ids, want)
	}
	ids = ids[:0]
	for st, err := range c.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	if slices.Contains(ids, s3.ID) || len(ids) != 2 {
		t.Errorf("ListAllMemoryStores without archived = %v, want the two live stores", ids)
	}
	future := must(c.ListMemoryStores(ctx, client.ListMemoryStoresParams{CreatedAtGTE: time.Now().Add(time.Hour)})).ok(t)
	past := must(c.ListMemoryStores(ctx, client.ListMemoryStoresParams{CreatedAtLTE: time.Now().Add(time.Hour)})).ok(t)
	if len(future.Data) != 0 || len(past.Data) != 2 {
		t.Errorf("created_at filters: gte future = %d stores, lte future = %d, want 0 and 2", len(future.Data), len(past.Data))
	}

	// An archived store refuses writes and keeps nothing of them.
	_, err := c.CreateMemory(ctx, s3.ID, api.CreateMemoryRequest{Path: "/x.md", Content: "x"})
	wantAPIError(t, err, 409, api.Conflict)
	if l := must(c.ListMemories(ctx, s3.ID, client.ListMemoriesParams{})).ok(t); len(l.Data) != 0 {
		t.Errorf("archived store holds %d memories after a refused write", len(l.Data))
	}

	del := must(c.DeleteMemoryStore(ctx, s2.ID)).ok(t)
	if del.ID != s2.ID || del.Type != "memory_store_deleted" {
		t.Errorf("DeleteMemoryStore = %+v", del)
	}
	_, err = c.GetMemoryStore(ctx, s2.ID)
	wantAPIError(t, err, 404, api.NotFound)
}

func TestMemoriesAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()
	store := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "mem"})).ok(t)

	// Paths with characters that need care in a URL travel in the body and
	// the path_prefix query.
	paths := []string{"/a b/one?.md", "/a b/sub/two#.md", "/a b/sub/deep/three%.md", "/readme.md", "/zeta/ü.md"}
	mems := map[string]*api.Memory{}
	for i, p := range paths {
		content := strings.Repeat("x", i) + p
		m := must(c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: p, Content: content})).ok(t)
		if !strings.HasPrefix(m.ID, "mem_") || m.Path != p || m.MemoryStoreID != store.ID || m.ContentSHA256 != testdigest.SHA256(content) || m.ContentSizeBytes != int64(len(content)) || !strings.HasPrefix(m.MemoryVersionID, "memver_") {
			t.Fatalf("CreateMemory(%q) = %+v", p, m)
		}
		mems[p] = m
	}

	// Create never overwrites.
	_, err := c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/readme.md", Content: "other"})
	wantAPIError(t, err, 409, api.MemoryPathConflict)
	var ae *api.Error
	errors.As(err, &ae)
	if ae.ConflictingMemoryID != mems["/readme.md"].ID || ae.ConflictingPath != "/readme.md" {
		t.Errorf("path conflict names %q %q, want the occupant", ae.ConflictingMemoryID, ae.ConflictingPath)
	}

	// Get: full by default, basic without content.
	readme := mems["/readme.md"]
	full := must(c.GetMemory(ctx, store.ID, readme.ID, client.GetMemoryParams{})).ok(t)
	if full.Content == nil || testdigest.SHA256(*full.Content) != readme.ContentSHA256 {
		t.Errorf("GetMemory default view = %+v, want content", full)
	}
	basic := must(c.GetMemory(ctx, store.ID, readme.ID, client.GetMemoryParams{View: api.ViewBasic})).ok(t)
	if basic.Content != nil || basic.ContentSHA256 != readme.ContentSHA256 {
		t.Errorf("GetMemory basic = %+v, want no content, same hash", basic)
	}

	// Listings: the whole store in path order, paged; a folder; one level.
	var listed []string
	for it, err := range c.ListAllMemories(ctx, store.ID, client.ListMemoriesParams{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if it.Memory == nil || it.Memory.Content != nil {
			t.Fatalf("basic listing item = %+v", it)
		}
		listed = append(listed, it.Memory.Path)
	}
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	if !slices.Equal(listed, sorted) {
		t.Errorf("ListAllMemories = %v, want %v", listed, sorted)
	}
	var withContent int
	for it, err := range c.ListAllMemories(ctx, store.ID, client.ListMemoriesParams{View: api.ViewFull, PathPrefix: "/a b/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if it.Memory == nil || it.Memory.Content == nil || !strings.HasPrefix(it.Memory.Path, "/a b/") {
			t.Fatalf("full listing under /a b/ = %+v", it)
		}
		withContent++
	}
	if withContent != 3 {
		t.Errorf("full listing under /a b/ = %d memories, want 3", withContent)
	}
	lvl := must(c.ListMemories(ctx, store.ID, client.ListMemoriesParams{PathPrefix: "/a b/", Depth: 1})).ok(t)
	var shape []string
	for _, it := range lvl.Data {
		if it.Prefix != nil {
			shape = append(shape, "prefix "+it.Prefix.Path)
		} else {
			shape = append(shape, "memory "+it.Memory.Path)
		}
	}
	if want := []string{"memory /a b/one?.md", "prefix /a b/sub/"}; !slices.Equal(shape, want) {
		t.Errorf("depth-1 listing = %v, want %v", shape, want)
	}

	// Update with a matching precondition writes a version; a stale one is
	// refused and changes nothing; a stale one asking for what is already
	// stored succeeds without a new version.
	v1 := "version one"
	up := must(c.UpdateMemory(ctx, store.ID, readme.ID, api.UpdateMemoryRequest{Content: &v1, Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: readme.ContentSHA256}})).ok(t)
	if up.ContentSHA256 != testdigest.SHA256(v1) || up.MemoryVersionID == readme.MemoryVersionID || up.ID != readme.ID {
		t.Fatalf("guarded update = %+v", up)
	}
	stale := "lost edit"
	_, err = c.UpdateMemory(ctx, store.ID, readme.ID, api.UpdateMemoryRequest{Content: &stale, Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: readme.ContentSHA256}})
	wantAPIError(t, err, 409, api.MemoryPreconditionFailed)
	same := must(c.UpdateMemory(ctx, store.ID, readme.ID, api.UpdateMemoryRequest{Content: &v1, Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: readme.ContentSHA256}})).ok(t)
	if same.MemoryVersionID != up.MemoryVersionID {
		t.Errorf("a repeat of a landed update wrote version %s after %s", same.MemoryVersionID, up.MemoryVersionID)
	}
	if now := must(c.GetMemory(ctx, store.ID, readme.ID, client.GetMemoryParams{})).ok(t); *now.Content != v1 {
		t.Errorf("content after a refused update = %q, want %q", *now.Content, v1)
	}

	// Rename keeps the id.
	newPath := "/docs/readme.md"
	ren := must(c.UpdateMemory(ctx, store.ID, readme.ID, api.UpdateMemoryRequest{Path: &newPath})).ok(t)
	if ren.ID != readme.ID || ren.Path != newPath || ren.ContentSHA256 != testdigest.SHA256(v1) {
		t.Errorf("rename = %+v", ren)
	}

	// Delete is guarded by the content hash.
	_, err = c.DeleteMemory(ctx, store.ID, readme.ID, client.DeleteMemoryParams{ExpectedContentSHA256: readme.ContentSHA256})
	wantAPIError(t, err, 409, api.MemoryPreconditionFailed)
	must(c.GetMemory(ctx, store.ID, readme.ID, client.GetMemoryParams{})).ok(t)
	d := must(c.DeleteMemory(ctx, store.ID, readme.ID, client.DeleteMemoryParams{ExpectedContentSHA256: testdigest.SHA256(v1)})).ok(t)
	if d.ID != readme.ID || d.Type != "memory_deleted" {
		t.Errorf("DeleteMemory = %+v", d)
	}
	_, err = c.GetMemory(ctx, store.ID, readme.ID, client.GetMemoryParams{})
	wantAPIError(t, err, 404, api.NotFound)
	other := mems["/zeta/ü.md"]
	must(c.DeleteMemory(ctx, store.ID, other.ID, client.DeleteMemoryParams{})).ok(t)

	// Versions: newest first, filtered, attributed to the API key.
	var ops []string
	for v, err := range c.ListAllMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{MemoryID: readme.ID, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.MemoryID != readme.ID || v.CreatedBy.Type != api.APIActor || v.CreatedBy.APIKeyID == "" {
			t.Errorf("version = %+v", v)
		}
		ops = append(ops, v.Operation)
	}
	if want := []string{api.OperationDeleted, api.OperationModified, api.OperationModified, api.OperationCreated}; !slices.Equal(ops, want) {
		t.Errorf("versions of readme, newest first = %v, want %v", ops, want)
	}
	deletes := must(c.ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{Operation: api.OperationDeleted})).ok(t)
	if len(deletes.Data) != 2 {
		t.Errorf("operation=deleted lists %d versions, want 2", len(deletes.Data))
	}
	none := must(c.ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{SessionID: "sesn_nobody"})).ok(t)
	if len(none.Data) != 0 {
		t.Errorf("session_id filter for an unknown session lists %d versions", len(none.Data))
	}
	created := must(c.ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{Operation: api.OperationCreated, View: api.ViewFull, Limit: 20})).ok(t)
	if len(created.Data) != len(paths) || created.Data[0].Content == nil {
		t.Errorf("created versions, full view = %d (first %+v), want %d with content", len(created.Data), created.Data[0], len(paths))
	}

	// Redaction: an old version loses its content and path but stays; the
	// head of a live memory cannot be redacted.
	first := mems["/a b/one?.md"]
	content2 := "second"
	must(c.UpdateMemory(ctx, store.ID, first.ID, api.UpdateMemoryRequest{Content: &content2})).ok(t)
	red := must(c.RedactMemoryVersion(ctx, store.ID, first.MemoryVersionID)).ok(t)
	if red.ID != first.MemoryVersionID || red.RedactedAt == nil || red.RedactedBy == nil || red.Content != nil || red.ContentSHA256 != nil || red.Path != nil || red.Operation != api.OperationCreated {
		t.Errorf("redacted version = %+v", red)
	}
	again := must(c.GetMemoryVersion(ctx, store.ID, first.MemoryVersionID)).ok(t)
	if again.RedactedAt == nil || again.Content != nil {
		t.Errorf("GetMemoryVersion after redaction = %+v", again)
	}
	head := must(c.GetMemory(ctx, store.ID, first.ID, client.GetMemoryParams{})).ok(t)
	_, err = c.RedactMemoryVersion(ctx, store.ID, head.MemoryVersionID)
	wantAPIError(t, err, 400, api.InvalidRequest)
	if v := must(c.GetMemoryVersion(ctx, store.ID, head.MemoryVersionID)).ok(t); v.Content == nil || *v.Content != content2 {
		t.Errorf("head version after a refused redaction = %+v", v)
	}
}

func TestRefusalsAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()

	_, err := c.With(client.WithAPIKey("sk-wrong")).GetMemoryStore(ctx, "memstore_x")
	wantAPIError(t, err, 401, api.Authentication)
	_, err = c.With(client.WithBearerToken(testserver.DefaultAdminKey)).ListMemoryStores(ctx, client.ListMemoryStoresParams{})
	if err != nil {
		t.Errorf("the API key as a bearer token: %v", err)
	}

	_, err = c.GetMemoryStore(ctx, "memstore_doesnotexist")
	wantAPIError(t, err, 404, api.NotFound)

	store := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "limits"})).ok(t)
	_, err = c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "relative.md", Content: "x"})
	wantAPIError(t, err, 400, api.InvalidRequest)
	_, err = c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/big.md", Content: strings.Repeat("x", api.MaxContentBytes+1)})
	wantAPIError(t, err, 413, api.RequestTooLarge)
	if l := must(c.ListMemories(ctx, store.ID, client.ListMemoriesParams{})).ok(t); len(l.Data) != 0 {
		t.Errorf("refused creates left %d memories", len(l.Data))
	}
	if st := c.Stats(); st.Requests == 0 || st.BytesSent < api.MaxContentBytes || st.BytesReceived == 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestLostResponseOfGuardedUpdate proves the retry rule end to end: the
// server applies a guarded update, the response is lost on the way back,
// the client repeats it, and the store holds exactly one new version.
func TestLostResponseOfGuardedUpdate(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()
	store := must(c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "lossy"})).ok(t)
	m := must(c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/n.md", Content: "v0"})).ok(t)

	var dropped atomic.Int32
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/memories/") && dropped.Add(1) == 1 {
				next.ServeHTTP(httptest.NewRecorder(), r) // applied, answer discarded
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	rs.Wrap(wrap)

	v1 := "v1"
	got := must(c.UpdateMemory(ctx, store.ID, m.ID, api.UpdateMemoryRequest{Content: &v1, Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: m.ContentSHA256}})).ok(t)
	if got.ContentSHA256 != testdigest.SHA256(v1) || dropped.Load() != 2 {
		t.Fatalf("update = %+v after %d attempts", got, dropped.Load())
	}
	vs := must(c.ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{MemoryID: m.ID})).ok(t)
	if len(vs.Data) != 2 || vs.Data[0].Operation != api.OperationModified {
		t.Errorf("versions = %d, want created + one modified", len(vs.Data))
	}

	// Without a guard the same loss is reported, not repeated.
	dropped.Store(0)
	v2 := "v2"
	_, err := c.UpdateMemory(ctx, store.ID, m.ID, api.UpdateMemoryRequest{Content: &v2})
	if err == nil || dropped.Load() != 1 {
		t.Errorf("unguarded update: err = %v after %d attempts, want the transport error once", err, dropped.Load())
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		t.Errorf("err = %v, want a transport error", err)
	}
}

// TestSessionsTokenReachesOnlyItsStores drives the memory API the way a
// worker does: the sessions token from a claimed item's secret reads both
// attached stores, writes only the read_write one (as the session), and
// stops working once the item is stopped; the environment key never
// reaches memory.
func TestSessionsTokenReachesOnlyItsStores(t *testing.T) {
	rs := startServer(t)
	admin := adminClient(t, rs)
	ctx := context.Background()

	rw := must(admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Project Notes"})).ok(t)
	ro := must(admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Policies"})).ok(t)
	unattached := must(admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "elsewhere"})).ok(t)
	policy := must(admin.CreateMemory(ctx, ro.ID, api.CreateMemoryRequest{Path: "/rules.md", Content: "be kind"})).ok(t)

	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	env, agent := ws.Env, ws.Agent
	sess := must(admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent:         api.AgentRef{ID: agent.ID},
		EnvironmentID: env.ID,
		Resources: []api.SessionResourceParams{
			{Type: api.ResourceMemoryStore, MemoryStoreID: rw.ID},
			{Type: api.ResourceMemoryStore, MemoryStoreID: ro.ID, Access: api.AccessReadOnly},
		},
	})).ok(t)
	if len(sess.Resources) != 2 || !strings.HasSuffix(sess.Resources[0].MountPath, "/project-notes") || sess.Resources[1].Access != api.AccessReadOnly {
		t.Fatalf("session resources = %+v", sess.Resources)
	}

	worker := admin.With(client.WithBearerToken(ws.Key))
	_, err := worker.ListMemories(ctx, rw.ID, client.ListMemoriesParams{})
	wantAPIError(t, err, 403, api.Permission)

	w := must(worker.PollWork(ctx, env.ID, api.WorkPollParams{BlockMS: 50})).ok(t)
	if w == nil {
		t.Fatal("no work item for the session")
	}
	secret, err := api.DecodeWorkSecret(*w.Secret)
	if err != nil {
		t.Fatal(err)
	}
	item := worker.With(client.WithBearerToken(secret.SessionsToken))

	var paths []string
	for it, err := range item.ListAllMemories(ctx, ro.ID, client.ListMemoriesParams{View: api.ViewFull}) {
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, it.Memory.Path+"="+*it.Memory.Content)
	}
	if !slices.Equal(paths, []string{"/rules.md=be kind"}) {
		t.Errorf("read-only store through the token = %v", paths)
	}
	changed := "be unkind"
	_, err = item.UpdateMemory(ctx, ro.ID, policy.ID, api.UpdateMemoryRequest{Content: &changed})
	wantAPIError(t, err, 403, api.Permission)
	if m := must(admin.GetMemory(ctx, ro.ID, policy.ID, client.GetMemoryParams{})).ok(t); *m.Content != "be kind" {
		t.Errorf("read-only memory changed to %q", *m.Content)
	}
	_, err = item.ListMemories(ctx, unattached.ID, client.ListMemoriesParams{})
	wantAPIError(t, err, 403, api.Permission)

	note := must(item.CreateMemory(ctx, rw.ID, api.CreateMemoryRequest{Path: "/todo.md", Content: "ship"})).ok(t)
	vs := must(admin.ListMemoryVersions(ctx, rw.ID, client.ListMemoryVersionsParams{SessionID: sess.ID})).ok(t)
	if len(vs.Data) != 1 || vs.Data[0].MemoryID != note.ID || vs.Data[0].CreatedBy.Type != api.SessionActor || vs.Data[0].CreatedBy.SessionID != sess.ID {
		t.Errorf("versions by the session = %+v", vs.Data)
	}

	if err := item.StopWork(ctx, env.ID, w.ID, api.StopWorkRequest{Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err = item.GetMemory(ctx, rw.ID, note.ID, client.GetMemoryParams{})
	wantAPIError(t, err, 403, api.Permission)
}
