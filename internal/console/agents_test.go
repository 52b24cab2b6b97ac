package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// The agents pages create, edit (each save a new version, a stale form
// refused) and archive agents through the API's rules; every refusal says
// why and stores nothing.
func TestAgentsPagesCreateEditArchiveAndRefuse(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	token := v.csrf("/console/agents/new")
	agents := func() []api.Agent {
		t.Helper()
		page, err := admin.ListAgents(ctx, api.AgentListParams{IncludeArchived: true})
		if err != nil {
			t.Fatal(err)
		}
		return page.Data
	}
	form := url.Values{"csrf": {token}, "name": {"helper"}, "model": {"claude-sonnet-4-5"}, "system": {"Be brief."},
		"toolset": {"on"}, "policy": {"always_ask"}, "policy_read": {"always_allow"},
		"enabled_bash": {"on"}, "enabled_read": {"on"}, "enabled_write": {"on"}, "enabled_edit": {"on"}, "enabled_glob": {"on"},
		"custom_name": {"get_weather", ""}, "custom_description": {"The weather in a city.", ""},
		"custom_schema": {`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, ""}}

	for _, c := range []struct {
		name   string
		change func(url.Values)
		status int
		says   string
	}{
		{"a bad CSRF token", func(f url.Values) { f.Set("csrf", "forged") }, http.StatusForbidden, "CSRF token does not match"},
		{"no name", func(f url.Values) { f.Set("name", "") }, http.StatusBadRequest, "Nothing was created: name"},
		{"no model", func(f url.Values) { f.Set("model", "") }, http.StatusBadRequest, "model is required"},
		{"a schema that is not JSON", func(f url.Values) { f["custom_schema"] = []string{`{"type":`} }, http.StatusBadRequest, "input schema of custom tool &#34;get_weather&#34; is not a JSON object"},
		{"other tools that are not an array", func(f url.Values) { f.Set("other_tools", `{"type":"mcp_toolset"}`) }, http.StatusBadRequest, "other tools must be a JSON array"},
		{"a skill that does not exist", func(f url.Values) { f.Set("skills", `[{"type":"custom","skill_id":"skill_01nope"}]`) }, http.StatusBadRequest, "skills[0]"},
		{"a policy that is not one", func(f url.Values) { f.Set("policy", "sometimes") }, http.StatusBadRequest, "pick always_allow or always_ask"},
	} {
		f := url.Values{}
		for k, vs := range form {
			f[k] = append([]string(nil), vs...)
		}
		c.change(f)
		status, page := v.do("POST", "/console/agents", f)
		if status != c.status || !strings.Contains(page, c.says) {
			t.Errorf("%s: status %d, want %d saying %q:\n%s", c.name, status, c.status, c.says, page)
		}
		if c.status == http.StatusBadRequest && !strings.Contains(page, `value="helper"`) && c.name != "no name" {
			t.Errorf("%s: the refused form lost what was typed", c.name)
		}
		if n := len(agents()); n != 0 {
			t.Fatalf("%s: %d agents after the refusal, want none", c.name, n)
		}
	}

	status, _ := v.do("POST", "/console/agents", form)
	list := agents()
	if status != http.StatusSeeOther || len(list) != 1 {
		t.Fatalf("create: status %d, %d agents", status, len(list))
	}
	a := list[0]
	tools, _ := json.Marshal(a.Tools)
	for _, want := range []string{`"default_config":{"permission_policy":{"type":"always_ask"}}`, `{"name":"read","permission_policy":{"type":"always_allow"}}`,
		`{"name":"grep","enabled":false}`, `"type":"custom","name":"get_weather"`, `"required":["city"]`} {
		if !strings.Contains(string(tools), want) {
			t.Errorf("the agent's tools lack %s: %s", want, tools)
		}
	}
	if a.System != "Be brief." || a.Model.ID != "claude-sonnet-4-5" {
		t.Errorf("the agent: %+v", a)
	}

	// The edit form shows the agent as its fields; saving it unchanged but
	// for the prompt keeps every tool and makes version 2.
	page := "/console/agents/" + a.ID
	_, shown := v.do("GET", page, nil)
	for _, want := range []string{`name="custom_name" value="get_weather"`, `<option value="always_ask" selected>always_ask: a person`, `name="version" value="1"`} {
		if !strings.Contains(shown, want) {
			t.Fatalf("the agent page lacks %s", want)
		}
	}
	edit := url.Values{}
	for k, vs := range form {
		edit[k] = vs
	}
	edit.Set("version", "1")
	edit.Set("system", "Be briefer.")
	if status, body := v.do("POST", page, edit); status != http.StatusSeeOther {
		t.Fatalf("edit: status %d:\n%s", status, body)
	}
	b, _ := admin.GetAgent(ctx, a.ID)
	if newTools, _ := json.Marshal(b.Tools); b.Version != 2 || b.System != "Be briefer." || string(newTools) != string(tools) {
		t.Fatalf("after the edit: version %d, system %q, tools %s (were %s)", b.Version, b.System, newTools, tools)
	}
	// A form read at version 1 is refused now, and changes nothing.
	edit.Set("system", "stale")
	if status, body := v.do("POST", page, edit); status != http.StatusConflict || !strings.Contains(body, "is at version 2, not 1") {
		t.Fatalf("stale edit: status %d:\n%s", status, body)
	}
	edit.Set("csrf", "forged")
	edit.Set("version", "2")
	if status, _ := v.do("POST", page, edit); status != http.StatusForbidden {
		t.Fatalf("edit with a forged token: status %d", status)
	}
	if status, _ := v.do("POST", page+"/archive", url.Values{"csrf": {"forged"}}); status != http.StatusForbidden {
		t.Fatalf("archive with a forged token: status %d", status)
	}
	if c, _ := admin.GetAgent(ctx, a.ID); c.Version != 2 || c.System != "Be briefer." || c.ArchivedAt != nil {
		t.Fatalf("the refusals changed the agent: %+v", c)
	}

	// A session needs an environment: refused without one, started with one.
	notes, _ := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	start := url.Values{"csrf": {token}, "environment": {""}, "store": {notes.ID}, "access_" + notes.ID: {"read_only"}, "message": {"hello"}}
	if status, body := v.do("POST", page+"/sessions", start); status != http.StatusBadRequest || !strings.Contains(body, "No session was started") {
		t.Fatalf("start without an environment: status %d:\n%s", status, body)
	}
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	start.Set("environment", env.ID)
	start.Set("csrf", "forged")
	if status, _ := v.do("POST", page+"/sessions", start); status != http.StatusForbidden {
		t.Fatalf("start with a forged token: status %d", status)
	}
	if page, _ := admin.ListSessions(ctx, api.SessionListParams{}); len(page.Data) != 0 {
		t.Fatalf("%d sessions after refused starts", len(page.Data))
	}
	start.Set("csrf", token)
	if status, _ := v.do("POST", page+"/sessions", start); status != http.StatusSeeOther {
		t.Fatalf("start: status %d", status)
	}
	sessions, _ := admin.ListSessions(ctx, api.SessionListParams{})
	if len(sessions.Data) != 1 || sessions.Data[0].Agent.Version != 2 || len(sessions.Data[0].Resources) != 1 || sessions.Data[0].Resources[0].Access != api.AccessReadOnly {
		t.Fatalf("the started session: %+v", sessions.Data)
	}

	if status, _ := v.do("POST", page+"/archive", url.Values{"csrf": {token}}); status != http.StatusSeeOther {
		t.Fatalf("archive: status %d", status)
	}
	if c, _ := admin.GetAgent(ctx, a.ID); c.ArchivedAt == nil {
		t.Fatal("the archive button did not archive the agent")
	}
	if _, body := v.do("GET", page, nil); strings.Contains(body, "Start session") || strings.Contains(body, "Save a new version") {
		t.Fatal("an archived agent's page still offers to start a session or edit it")
	}
}

// The session page's forms send what POST /v1/sessions/{id}/events would,
// through its rules: an answer to a call that does not exist, an empty
// message or a forged form is refused in words, and nothing is stored.
func TestTalkingToASessionRefusesAndStoresNothing(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	env, _ := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	ag, _ := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}})
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ag.ID}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	page := "/console/sessions/" + sess.ID
	token := v.csrf(page)
	count := func() int {
		t.Helper()
		events, err := admin.ListEvents(ctx, sess.ID, api.EventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		return len(events.Data)
	}
	before := count()
	for _, c := range []struct {
		name, path string
		form       url.Values
		status     int
		says       string
	}{
		{"a forged message", "/messages", url.Values{"csrf": {"forged"}, "text": {"hi"}}, http.StatusForbidden, "CSRF token does not match"},
		{"an empty message", "/messages", url.Values{"csrf": {token}, "text": {"  "}}, http.StatusBadRequest, "Nothing was sent: the message is empty"},
		{"allowing an unknown call", "/confirmations", url.Values{"csrf": {token}, "tool_use_id": {"sevt_01nope"}, "result": {"allow"}}, http.StatusBadRequest, "names no agent.tool_use of session"},
		{"a verdict that is not one", "/confirmations", url.Values{"csrf": {token}, "tool_use_id": {"sevt_01nope"}, "result": {"maybe"}}, http.StatusBadRequest, "Nothing was sent"},
		{"answering an unknown custom call", "/custom_results", url.Values{"csrf": {token}, "custom_tool_use_id": {"sevt_01nope"}, "text": {"sunny"}}, http.StatusBadRequest, "names no agent.custom_tool_use"},
		{"a forged interrupt", "/interrupt", url.Values{"csrf": {"forged"}}, http.StatusForbidden, "CSRF token does not match"},
	} {
		status, body := v.do("POST", page+c.path, c.form)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: status %d, want %d saying %q:\n%s", c.name, status, c.status, c.says, body)
		}
		if n := count(); n != before {
			t.Fatalf("%s: the session has %d events, had %d", c.name, n, before)
		}
	}
	// A refused message keeps its text in the box.
	if _, body := v.do("POST", page+"/custom_results", url.Values{"csrf": {token}, "custom_tool_use_id": {"sevt_01nope"}}); !strings.Contains(body, `name="text" rows="3" required></textarea>`) {
		t.Error("a refused custom result put text into the message box")
	}
	if _, body := v.do("POST", "/console/sessions/sesn_01nope/messages", url.Values{"csrf": {token}, "text": {"hi"}}); !strings.Contains(body, "not a session id") && !strings.Contains(body, "does not exist") {
		t.Errorf("a message to a missing session says:\n%s", body)
	}

	// A message that is accepted is stored as the user.message.
	if status, _ := v.do("POST", page+"/messages", url.Values{"csrf": {token}, "text": {"hello <b>there</b>"}}); status != http.StatusSeeOther {
		t.Fatalf("send: status %d", status)
	}
	events, _ := admin.ListEvents(ctx, sess.ID, api.EventListParams{})
	if events.Data[before].Type != api.EventUserMessage || events.Data[before].Text() != "hello <b>there</b>" {
		t.Fatalf("after the send the log holds %+v", events.Data[before])
	}
}

// The agents list filters by a part of the name and its paging link keeps
// the filter, as the environments list does.
func TestAgentsListFiltersByNameAndPagesWithTheFilter(t *testing.T) {
	srv := startConsole(t)
	ctx := context.Background()
	admin := srv.Admin(t)
	create := func(name string) {
		if _, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: name, Model: api.ModelConfig{ID: api.ScriptedModel}}); err != nil {
			t.Fatal(err)
		}
	}
	create("Helper-old")
	const builders = 102 // more than a page (100) between the two helpers
	for i := range builders {
		create(fmt.Sprintf("builder-%03d", i))
	}
	create("helper-new")
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	status, page := v.do("GET", "/console/agents?name=HELPER", nil)
	if status != http.StatusOK || !strings.Contains(page, "Helper-old") || !strings.Contains(page, "helper-new") || strings.Contains(page, "builder-") || followNext(page) != "" {
		t.Fatalf("filtered by helper: status %d, want both helpers (the older past a page of builders), nothing else, no next page:\n%s", status, page)
	}
	seen := map[string]bool{}
	next := "/console/agents?name=builder"
	for pages := 0; next != ""; pages++ {
		if pages > 2 {
			t.Fatal("the builders take more than two pages")
		}
		status, page = v.do("GET", next, nil)
		if status != http.StatusOK || strings.Contains(page, "elper-") {
			t.Fatalf("%s: status %d, or it lists a helper: the paging link lost the filter", next, status)
		}
		for _, m := range regexp.MustCompile(`builder-\d{3}`).FindAllString(page, -1) {
			seen[m] = true
		}
		next = followNext(page)
	}
	if len(seen) != builders {
		t.Fatalf("the filtered pages list %d builders, want %d", len(seen), builders)
	}
	if status, page = v.do("GET", "/console/agents?after=nonsense", nil); status != http.StatusBadRequest || !strings.Contains(page, "start from the first page") {
		t.Fatalf("a bad page link: status %d:\n%s", status, page)
	}
}
