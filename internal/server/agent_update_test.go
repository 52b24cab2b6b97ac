package server

import (
	"testing"

	"github.com/memstore/memstore/api"
)

// POST /v1/agents/{id} makes the agent's next version from the fields
// sent, keeping the others; an edit from a stale version, an archived
// agent or a field the create rules refuse is refused and changes nothing.
func TestAgentUpdateMakesTheNextVersionAndRefusesAStaleOne(t *testing.T) {
	e := newCPEnv(t)
	ag := e.scriptedAgent()
	path := "/v1/agents/" + ag.ID
	var v2 api.Agent
	e.must(200, "POST", path, e.apiKey, map[string]any{"version": 1, "system": "Be brief.", "tools": []any{map[string]any{"type": api.AgentToolsetType}}}, &v2)
	if v2.Version != 2 || v2.System != "Be brief." || v2.Name != ag.Name || len(v2.Tools) != 1 {
		t.Fatalf("after the update: %+v", v2)
	}
	e.checkRefusals(t, []cpRefusal{
		{"no version", "POST", path, e.apiKey, map[string]any{"system": "x"}, 400, api.InvalidRequest, []string{"version is required"}},
		{"a stale version", "POST", path, e.apiKey, map[string]any{"version": 1, "system": "x"}, 409, api.Conflict, []string{"is at version 2, not 1", "read it again"}},
		{"an empty name", "POST", path, e.apiKey, map[string]any{"version": 2, "name": ""}, 400, api.InvalidRequest, []string{"name"}},
		{"a tool without a type", "POST", path, e.apiKey, map[string]any{"version": 2, "tools": []any{map[string]any{"name": "x"}}}, 400, api.InvalidRequest, []string{"tools[0]"}},
		{"a missing agent", "POST", "/v1/agents/agent_01JZZZZZZZZZZZZZZZZZZZZZZZ", e.apiKey, map[string]any{"version": 1}, 404, api.NotFound, []string{"agent_01JZZZZZZZZZZZZZZZZZZZZZZZ"}},
	})
	var got api.Agent
	e.must(200, "GET", path, e.apiKey, nil, &got)
	if got.Version != 2 || got.System != "Be brief." || got.Name != ag.Name || len(got.Tools) != 1 {
		t.Fatalf("the refusals changed the agent: %+v", got)
	}
	e.must(200, "POST", path+"/archive", e.apiKey, nil, nil)
	e.checkRefusals(t, []cpRefusal{
		{"an archived agent", "POST", path, e.apiKey, map[string]any{"version": 2, "system": "x"}, 400, api.InvalidRequest, []string{"archived"}},
	})
}
