package server

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/memstore/memstore/api"
)

// FuzzRequestBodies sends arbitrary bodies to every endpoint that reads one,
// on a real server over SQLite, with each kind of credential: whatever the
// bytes, the answer is never a 5xx (a panic would be one: withRecover turns
// it into a 500) and a refusal is always the error envelope.
func FuzzRequestBodies(f *testing.F) {
	e := newCPEnv(f)
	env := e.environment("fuzz")
	envKey := e.envKey(env.ID)
	ag := e.scriptedAgent()
	var store api.MemoryStore
	e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]string{"name": "fuzz"}, &store)
	var mem api.Memory
	e.must(200, "POST", "/v1/memory_stores/"+store.ID+"/memories", e.apiKey, api.CreateMemoryRequest{Path: "/a.md", Content: "a"}, &mem)
	e.must(200, "POST", "/v1/memory_stores/"+store.ID+"/memories/"+mem.ID, e.apiKey, map[string]string{"content": "b"}, nil)
	var versions api.Page[api.MemoryVersion]
	e.must(200, "GET", "/v1/memory_stores/"+store.ID+"/memory_versions", e.apiKey, nil, &versions)
	sess := e.session(env.ID, ag.ID, map[string]any{"resources": []any{map[string]any{"type": "memory_store", "memory_store_id": store.ID}}})
	w, sec := e.poll(env.ID, envKey, "fuzz-worker")
	work := "/v1/environments/" + env.ID + "/work/" + w.ID
	var hook api.NewWebhookEndpoint
	e.must(200, "POST", "/v1/organizations/webhooks", e.apiKey, map[string]any{"url": "https://93.184.215.14/hook", "enabled_events": []string{"session.created"}}, &hook)

	endpoints := []string{
		"/v1/agents",
		"/v1/agents/" + ag.ID + "/archive",
		"/v1/environments",
		"/v1/environments/" + env.ID,
		"/v1/environments/" + env.ID + "/archive",
		"/v1/environments/" + env.ID + "/keys",
		"/v1/memory_stores",
		"/v1/memory_stores/" + store.ID,
		"/v1/memory_stores/" + store.ID + "/archive",
		"/v1/memory_stores/" + store.ID + "/memories",
		"/v1/memory_stores/" + store.ID + "/memories/" + mem.ID,
		"/v1/memory_stores/" + store.ID + "/memory_versions/" + versions.Data[len(versions.Data)-1].ID + "/redact",
		"/v1/sessions",
		"/v1/sessions/" + sess.ID,
		"/v1/sessions/" + sess.ID + "/archive",
		"/v1/sessions/" + sess.ID + "/events",
		work,
		work + "/ack",
		work + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT",
		work + "/stop",
		"/v1/organizations/webhooks",
		"/v1/organizations/webhooks/" + hook.ID,
		"/v1/organizations/webhooks/" + hook.ID + "/regenerate_signing_secret",
	}
	creds := []string{e.apiKey, envKey, sec.SessionsToken, ""}

	for i := range endpoints {
		f.Add(uint8(i), uint8(0), []byte(`{}`))
	}
	for _, b := range []string{
		`{"name":"n","description":"d","metadata":{"k":"v"}}`,
		`{"path":"/x/y.md","content":"hello"}`,
		`{"content":"c","precondition":{"type":"content_sha256","content_sha256":"00"}}`,
		`{"path":"/a.md","content":null}`,
		`{"events":[{"type":"user.message","content":[{"type":"text","text":"{\"tool_calls\":[]}"}]}]}`,
		`{"events":[{"type":"user.tool_result","tool_use_id":"sevt_x","content":[]}]}`,
		`{"agent":"` + ag.ID + `","environment_id":"` + env.ID + `","resources":[{"type":"memory_store","memory_store_id":"` + store.ID + `"}]}`,
		`{"name":"a","model":{"id":"scripted"},"tools":[{"type":"agent_toolset_20260401"}]}`,
		`{"force":true}`,
		`{"url":"https://93.184.215.14/h","enabled_events":["session.created"],"name":"n"}`,
		`{"state":"disabled","enabled_events":["nope"]}`,
		`{"metadata":{"k":null}}`,
		"\xff\xfe", `{"a":"\ud800"}`, `[]`, `null`, `{"name":1e999}`, `{} {}`,
	} {
		for i := range endpoints {
			f.Add(uint8(i), uint8(i), []byte(b))
		}
	}

	f.Fuzz(func(t *testing.T, endpoint, cred uint8, body []byte) {
		path := endpoints[int(endpoint)%len(endpoints)]
		req, err := http.NewRequest("POST", e.hs.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if c := creds[int(cred)%len(creds)]; c != "" {
			req.Header.Set("Authorization", "Bearer "+c)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("POST %s with %q: %d %s", path, body, res.StatusCode, b)
		}
		if res.StatusCode >= 400 && (cpResp{body: b}).errType() == "" {
			t.Fatalf("POST %s with %q: %d without the error envelope: %s", path, body, res.StatusCode, b)
		}
	})
}
