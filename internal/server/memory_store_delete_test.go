package server

import (
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// A store cannot be deleted from under a session that may still mount it:
// one that is not terminated (a message would bring a worker back), or
// whose worker still holds its work item (the final sync runs after
// termination). Once every such session is over, the delete goes through
// and the sessions keep their snapshot of the resource.
func TestDeletingAStoreAttachedToALiveSessionIsRefused(t *testing.T) {
	e := newCPEnv(t)
	var st api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "Team Notes"}, &st)
	var doc api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+st.ID+"/memories", e.apiKey, api.CreateMemoryRequest{Path: "/doc.md", Content: "kept"}, &doc)
	env := e.environment("e")
	ag := e.scriptedAgent()
	attach := map[string]any{"resources": []any{map[string]any{"type": "memory_store", "memory_store_id": st.ID}}}
	live := e.session(env.ID, ag.ID, attach)
	e.clock.Advance(1)
	unserved := e.session(env.ID, ag.ID, attach)

	refused := func(when, sessionID string) {
		t.Helper()
		before := memorySnapshot(t, e)
		r := e.call("DELETE", "/v1/memory_stores/"+st.ID, e.apiKey, nil)
		if r.status != 409 || r.errType() != string(api.Conflict) || r.header.Get("x-should-retry") != "false" {
			t.Fatalf("%s: delete answered %d %s, want 409 conflict_error without retry", when, r.status, r.body)
		}
		for _, want := range []string{sessionID, "archive"} {
			if !strings.Contains(string(r.body), want) {
				t.Fatalf("%s: the refusal does not mention %q: %s", when, want, r.body)
			}
		}
		if memorySnapshot(t, e) != before {
			t.Fatalf("%s: a refused delete changed storage", when)
		}
	}
	refused("idle session", live.ID)

	// Its worker claims it; the session is archived (terminated), but the
	// worker is still winding down with the store mounted.
	w, _ := e.poll(env.ID, e.envKey(env.ID), "w")
	if w == nil || w.Data.ID != live.ID {
		t.Fatalf("claimed %+v, want the first session's item", w)
	}
	e.must(200, "POST", "/v1/sessions/"+live.ID+"/archive", e.apiKey, nil, nil)
	refused("terminated session whose worker holds the item", live.ID)

	// The other session is archived before any worker claimed it: nothing
	// will ever mount the store for it, so it does not block the delete.
	e.must(200, "POST", "/v1/sessions/"+unserved.ID+"/archive", e.apiKey, nil, nil)
	e.must(204, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/stop", e.apiKey, api.StopWorkRequest{Force: true}, nil)
	var del api.Deleted
	e.must(200, "DELETE", "/v1/memory_stores/"+st.ID, e.apiKey, nil, &del)
	if del.ID != st.ID || del.Type != "memory_store_deleted" {
		t.Fatalf("deleted = %+v", del)
	}
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+live.ID, e.apiKey, nil, &got)
	if len(got.Resources) != 1 || got.Resources[0].MemoryStoreID != st.ID || got.Resources[0].Name != "Team Notes" {
		t.Fatalf("the finished session lost its resource snapshot: %+v", got.Resources)
	}
}
