package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
)

// An operator lists an environment's keys (never their secrets) and revokes
// one: from then on it is refused everywhere, its open event stream ends,
// and the environment's other keys go on working.
func TestEnvironmentKeysListAndRevoke(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	other := e.environment("other")
	var first, second api.EnvironmentKey
	e.must(200, "POST", "/v1/environments/"+env.ID+"/keys", e.apiKey, map[string]string{"name": "old worker"}, &first)
	e.must(200, "POST", "/v1/environments/"+env.ID+"/keys", e.apiKey, map[string]string{"name": "new worker"}, &second)
	otherKey := e.envKey(other.ID)

	var list api.Page[api.EnvironmentKey]
	r := e.must(200, "GET", "/v1/environments/"+env.ID+"/keys", e.apiKey, nil, &list)
	if strings.Contains(string(r.body), "sk-memstore-env-") || strings.Contains(string(r.body), `"key"`) {
		t.Fatalf("the key list shows secrets: %s", r.body)
	}
	if len(list.Data) != 2 || list.Data[0].ID != second.ID || list.Data[1].ID != first.ID || list.Data[1].Name != "old worker" || list.Data[0].EnvironmentID != env.ID || list.NextPage != nil {
		t.Fatalf("keys = %+v, want the two of %s newest first", list, env.ID)
	}
	var page api.Page[api.EnvironmentKey]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/keys?limit=1", e.apiKey, nil, &page)
	e.must(200, "GET", "/v1/environments/"+env.ID+"/keys?limit=1&page="+*page.NextPage, e.apiKey, nil, &page)
	if len(page.Data) != 1 || page.Data[0].ID != first.ID {
		t.Fatalf("second page = %+v", page)
	}

	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames, res := e.openStream(t, ctx, sess.ID, first.Key, "")
	if res.StatusCode != 200 {
		t.Fatalf("stream with the key: %d", res.StatusCode)
	}

	var gone api.Deleted
	e.must(200, "DELETE", "/v1/environments/"+env.ID+"/keys/"+first.ID, e.apiKey, nil, &gone)
	if gone.ID != first.ID || gone.Type != api.EnvironmentKeyDeletedType {
		t.Fatalf("revoke answered %+v", gone)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/environments/" + env.ID + "/work/poll"},
		{"GET", "/v1/environments/" + env.ID},
		{"GET", "/v1/environments/" + env.ID + "/work"},
		{"GET", "/v1/sessions/" + sess.ID + "/events"},
	} {
		if r := e.call(c.method, c.path, first.Key, nil); r.status != 401 || r.errType() != string(api.Authentication) {
			t.Errorf("revoked key on %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	// The stream sees the revocation at its next wake-up and ends.
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}, nil)
	for {
		select {
		case _, open := <-frames:
			if open {
				continue
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the revoked key's stream stayed open")
		}
		break
	}
	// Nothing else lost: the other keys work, the session is intact.
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work/poll", second.Key, nil, nil)
	e.must(200, "GET", "/v1/environments/"+other.ID+"/work/poll", otherKey, nil, nil)
	e.must(200, "GET", "/v1/environments/"+env.ID+"/keys", e.apiKey, nil, &list)
	if len(list.Data) != 1 || list.Data[0].ID != second.ID {
		t.Fatalf("keys after the revocation = %+v", list.Data)
	}

	keys := "/v1/environments/" + env.ID + "/keys/"
	e.checkRefusals(t, []cpRefusal{
		{"revoke twice", "DELETE", keys + first.ID, e.apiKey, nil, 404, api.NotFound, []string{first.ID, "GET /v1/environments/" + env.ID + "/keys lists them"}},
		{"revoke under another environment", "DELETE", "/v1/environments/" + other.ID + "/keys/" + second.ID, e.apiKey, nil, 404, api.NotFound, []string{second.ID}},
		{"revoke with an environment key", "DELETE", keys + second.ID, second.Key, nil, 403, api.Permission, []string{"API key"}},
		{"list with an environment key", "GET", strings.TrimSuffix(keys, "/"), second.Key, nil, 403, api.Permission, []string{"API key"}},
		{"revoke a session id", "DELETE", keys + sess.ID, e.apiKey, nil, 404, api.NotFound, []string{"is a session id"}},
		{"keys of an unknown environment", "GET", "/v1/environments/env_01JZZZZZZZZZZZZZZZZZZZZZZZ/keys", e.apiKey, nil, 404, api.NotFound, []string{"env_01JZZZZZZZZZZZZZZZZZZZZZZZ"}},
	})
}

// Archiving an environment retires its queue: no key polls or claims from
// it again, while the item a worker already holds runs on with its sessions
// token, and the queued item stays as it was.
func TestArchivedEnvironmentHandsOutNoWork(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	key := e.envKey(env.ID)
	ag := e.scriptedAgent()
	running := e.session(env.ID, ag.ID, nil)
	w, sec := e.poll(env.ID, key, "w1")
	if w == nil || w.Data.ID != running.ID {
		t.Fatalf("claimed %+v", w)
	}
	e.must(200, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/ack", key, nil, nil)
	queued := e.session(env.ID, ag.ID, nil)
	e.must(200, "POST", "/v1/environments/"+env.ID+"/archive", e.apiKey, nil, nil)

	poll := "/v1/environments/" + env.ID + "/work/poll"
	e.checkRefusals(t, []cpRefusal{
		{"poll with the environment key", "GET", poll, key, nil, 403, api.Permission, []string{env.ID, "archived", "stop the workers"}},
		{"waiting poll with the environment key", "GET", poll + "?block_ms=50", key, nil, 403, api.Permission, []string{"archived"}},
		{"poll with an API key", "GET", poll, e.apiKey, nil, 403, api.Permission, []string{"archived"}},
	}, "Anthropic-Worker-ID", "w2")

	// The running session's worker goes on: heartbeat and the events.
	if r := e.heartbeat(env.ID, w.ID, sec.SessionsToken, api.NoHeartbeat); r.status != 200 {
		t.Fatalf("heartbeat of a running item after the archive: %d %s", r.status, r.body)
	}
	e.must(200, "GET", "/v1/sessions/"+running.ID+"/events", sec.SessionsToken, nil, nil)
	var items api.Page[api.Work]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, &items)
	for _, it := range items.Data {
		if it.Data.ID == queued.ID && it.State != "queued" {
			t.Fatalf("the queued item became %s", it.State)
		}
	}
}

// A key revoked behind this server's back — by another server on the same
// PostgreSQL database — is refused once the verified-credential cache's
// time to live has passed; until then this server still trusts what it
// verified. Nothing else is refused meanwhile.
func TestKeyRevokedElsewhereRefusedWithinCredentialTTL(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	var k api.EnvironmentKey
	e.must(200, "POST", "/v1/environments/"+env.ID+"/keys", e.apiKey, map[string]string{"name": "w"}, &k)
	poll := "/v1/environments/" + env.ID + "/work/poll"
	e.must(200, "GET", poll, k.Key, nil, nil) // verified, and cached

	if err := e.db.RevokeEnvironmentKey(context.Background(), env.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	e.must(200, "GET", poll, k.Key, nil, nil)
	e.clock.Advance(app.CredentialTTL)
	if r := e.call("GET", poll, k.Key, nil); r.status != 401 || r.errType() != string(api.Authentication) {
		t.Fatalf("key revoked elsewhere, %v later: %d %s; want 401", app.CredentialTTL, r.status, r.body)
	}
	e.must(200, "GET", "/v1/environments/"+env.ID, e.apiKey, nil, nil)
}
