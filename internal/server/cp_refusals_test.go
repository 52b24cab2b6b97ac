package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Bad input to the control-plane endpoints: each is a 400 naming what was
// wrong, and nothing is created or changed.

func TestEnvironmentRefusals(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("keep")
	bad := func(name, path string, body any, mention ...string) cpRefusal {
		return cpRefusal{name, "POST", path, e.apiKey, body, 400, api.InvalidRequest, mention}
	}
	e.checkRefusals(t, []cpRefusal{
		bad("empty name", "/v1/environments", map[string]any{"name": ""}, "name"),
		bad("name with a newline", "/v1/environments", map[string]any{"name": "x\ny"}, "name", "control character"),
		bad("cloud config", "/v1/environments", map[string]any{"name": "x", "config": map[string]string{"type": "cloud"}}, "config", "self-hosted"),
		bad("unknown config", "/v1/environments", map[string]any{"name": "x", "config": map[string]string{"type": "k8s"}}, "config", "unknown"),
		bad("unknown scope", "/v1/environments", map[string]any{"name": "x", "scope": "galaxy"}, "scope"),
		bad("description too long", "/v1/environments", map[string]any{"name": "x", "description": strings.Repeat("d", api.MaxDescriptionChars+1)}, "description"),
		bad("metadata empty key", "/v1/environments", map[string]any{"name": "x", "metadata": map[string]string{"": "v"}}, "metadata"),
		bad("update empty name", "/v1/environments/"+env.ID, map[string]any{"name": ""}, "name"),
		bad("update metadata key too long", "/v1/environments/"+env.ID, map[string]any{"metadata": map[string]string{strings.Repeat("k", 65): "v"}}, "metadata"),
		bad("key name with a tab", "/v1/environments/"+env.ID+"/keys", map[string]any{"name": "a\tb"}, "name", "control character"),
		{"a memory id for an environment", "GET", "/v1/environments/mem_01JZZZZZZZZZZZZZZZZZZZZZZZ", e.apiKey, nil, 404, api.NotFound, []string{"is a memory id"}},
	})
	if n := e.credentialCount("environment_key"); n != 0 {
		t.Fatalf("a refused key request minted %d keys", n)
	}
}

func TestAgentRefusals(t *testing.T) {
	e := newCPEnv(t)
	bad := func(name string, body any, mention ...string) cpRefusal {
		return cpRefusal{name, "POST", "/v1/agents", e.apiKey, body, 400, api.InvalidRequest, mention}
	}
	e.checkRefusals(t, []cpRefusal{
		bad("no name", map[string]any{"model": "scripted"}, "name"),
		bad("no model", map[string]any{"name": "a"}, "model is required"),
		bad("model a number", map[string]any{"name": "a", "model": 7}, "model"),
		bad("unknown effort", map[string]any{"name": "a", "model": map[string]any{"id": "claude-opus-4-6", "effort": "turbo"}}, "model.effort", "high"),
		bad("unknown speed", map[string]any{"name": "a", "model": map[string]any{"id": "claude-opus-4-6", "speed": "warp"}}, "model.speed", "fast"),
		bad("tool a string", map[string]any{"name": "a", "model": "scripted", "tools": []any{"bash"}}, "tools[0]"),
		bad("tool without type", map[string]any{"name": "a", "model": "scripted", "tools": []any{map[string]any{"name": "x"}}}, "tools[0]"),
		bad("system too long", map[string]any{"name": "a", "model": "scripted", "system": strings.Repeat("s", api.MaxAgentSystemChars+1)}, "system"),
		bad("metadata value too long", map[string]any{"name": "a", "model": "scripted", "metadata": map[string]string{"k": strings.Repeat("v", 513)}}, "metadata"),
	})
	var list api.Page[api.Agent]
	e.must(200, "GET", "/v1/agents?include_archived=true", e.apiKey, nil, &list)
	if len(list.Data) != 0 {
		t.Fatalf("refused creates made %d agents", len(list.Data))
	}
}

func TestSessionUpdateAndSendRefusals(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"title": "t"})
	before := e.events(sess.ID)
	bad := func(name, method, path string, body any, mention ...string) cpRefusal {
		return cpRefusal{name, method, path, e.apiKey, body, 400, api.InvalidRequest, mention}
	}
	e.checkRefusals(t, []cpRefusal{
		bad("title too long", "POST", "/v1/sessions/"+sess.ID, map[string]any{"title": strings.Repeat("t", 1001)}, "title"),
		bad("metadata empty key", "POST", "/v1/sessions/"+sess.ID, map[string]any{"metadata": map[string]any{"": "x"}}, "metadata"),
		bad("no events", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": []any{}}, "events is required"),
		bad("51 events", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": make([]map[string]string, 51)}, "at most 50"),
		bad("agent event", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": []any{map[string]any{"type": "agent.message"}}}, "cannot be sent"),
		bad("result for no call", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": []any{map[string]any{"type": "user.tool_result", "tool_use_id": "sevt_x"}}}, "names no agent.tool_use"),
		bad("custom result for no call", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": []any{map[string]any{"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_x"}}}, "names no agent.custom_tool_use"),
		bad("custom result without its call", "POST", "/v1/sessions/"+sess.ID+"/events", map[string]any{"events": []any{map[string]any{"type": "user.custom_tool_result"}}}, "needs custom_tool_use_id"),
		bad("unknown status", "GET", "/v1/sessions?statuses[]=sleeping", nil, "statuses"),
		bad("unknown order", "GET", "/v1/sessions?order=sideways", nil, "order"),
	})
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+sess.ID, e.apiKey, nil, &got)
	if got.Title == nil || *got.Title != "t" || len(got.Metadata) != 0 || len(e.events(sess.ID)) != len(before) {
		t.Fatalf("refused calls changed the session: %+v", got)
	}
}

// cpSnapshot is everything the control plane stores, read back through
// the API, to prove that a refused request changed nothing.
func (e *cpEnv) cpSnapshot() string {
	e.t.Helper()
	var b strings.Builder
	get := func(path string, out any) {
		b.Write(e.must(200, "GET", path, e.apiKey, nil, out).body)
	}
	var envs api.Page[api.Environment]
	get("/v1/environments?include_archived=true&limit=100", &envs)
	for _, env := range envs.Data {
		get("/v1/environments/"+env.ID+"/work?limit=100", nil)
	}
	get("/v1/agents?include_archived=true&limit=100", nil)
	var sessions api.Page[api.Session]
	get("/v1/sessions?include_archived=true&limit=100", &sessions)
	for _, s := range sessions.Data {
		get("/v1/sessions/"+s.ID+"/events?limit=1000", nil)
	}
	for _, kind := range []storage.CredentialKind{storage.APIKey, storage.EnvironmentKey, storage.SessionsToken} {
		fmt.Fprintf(&b, "%s=%d ", kind, e.credentialCount(kind))
	}
	return b.String()
}

// cpRefusal is one control-plane request that must be refused.
type cpRefusal struct {
	name         string
	method, path string
	cred         string // "" sends no credential
	body         any
	status       int
	typ          api.ErrorType
	mention      []string // the parameter or object, and what to do
}

// checkRefusals sends each request and checks the status, the error type,
// the message, that retrying clients are told not to, and that nothing
// the control plane stores changed.
func (e *cpEnv) checkRefusals(t *testing.T, cases []cpRefusal, hdr ...string) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.cpSnapshot()
			r := e.call(c.method, c.path, c.cred, c.body, hdr...)
			var env api.ErrorEnvelope
			if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil {
				t.Fatalf("%d: not the error envelope: %s", r.status, r.body)
			}
			if r.status != c.status || env.Error.Type != c.typ {
				t.Fatalf("got %d %s, want %d %s: %s", r.status, env.Error.Type, c.status, c.typ, env.Error.Message)
			}
			for _, m := range c.mention {
				if !strings.Contains(env.Error.Message, m) {
					t.Errorf("message %q does not mention %q", env.Error.Message, m)
				}
			}
			if r.header.Get("x-should-retry") != "false" {
				t.Errorf("a %d refusal without x-should-retry: false", r.status)
			}
			if after := e.cpSnapshot(); after != before {
				t.Fatalf("a refused request changed the control plane:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// The refusals of the queue, the lists and the lookups, each with its
// status, type, a message that names the fix, and nothing changed.
func TestControlPlaneRefusalsSayWhatToDo(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	key := e.envKey(env.ID)
	ag := e.scriptedAgent()
	sess := e.session(env.ID, ag.ID, nil)
	ended := e.session(env.ID, ag.ID, nil)
	e.must(200, "POST", "/v1/sessions/"+ended.ID+"/archive", e.apiKey, nil, nil)
	var work api.Page[api.Work]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, &work)
	item := "/v1/environments/" + env.ID + "/work/" + work.Data[0].ID
	unknownWork := "/v1/environments/" + env.ID + "/work/work_01JZZZZZZZZZZZZZZZZZZZZZZZ"
	events := "/v1/sessions/" + sess.ID + "/events"
	k := e.apiKey
	e.checkRefusals(t, []cpRefusal{
		// Credentials.
		{"no credential", "GET", "/v1/environments", "", nil, 401, api.Authentication, []string{"x-api-key"}},
		{"unknown credential", "GET", "/v1/sessions/" + sess.ID, "sk-memstore-nope", nil, 401, api.Authentication, []string{"unknown", "mint a new one"}},
		{"environment key listing sessions", "GET", "/v1/sessions", key, nil, 403, api.Permission, []string{"API key", "not the environment key"}},

		// Lists.
		{"limit over 100", "GET", "/v1/agents?limit=101", k, nil, 400, api.InvalidRequest, []string{"limit", "1 to 100", "next_page"}},
		{"limit 0 on events", "GET", events + "?limit=0", k, nil, 400, api.InvalidRequest, []string{"limit", "1 to 1000"}},
		{"order unknown", "GET", events + "?order=up", k, nil, 400, api.InvalidRequest, []string{"order", "asc or desc"}},
		{"page garbage", "GET", events + "?page=garbage", k, nil, 400, api.InvalidRequest, []string{"page", "next_page"}},
		{"page of another list", "GET", "/v1/environments?page=" + storage.EncodeCursor("agents", ag.ID), k, nil, 400, api.InvalidRequest, []string{"page", "next_page"}},
		{"include_archived not a bool", "GET", "/v1/sessions?include_archived=maybe", k, nil, 400, api.InvalidRequest, []string{"include_archived", "true or false"}},

		// Lookups.
		{"agent version", "GET", "/v1/agents/" + ag.ID + "?version=2", k, nil, 404, api.NotFound, []string{"no version 2", "current version is 1"}},
		{"environment key of an unknown environment", "POST", "/v1/environments/env_01JZZZZZZZZZZZZZZZZZZZZZZZ/keys", k, nil, 404, api.NotFound, []string{"env_01JZZZZZZZZZZZZZZZZZZZZZZZ", "GET /v1/environments lists them"}},
		{"unknown session update", "POST", "/v1/sessions/sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ", k, map[string]any{"title": "x"}, 404, api.NotFound, []string{"sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ", "GET /v1/sessions lists them"}},
		// A send with an API key reads no session first: the append finds
		// it missing, and a send refused for another reason still says 404.
		{"message to an unknown session", "POST", "/v1/sessions/sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ/events", k, api.SendEventsRequest{Events: []api.Event{api.UserMessage("x")}}, 404, api.NotFound, []string{"sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ", "GET /v1/sessions lists them"}},
		{"no events to an unknown session", "POST", "/v1/sessions/sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ/events", k, map[string]any{"events": []any{}}, 404, api.NotFound, []string{"sesn_01JZZZZZZZZZZZZZZZZZZZZZZZ", "GET /v1/sessions lists them"}},
		{"unknown work item", "GET", unknownWork, k, nil, 404, api.NotFound, []string{"work_01JZZZZZZZZZZZZZZZZZZZZZZZ", "GET /v1/environments/" + env.ID + "/work lists them"}},
		{"agent named by another kind of id", "POST", "/v1/sessions", k, map[string]any{"agent": env.ID, "environment_id": env.ID}, 404, api.NotFound, []string{"agent: ", "is an environment id, not an agent id"}},

		// Environments and sessions.
		{"delete an environment in use", "DELETE", "/v1/environments/" + env.ID, k, nil, 409, api.Conflict, []string{"still has sessions", "archive"}},
		{"message to a terminated session", "POST", "/v1/sessions/" + ended.ID + "/events", k, api.SendEventsRequest{Events: []api.Event{api.UserMessage("x")}}, 400, api.InvalidRequest, []string{"terminated", "new session"}},
		{"model object without id", "POST", "/v1/agents", k, map[string]any{"name": "a", "model": map[string]any{"speed": "fast"}}, 400, api.InvalidRequest, []string{"model is required", api.ScriptedModel}},

		// The work queue.
		{"block_ms over 999", "GET", "/v1/environments/" + env.ID + "/work/poll?block_ms=1000", key, nil, 400, api.InvalidRequest, []string{"block_ms", "1 to 999"}},
		{"reclaim_older_than_ms 0", "GET", "/v1/environments/" + env.ID + "/work/poll?reclaim_older_than_ms=0", key, nil, 400, api.InvalidRequest, []string{"reclaim_older_than_ms", "positive"}},
		{"reclaim_older_than_ms overflowing a duration", "GET", "/v1/environments/" + env.ID + "/work/poll?reclaim_older_than_ms=9223372036854775807", key, nil, 400, api.InvalidRequest, []string{"reclaim_older_than_ms", "out of range", "from 1 to 9223372036854"}},
		{"block_ms overflowing an int", "GET", "/v1/environments/" + env.ID + "/work/poll?block_ms=9223372036854775808", key, nil, 400, api.InvalidRequest, []string{"block_ms", "1 to 999"}},
		{"ack of an unclaimed item", "POST", item + "/ack", key, nil, 409, api.Conflict, []string{"not claimed", "poll"}},
		{"heartbeat without expectation", "POST", item + "/heartbeat", key, nil, 400, api.InvalidRequest, []string{"expected_last_heartbeat", api.NoHeartbeat}},
		{"heartbeat with a bad TTL", "POST", item + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT&desired_ttl_seconds=soon", key, nil, 400, api.InvalidRequest, []string{"desired_ttl_seconds", "seconds"}},
		{"work metadata empty key", "POST", item, k, map[string]any{"metadata": map[string]any{"": "x"}}, 400, api.InvalidRequest, []string{"metadata", "empty key"}},
		{"stop body not an object", "POST", item + "/stop", key, "force", 400, api.InvalidRequest, []string{"JSON object"}},
	})
}

// Names, titles and messages are text the server stores as sent, like
// memory content: a body that is not UTF-8, or that escapes half a
// surrogate pair, is refused rather than stored with U+FFFD in place of
// what the client sent.
func TestControlPlaneBodiesMustBeUnicode(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	for _, c := range []struct{ name, path, body, want string }{
		{"environment name not UTF-8", "/v1/environments", "{\"name\":\"a\xffb\"}", "not valid UTF-8"},
		{"agent name with a lone surrogate", "/v1/agents", `{"name":"a\ud800","model":"scripted"}`, "surrogate"},
		{"message not UTF-8", "/v1/sessions/" + sess.ID + "/events", "{\"events\":[{\"type\":\"user.message\",\"content\":[{\"type\":\"text\",\"text\":\"\xc3\"}]}]}", "not valid UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.cpSnapshot()
			req, _ := http.NewRequest("POST", e.hs.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("x-api-key", e.apiKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 400 || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), string(api.InvalidRequest)) {
				t.Fatalf("%d %s; want 400 invalid_request_error saying %q", res.StatusCode, b, c.want)
			}
			if e.cpSnapshot() != before {
				t.Fatal("a refused body changed the control plane")
			}
		})
	}
}
