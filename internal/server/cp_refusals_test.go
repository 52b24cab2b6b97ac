package server

import (
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// Bad input to the control-plane endpoints: each is a 400 naming what was
// wrong, and nothing is created or changed.

func TestEnvironmentRefusals(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("keep")
	for _, c := range []struct {
		method, path string
		body         any
		want         string
	}{
		{"POST", "/v1/environments", map[string]any{"name": ""}, "name"},
		{"POST", "/v1/environments", map[string]any{"name": "x\ny"}, "control character"},
		{"POST", "/v1/environments", map[string]any{"name": "x", "config": map[string]string{"type": "cloud"}}, "self-hosted"},
		{"POST", "/v1/environments", map[string]any{"name": "x", "config": map[string]string{"type": "k8s"}}, "unknown"},
		{"POST", "/v1/environments", map[string]any{"name": "x", "scope": "galaxy"}, "scope"},
		{"POST", "/v1/environments", map[string]any{"name": "x", "description": strings.Repeat("d", api.MaxDescriptionChars+1)}, "description"},
		{"POST", "/v1/environments", map[string]any{"name": "x", "metadata": map[string]string{"": "v"}}, "metadata"},
		{"POST", "/v1/environments/" + env.ID, map[string]any{"name": ""}, "name"},
		{"POST", "/v1/environments/" + env.ID, map[string]any{"metadata": map[string]string{strings.Repeat("k", 65): "v"}}, "metadata"},
		{"POST", "/v1/environments/" + env.ID + "/keys", map[string]any{"name": "a\tb"}, "control character"},
	} {
		r := e.call(c.method, c.path, e.apiKey, c.body)
		if r.status != 400 || r.errType() != string(api.InvalidRequest) || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s %v: %d %s; want 400 naming %q", c.method, c.path, c.body, r.status, r.body, c.want)
		}
	}
	var list api.Page[api.Environment]
	e.must(200, "GET", "/v1/environments", e.apiKey, nil, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "keep" || len(list.Data[0].Metadata) != 0 {
		t.Fatalf("refused calls changed the environments: %+v", list.Data)
	}
	if n := e.credentialCount("environment_key"); n != 0 {
		t.Fatalf("a refused key request minted %d keys", n)
	}
	if r := e.call("GET", "/v1/environments/mem_01JZZZZZZZZZZZZZZZZZZZZZZZ", e.apiKey, nil); r.status != 404 || !strings.Contains(string(r.body), "is a memory id") {
		t.Fatalf("a memory id where an environment id belongs: %d %s", r.status, r.body)
	}
}

func TestAgentRefusals(t *testing.T) {
	e := newCPEnv(t)
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"model": "scripted"}, "name"},
		{map[string]any{"name": "a"}, "model is required"},
		{map[string]any{"name": "a", "model": 7}, "model"},
		{map[string]any{"name": "a", "model": "scripted", "tools": []any{"bash"}}, "tools[0]"},
		{map[string]any{"name": "a", "model": "scripted", "tools": []any{map[string]any{"name": "x"}}}, "tools[0]"},
		{map[string]any{"name": "a", "model": "scripted", "system": strings.Repeat("s", api.MaxAgentSystemChars+1)}, "system"},
		{map[string]any{"name": "a", "model": "scripted", "metadata": map[string]string{"k": strings.Repeat("v", 513)}}, "metadata"},
	} {
		r := e.call("POST", "/v1/agents", e.apiKey, c.body)
		if r.status != 400 || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%v: %d %s; want 400 naming %q", c.body, r.status, r.body, c.want)
		}
	}
	var list api.Page[api.Agent]
	e.must(200, "GET", "/v1/agents?include_archived=true", e.apiKey, nil, &list)
	if len(list.Data) != 0 {
		t.Fatalf("refused creates made %d agents", len(list.Data))
	}
	if r := e.call("GET", "/v1/agents?limit=101", e.apiKey, nil); r.status != 400 {
		t.Fatalf("limit=101: %d", r.status)
	}
}

func TestSessionUpdateAndSendRefusals(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"title": "t"})
	before := e.events(sess.ID)
	for _, c := range []struct {
		method, path string
		body         any
		want         string
	}{
		{"POST", "/v1/sessions/" + sess.ID, map[string]any{"title": strings.Repeat("t", 1001)}, "title"},
		{"POST", "/v1/sessions/" + sess.ID, map[string]any{"metadata": map[string]any{"": "x"}}, "metadata"},
		{"POST", "/v1/sessions/" + sess.ID + "/events", map[string]any{"events": []any{}}, "events is required"},
		{"POST", "/v1/sessions/" + sess.ID + "/events", map[string]any{"events": make([]map[string]string, 51)}, "at most 50"},
		{"POST", "/v1/sessions/" + sess.ID + "/events", map[string]any{"events": []any{map[string]any{"type": "agent.message"}}}, "cannot be sent"},
		{"POST", "/v1/sessions/" + sess.ID + "/events", map[string]any{"events": []any{map[string]any{"type": "user.tool_result", "tool_use_id": "sevt_x"}}}, "names no agent.tool_use"},
		{"GET", "/v1/sessions?statuses[]=sleeping", nil, "statuses"},
		{"GET", "/v1/sessions?order=sideways", nil, "order"},
	} {
		r := e.call(c.method, c.path, e.apiKey, c.body)
		if r.status != 400 || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s: %d %s; want 400 naming %q", c.method, c.path, r.status, r.body, c.want)
		}
	}
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+sess.ID, e.apiKey, nil, &got)
	if got.Title == nil || *got.Title != "t" || len(got.Metadata) != 0 || len(e.events(sess.ID)) != len(before) {
		t.Fatalf("refused calls changed the session: %+v", got)
	}
}
