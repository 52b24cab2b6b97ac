package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// recoveryFixture is an environment with its key, a session on it with a
// store attached read_write and one read_only, and the id of the
// session's work item.
type recoveryFixture struct {
	*cpEnv
	env, key       string
	rw, ro, loose  api.MemoryStore
	sess           api.Session
	workID         string
	otherEnvKey    string
	recoveriesPath string
}

func newRecoveryFixture(t *testing.T) *recoveryFixture {
	e := newCPEnv(t)
	f := &recoveryFixture{cpEnv: e}
	env := e.environment("fleet")
	f.env, f.key = env.ID, e.envKey(env.ID)
	f.otherEnvKey = e.envKey(e.environment("other").ID)
	for name, st := range map[string]*api.MemoryStore{"notes": &f.rw, "manual": &f.ro, "loose": &f.loose} {
		e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]string{"name": name}, st)
	}
	f.sess = e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": []map[string]string{
		{"type": "memory_store", "memory_store_id": f.rw.ID, "access": "read_write"},
		{"type": "memory_store", "memory_store_id": f.ro.ID, "access": "read_only"},
	}})
	var list api.Page[api.Work]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, &list)
	f.workID = list.Data[0].ID
	f.recoveriesPath = "/v1/environments/" + env.ID + "/recoveries"
	return f
}

// contents maps each memory of a store to its content.
func (f *recoveryFixture) contents(storeID string) map[string]string {
	f.t.Helper()
	var page api.Page[api.MemoryListItem]
	f.must(200, "GET", "/v1/memory_stores/"+storeID+"/memories?view=full&limit=100", f.apiKey, nil, &page)
	out := map[string]string{}
	for _, it := range page.Data {
		out[it.Memory.Path] = *it.Memory.Content
	}
	return out
}

func (f *recoveryFixture) recovery(path, content string, base *string) api.RecoveryRequest {
	return api.RecoveryRequest{SessionID: f.sess.ID, MemoryStoreID: f.rw.ID, Path: path, Content: content, BaseContentSHA256: base}
}

func sha(s string) *string { h := storage.ContentHash(s); return &h }

// Every refusal says what was wrong, and stores nothing: a session whose
// work item is queued or leased, another environment's key, a sessions
// token, a store attached read_only or not at all, an unknown session, a
// malformed base.
func TestRecoveryRefusalsStoreNothing(t *testing.T) {
	f := newRecoveryFixture(t)
	ok := f.recovery("/draft.md", "mine", nil)
	refuse := func(what, cred string, req any, status int, typ api.ErrorType, says string) {
		t.Helper()
		r := f.call("POST", f.recoveriesPath, cred, req)
		if r.status != status || r.errType() != string(typ) || !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %d %s, want %d %s saying %q", what, r.status, r.body, status, typ, says)
		}
		for _, st := range []api.MemoryStore{f.rw, f.ro, f.loose} {
			if got := f.contents(st.ID); len(got) != 0 {
				t.Errorf("%s stored %v in %s", what, got, st.Name)
			}
		}
	}
	refuse("queued item", f.key, ok, 409, api.Conflict, "is queued")
	w, sec := f.poll(f.env, f.key, "host-b")
	if w == nil || w.ID != f.workID {
		t.Fatalf("claimed %+v, want %s", w, f.workID)
	}
	refuse("leased item", f.key, ok, 409, api.Conflict, "is held by worker")
	f.must(204, "POST", "/v1/environments/"+f.env+"/work/"+f.workID+"/stop", f.apiKey, map[string]bool{"force": true}, nil)

	refuse("another environment's key", f.otherEnvKey, ok, 403, api.Permission, "belongs to environment")
	refuse("a sessions token", sec.SessionsToken, ok, 403, api.Permission, "use the environment key")
	ro := ok
	ro.MemoryStoreID = f.ro.ID
	refuse("read_only store", f.key, ro, 403, api.Permission, "read_only")
	loose := ok
	loose.MemoryStoreID = f.loose.ID
	refuse("store not attached", f.key, loose, 403, api.Permission, "is not attached to session")
	unknown := ok
	unknown.SessionID = ids.New(ids.Session)
	refuse("unknown session", f.key, unknown, 404, api.NotFound, "no session")
	refuse("malformed base", f.key, f.recovery("/draft.md", "mine", new(string)), 400, api.InvalidRequest, "base_content_sha256")
	refuse("bad path", f.key, f.recovery("draft.md", "mine", nil), 400, api.InvalidRequest, "path")
	refuse("no body", f.key, nil, 400, api.InvalidRequest, "")
}

// Once the session's item has stopped, each file lands by the rules of a
// sync: a new file is created, an edit of an unchanged memory is a new
// version, and where the server changed (or deleted, or created the path)
// since the folder's base the server's memory stays and the file becomes
// a conflicted copy; every write is the session's, and trying again
// writes nothing more.
func TestRecoveryWritesByTheJournalsBase(t *testing.T) {
	f := newRecoveryFixture(t)
	var env api.Environment
	r := f.must(200, "GET", "/v1/environments/"+f.env, f.key, nil, &env)
	if !strings.Contains(r.header.Get(api.ExtensionsHeader), api.ExtensionRecoveries) {
		t.Fatalf("GET the environment: %s = %q, want it to offer %q", api.ExtensionsHeader, r.header.Get(api.ExtensionsHeader), api.ExtensionRecoveries)
	}
	f.must(204, "POST", "/v1/environments/"+f.env+"/work/"+f.workID+"/stop", f.apiKey, map[string]bool{"force": true}, nil)
	ids := map[string]string{}
	for p, c := range map[string]string{"/edited.md": "v1", "/changed.md": "v1", "/deleted.md": "v1", "/both.md": "theirs"} {
		var m api.Memory
		f.must(200, "POST", "/v1/memory_stores/"+f.rw.ID+"/memories", f.apiKey, map[string]string{"path": p, "content": c}, &m)
		ids[p] = m.ID
	}
	f.must(200, "POST", "/v1/memory_stores/"+f.rw.ID+"/memories/"+ids["/changed.md"], f.apiKey, map[string]string{"content": "server"}, nil)
	f.must(200, "DELETE", "/v1/memory_stores/"+f.rw.ID+"/memories/"+ids["/deleted.md"], f.apiKey, nil, nil)

	copyOf := func(p, c string) string { return app.ConflictCopyPath(p, f.sess.ID, *sha(c)) }
	cases := []struct {
		req     api.RecoveryRequest
		outcome string
		at      string
	}{
		{f.recovery("/new.md", "fresh", nil), api.RecoveryCreated, "/new.md"},
		{f.recovery("/edited.md", "v2", sha("v1")), api.RecoveryUpdated, "/edited.md"},
		{f.recovery("/changed.md", "mine", sha("v1")), api.RecoveryConflictCopy, copyOf("/changed.md", "mine")},
		{f.recovery("/deleted.md", "mine", sha("v1")), api.RecoveryConflictCopy, copyOf("/deleted.md", "mine")},
		{f.recovery("/both.md", "mine", nil), api.RecoveryConflictCopy, copyOf("/both.md", "mine")},
		{f.recovery("/both.md", "theirs", nil), api.RecoveryUnchanged, "/both.md"},
	}
	for round := range 2 {
		for _, c := range cases {
			want := c.outcome
			if round == 1 {
				want = api.RecoveryUnchanged
			}
			var got api.Recovery
			f.must(200, "POST", f.recoveriesPath, f.key, c.req, &got)
			if got.Type != "memory_recovery" || got.Outcome != want || got.Memory.Path != c.at || got.Memory.Content != nil {
				t.Errorf("round %d, %s: %+v, want %s at %s", round, c.req.Path, got, want, c.at)
			}
		}
	}
	want := map[string]string{"/new.md": "fresh", "/edited.md": "v2", "/changed.md": "server", "/both.md": "theirs",
		copyOf("/changed.md", "mine"): "mine", copyOf("/deleted.md", "mine"): "mine", copyOf("/both.md", "mine"): "mine"}
	if got := f.contents(f.rw.ID); !maps.Equal(got, want) {
		t.Errorf("store = %v\nwant    %v", got, want)
	}
	if p := copyOf("/changed.md", "mine"); !strings.HasPrefix(p, "/changed.md"+api.ConflictCopyMarker) {
		t.Errorf("conflicted copy %s is not named after its file", p)
	}
	// Written as the session: its history says who.
	var versions api.Page[api.MemoryVersion]
	f.must(200, "GET", "/v1/memory_stores/"+f.rw.ID+"/memory_versions?limit=100", f.apiKey, nil, &versions)
	var bySession []string
	for _, v := range versions.Data {
		if v.CreatedBy.Type == api.SessionActor && v.CreatedBy.SessionID == f.sess.ID {
			bySession = append(bySession, *v.Path)
		}
	}
	slices.Sort(bySession)
	wantBy := []string{copyOf("/both.md", "mine"), copyOf("/changed.md", "mine"), copyOf("/deleted.md", "mine"), "/edited.md", "/new.md"}
	slices.Sort(wantBy)
	if fmt.Sprint(bySession) != fmt.Sprint(wantBy) {
		t.Errorf("versions by the session = %v, want %v", bySession, wantBy)
	}
}
