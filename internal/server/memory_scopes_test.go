package server

import (
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// A sessions token on the memory endpoints (SPEC §6): it reaches the stores
// attached to its session, writes only where the attachment is read_write,
// is attributed to the session, cannot manage stores or redact, and stops
// working once its work item is stopped. Every refusal changes nothing.
func TestMemoryEndpointsWithASessionsToken(t *testing.T) {
	e := newCPEnv(t)
	key := e.apiKey
	var rw, ro, other api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "shared notes"}, &rw)
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "handbook"}, &ro)
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "someone else's"}, &other)
	var rwDoc, roDoc, otherDoc api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+rw.ID+"/memories", key, api.CreateMemoryRequest{Path: "/doc.md", Content: "rw"}, &rwDoc)
	e.must(200, "POST", "/v1/memory_stores/"+ro.ID+"/memories", key, api.CreateMemoryRequest{Path: "/rules.md", Content: "ro"}, &roDoc)
	e.must(200, "POST", "/v1/memory_stores/"+other.ID+"/memories", key, api.CreateMemoryRequest{Path: "/private.md", Content: "no"}, &otherDoc)

	env := e.environment("env")
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": []any{
		map[string]any{"type": "memory_store", "memory_store_id": rw.ID, "access": "read_write"},
		map[string]any{"type": "memory_store", "memory_store_id": ro.ID, "access": "read_only"},
	}})
	work, secret := e.poll(env.ID, e.envKey(env.ID), "worker-1")
	if work == nil || secret.SessionsToken == "" {
		t.Fatalf("no work or no sessions token: %+v %+v", work, secret)
	}
	tok := secret.SessionsToken

	// Reads of both attached stores, writes to the read_write one.
	var page api.Page[api.MemoryListItem]
	e.must(200, "GET", "/v1/memory_stores/"+rw.ID+"/memories", tok, nil, &page)
	e.must(200, "GET", "/v1/memory_stores/"+ro.ID+"/memories/"+roDoc.ID, tok, nil, nil)
	e.must(200, "GET", "/v1/memory_stores/"+ro.ID+"/memory_versions", tok, nil, nil)
	e.must(200, "GET", "/v1/memory_stores/"+ro.ID+"/changes", tok, nil, nil)
	e.must(200, "GET", "/v1/memory_stores/"+ro.ID+"/snapshot", tok, nil, nil)
	var made api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+rw.ID+"/memories", tok, api.CreateMemoryRequest{Path: "/by-agent.md", Content: "hello"}, &made)
	e.must(200, "POST", "/v1/memory_stores/"+rw.ID+"/memories/"+rwDoc.ID, tok, map[string]any{"content": "rw, edited"}, nil)
	var v api.MemoryVersion
	e.must(200, "GET", "/v1/memory_stores/"+rw.ID+"/memory_versions/"+made.MemoryVersionID, key, nil, &v)
	if v.CreatedBy != (api.Actor{Type: api.SessionActor, SessionID: sess.ID}) {
		t.Fatalf("a write with the sessions token is attributed to %+v, want session %s", v.CreatedBy, sess.ID)
	}
	var bySession api.Page[api.MemoryVersion]
	e.must(200, "GET", "/v1/memory_stores/"+rw.ID+"/memory_versions?session_id="+sess.ID, key, nil, &bySession)
	if len(bySession.Data) != 2 {
		t.Fatalf("versions by the session: %d, want 2", len(bySession.Data))
	}

	type refusal struct {
		name, method, path string
		body               any
	}
	refusals := []refusal{
		{"create in read_only store", "POST", "/v1/memory_stores/" + ro.ID + "/memories", api.CreateMemoryRequest{Path: "/x", Content: "x"}},
		{"update in read_only store", "POST", "/v1/memory_stores/" + ro.ID + "/memories/" + roDoc.ID, map[string]any{"content": "changed"}},
		{"delete in read_only store", "DELETE", "/v1/memory_stores/" + ro.ID + "/memories/" + roDoc.ID, nil},
		{"read an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/memories/" + otherDoc.ID, nil},
		{"list an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/memories", nil},
		{"follow an unattached store's changes", "GET", "/v1/memory_stores/" + other.ID + "/changes", nil},
		{"snapshot an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/snapshot", nil},
		{"write an unattached store", "POST", "/v1/memory_stores/" + other.ID + "/memories", api.CreateMemoryRequest{Path: "/x", Content: "x"}},
		{"list stores", "GET", "/v1/memory_stores", nil},
		{"create a store", "POST", "/v1/memory_stores", map[string]any{"name": "mine"}},
		{"rename an attached store", "POST", "/v1/memory_stores/" + rw.ID, map[string]any{"name": "renamed"}},
		{"archive an attached store", "POST", "/v1/memory_stores/" + rw.ID + "/archive", nil},
		{"delete an attached store", "DELETE", "/v1/memory_stores/" + rw.ID, nil},
		{"redact in an attached store", "POST", "/v1/memory_stores/" + rw.ID + "/memory_versions/" + rwDoc.MemoryVersionID + "/redact", nil},
	}
	check := func(when string) {
		for _, c := range refusals {
			before := memorySnapshot(t, e)
			r := e.call(c.method, c.path, tok, c.body)
			if r.status != 403 || r.errType() != string(api.Permission) {
				t.Errorf("%s %s: %d %s, want 403 permission_error", when, c.name, r.status, r.body)
			}
			if memorySnapshot(t, e) != before {
				t.Errorf("%s %s: a refused request changed storage", when, c.name)
			}
		}
	}
	check("while running:")

	// Once the work item is stopped the token no longer works at all.
	e.must(204, "POST", "/v1/environments/"+env.ID+"/work/"+work.ID+"/stop", key, map[string]any{"force": true}, nil)
	refusals = append(refusals,
		refusal{"read after stop", "GET", "/v1/memory_stores/" + rw.ID + "/memories", nil},
		refusal{"write after stop", "POST", "/v1/memory_stores/" + rw.ID + "/memories", api.CreateMemoryRequest{Path: "/late", Content: "x"}})
	check("after stop:")
}

// memorySnapshot reads every store, memory and version through the API.
func memorySnapshot(t *testing.T, e *cpEnv) string {
	t.Helper()
	var stores api.Page[api.MemoryStore]
	r := e.must(200, "GET", "/v1/memory_stores?include_archived=true&limit=100", e.apiKey, nil, &stores)
	out := string(r.body)
	for _, st := range stores.Data {
		out += string(e.must(200, "GET", "/v1/memory_stores/"+st.ID+"/memories?view=full&limit=20", e.apiKey, nil, nil).body)
		out += string(e.must(200, "GET", "/v1/memory_stores/"+st.ID+"/memory_versions?view=full&limit=20", e.apiKey, nil, nil).body)
	}
	return out
}

// SPEC §6: a sessions token keeps its stores after session.status_terminated,
// because the worker's final sync and flush run after it (still writing
// only where the attachment is read_write), and stops working on them once
// the session is deleted, changing nothing.
func TestSessionsTokenKeepsItsStoresAfterTerminationUntilTheSessionIsDeleted(t *testing.T) {
	e := newCPEnv(t)
	key := e.apiKey
	var rw, ro api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "notes"}, &rw)
	e.must(200, "POST", "/v1/memory_stores", key, map[string]any{"name": "rules"}, &ro)
	var roDoc api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+ro.ID+"/memories", key, api.CreateMemoryRequest{Path: "/rules.md", Content: "ro"}, &roDoc)
	env := e.environment("env")
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{
		"resources": []any{
			map[string]any{"type": "memory_store", "memory_store_id": rw.ID},
			map[string]any{"type": "memory_store", "memory_store_id": ro.ID, "access": "read_only"},
		},
		"initial_events": []any{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}],"end":"terminate"}`)},
	})
	work, secret := e.poll(env.ID, e.envKey(env.ID), "worker-1")
	tok := secret.SessionsToken
	evs := e.events(sess.ID)
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", tok, api.SendEventsRequest{Events: []api.Event{api.UserToolResult(evs[2].ID, "", false)}}, nil)
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+sess.ID, key, nil, &got)
	if got.Status != api.SessionTerminated {
		t.Fatalf("status = %s, want terminated", got.Status)
	}

	// The final sync: the item is not stopped yet, so the token still reads
	// and writes, as the session.
	var flushed api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+rw.ID+"/memories", tok, api.CreateMemoryRequest{Path: "/late-edit.md", Content: "saved by the final sync"}, &flushed)
	e.must(200, "POST", "/v1/memory_stores/"+rw.ID+"/memories/"+flushed.ID, tok, map[string]any{"content": "flushed"}, nil)
	e.must(200, "GET", "/v1/memory_stores/"+ro.ID+"/memories", tok, nil, nil)
	var v api.MemoryVersion
	e.must(200, "GET", "/v1/memory_stores/"+rw.ID+"/memory_versions/"+flushed.MemoryVersionID, key, nil, &v)
	if v.CreatedBy != (api.Actor{Type: api.SessionActor, SessionID: sess.ID}) {
		t.Fatalf("the final sync's write is attributed to %+v", v.CreatedBy)
	}
	before := memorySnapshot(t, e)
	if r := e.call("POST", "/v1/memory_stores/"+ro.ID+"/memories/"+roDoc.ID, tok, map[string]any{"content": "changed"}); r.status != 403 || r.errType() != string(api.Permission) {
		t.Fatalf("write to the read_only store after termination: %d %s", r.status, r.body)
	}
	if memorySnapshot(t, e) != before {
		t.Fatal("a refused write changed storage")
	}

	// Deleting the session revokes the token on the memory endpoints too.
	e.must(200, "DELETE", "/v1/sessions/"+sess.ID, key, nil, nil)
	if w := e.work(env.ID, work.ID); w.State != api.WorkStopped {
		t.Fatalf("the deleted session's item is %s", w.State)
	}
	before = memorySnapshot(t, e)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/memory_stores/" + rw.ID + "/memories", nil},
		{"GET", "/v1/memory_stores/" + rw.ID + "/memories/" + flushed.ID, nil},
		{"POST", "/v1/memory_stores/" + rw.ID + "/memories", api.CreateMemoryRequest{Path: "/after-delete.md", Content: "x"}},
		{"POST", "/v1/memory_stores/" + rw.ID + "/memories/" + flushed.ID, map[string]any{"content": "after delete"}},
		{"DELETE", "/v1/memory_stores/" + rw.ID + "/memories/" + flushed.ID, nil},
	} {
		if r := e.call(c.method, c.path, tok, c.body); r.status != 401 || r.errType() != string(api.Authentication) {
			t.Errorf("%s %s with the deleted session's token: %d %s, want 401", c.method, c.path, r.status, r.body)
		}
	}
	if memorySnapshot(t, e) != before {
		t.Fatal("a refused request changed storage")
	}
}

// The memory endpoints check a request in a fixed order: the URL's ids,
// then the caller's access, then the view. So a sessions token that sends a
// mistyped id is told about the id (404), even for a store it may not reach,
// and a bad view on a store it may not reach is a 403, not a hint about the
// store.
func TestMemoryEndpointsCheckIDsThenAccessThenView(t *testing.T) {
	e := newCPEnv(t)
	var mine, other api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "mine"}, &mine)
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "not attached"}, &other)
	env := e.environment("env")
	e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": []any{
		map[string]any{"type": "memory_store", "memory_store_id": mine.ID, "access": "read_only"},
	}})
	_, secret := e.poll(env.ID, e.envKey(env.ID), "worker-1")
	tok := secret.SessionsToken

	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		errType            api.ErrorType
		says               string
	}{
		{"malformed store id", "GET", "/v1/memory_stores/mem_01/memories", nil, 404, api.NotFound, `"mem_01" is a memory id, not a memory store id`},
		{"malformed memory id in an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/memories/memver_01", nil, 404, api.NotFound, `"memver_01" is a memory version id, not a memory id`},
		{"malformed version id in an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/memory_versions/mem_01", nil, 404, api.NotFound, `"mem_01" is a memory id, not a memory version id`},
		{"malformed memory id on a write to a read_only store", "DELETE", "/v1/memory_stores/" + mine.ID + "/memories/x", nil, 404, api.NotFound, `memory "x" not found`},
		{"bad view in an unattached store", "GET", "/v1/memory_stores/" + other.ID + "/memories?view=everything", nil, 403, api.Permission, "not attached"},
		{"bad view on a write to a read_only store", "POST", "/v1/memory_stores/" + mine.ID + "/memories?view=everything", api.CreateMemoryRequest{Path: "/x", Content: "x"}, 403, api.Permission, "read_only"},
		{"bad view where access is granted", "GET", "/v1/memory_stores/" + mine.ID + "/memories?view=everything", nil, 400, api.InvalidRequest, `view: "everything" is not a view`},
	} {
		r := e.call(c.method, c.path, tok, c.body)
		var got api.ErrorEnvelope
		r.decode(t, &got)
		if r.status != c.status || r.errType() != string(c.errType) || got.Error == nil || !strings.Contains(got.Error.Message, c.says) {
			t.Errorf("%s: %d %s, want %d %s saying %q", c.name, r.status, r.body, c.status, c.errType, c.says)
		}
	}
}
