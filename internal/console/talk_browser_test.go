package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/worker"
)

// A person makes an agent on the agents page — a custom tool, and the
// built-in tools asked about before each call — starts a session of it,
// and talks to it: answers the custom tool, allows one call and denies
// another with a reason, and interrupts a slow turn. The model is the
// in-process Messages upstream; a real worker, over real HTTP, runs the
// allowed call.
func TestBrowserMakesAnAgentAndTalksToItsSession(t *testing.T) {
	chromium(t)
	u := modeltest.New(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Console: true, MountPrefix: mnt, Model: agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"}})
	ctx := context.Background()
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(ctx, "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	admin := srv.Admin(t)
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Client: srv.Client(t), EnvironmentID: env.ID, EnvironmentKey: key.Key, WorkerID: "browser-test",
		Workdir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()

	b := newBrowser(t, srv)

	// The agent, made on the agents page.
	b.click(`nav[@aria-label="Main"]`, "Agents")
	b.loaded()
	b.click(`main`, "New agent")
	b.run(chromedp.SendKeys(chromedp.CSS(`input[name=name]`), "weather helper"),
		chromedp.SetValue(chromedp.CSS(`input[name=model]`), "claude-sonnet-4-5"),
		chromedp.SetValue(chromedp.CSS(`textarea[name=system]`), "Answer briefly; write what you learn into /notes."),
		chromedp.SetValue(chromedp.CSS(`select[name=policy]`), "always_ask"),
		chromedp.SetValue(chromedp.CSS(`input[name=custom_name]`), "get_weather"),
		chromedp.SetValue(chromedp.CSS(`input[name=custom_description]`), "The weather in a city."),
		chromedp.SetValue(chromedp.CSS(`textarea[name=custom_schema]`), `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`))
	b.screenshot("agent-new")
	b.leave(chromedp.Click(`//button[text()="Create agent"]`), chromedp.WaitVisible(`//h2[text()="Start a session"]`))
	agents, err := admin.ListAgents(ctx, api.AgentListParams{})
	if err != nil || len(agents.Data) != 1 {
		t.Fatalf("agents after the form: %v, %v", agents, err)
	}
	ag := agents.Data[0]
	if tools, _ := json.Marshal(ag.Tools); !strings.Contains(string(tools), `"permission_policy":{"type":"always_ask"}`) || !strings.Contains(string(tools), `"type":"custom","name":"get_weather"`) {
		t.Fatalf("the agent's tools: %s", tools)
	}

	// Its edit form, as the agent page renders it, saved with a new prompt:
	// a second version that keeps every tool the first had.
	b.run(chromedp.SetValue(chromedp.CSS(`textarea[name=system]`), "Answer in one sentence; write what you learn into /notes."))
	b.leave(chromedp.Click(`//button[text()="Save a new version"]`), chromedp.WaitVisible(`//h2[text()="Start a session"]`))
	edited, err := admin.GetAgent(ctx, ag.ID)
	if err != nil || edited.Version != 2 || edited.System != "Answer in one sentence; write what you learn into /notes." || !sameJSON(edited.Tools, ag.Tools) {
		t.Fatalf("after saving the rendered edit form: version %d, system %q, tools %s (%v); tools were %s", edited.Version, edited.System, edited.Tools, err, ag.Tools)
	}

	// A session of it, in the laptop environment, with notes writable.
	b.run(chromedp.SetValue(chromedp.CSS(`select[name=environment]`), env.ID),
		chromedp.SetValue(chromedp.CSS(`select[name="access_`+notes.ID+`"]`), api.AccessReadWrite),
		chromedp.SetValue(chromedp.CSS(`input[name=title]`), "Weather in Paris"))
	b.screenshot("agent")
	b.leave(chromedp.Click(`//button[text()="Start session"]`), chromedp.WaitVisible(chromedp.CSS(`#talk textarea[name=text]`)))
	loc := b.location()
	sessionID := loc[strings.LastIndexByte(loc, '/')+1:]

	// The model asks the application for the weather first.
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_weather", "get_weather", `{"city":"Paris"}`))
	b.leave(chromedp.SetValue(chromedp.CSS(`#talk textarea[name=text]`), "What is the weather in Paris? Note it."),
		chromedp.Click(`//button[text()="Send"]`), chromedp.WaitVisible(chromedp.CSS(`#talk`)))
	custom := `li.event.agent\.custom_tool_use`
	b.run(chromedp.WaitVisible(chromedp.CSS(custom + ` textarea[name=text]`)))

	// Answering it, the model wants two calls; each waits for ada.
	note := filepath.Join(mnt, "notes", "weather.md")
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(20, 5, 0, 0), modeltest.Text("Writing it down."),
		modeltest.ToolUse("toolu_write", "write", `{"file_path":"`+note+`","content":"Paris: sunny, 21°C\n"}`),
		modeltest.ToolUse("toolu_bash", "bash", `{"command":"rm -rf `+filepath.Join(mnt, "notes")+`"}`))
	b.leave(chromedp.SetValue(chromedp.CSS(custom+` textarea[name=text]`), "Sunny, 21°C"),
		chromedp.Click(chromedp.CSS(custom+` button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#talk`)))
	call := func(name string) string {
		return `//li[contains(@class, "agent.tool_use")][.//strong[text()="` + name + `"]]`
	}
	b.run(chromedp.WaitVisible(call("write")+`//button[text()="Allow"]`), chromedp.WaitVisible(call("bash")+`//button[text()="Deny"]`))
	b.noScriptRan("the session awaiting confirmation")
	b.screenshot("talk")

	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(30, 5, 0, 0), modeltest.Text("Noted the weather; left the folder alone."))
	b.leave(chromedp.Click(call("write")+`//button[text()="Allow"]`), chromedp.WaitVisible(call("bash")+`//button[text()="Deny"]`))
	if n := browserRun(b, chromedp.Evaluate[int](`document.querySelectorAll('li.event.agent\\.tool_use button').length`)); n != 2 {
		t.Fatalf("after allowing write the page offers %d buttons, want bash's Allow and Deny only", n)
	}
	b.leave(chromedp.SetValue(chromedp.CSS(`input[name=deny_message]`), "no, keep the folder"),
		chromedp.Click(call("bash")+`//button[text()="Deny"]`), chromedp.WaitVisible(chromedp.CSS(`#talk`)))
	b.run(chromedp.WaitVisible(`//li[contains(@class, "agent.message")]//pre[text()="Noted the weather; left the folder alone."]`))
	if got := b.text(`li.event.user\.tool_confirmation pre`); got != "no, keep the folder" {
		t.Fatalf("the denial shows %q", got)
	}

	// A slow turn, interrupted.
	cancelled := make(chan struct{})
	u.StallMidStream(cancelled, modeltest.Text("Let me think"))
	b.leave(chromedp.SetValue(chromedp.CSS(`#talk textarea[name=text]`), "Think hard about tomorrow."),
		chromedp.Click(`//button[text()="Send"]`), chromedp.WaitVisible(chromedp.CSS(`#talk`)))
	for u.Count() < 4 {
		select {
		case <-u.Arrived:
		case <-time.After(30 * time.Second): // a safety bound, not a timing
			t.Fatal("the slow turn's model request never came")
		}
	}
	b.leave(chromedp.Click(`//button[text()="Interrupt"]`), chromedp.WaitVisible(chromedp.CSS(`#talk`)))
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // a safety bound, not a timing
		t.Fatal("the interrupt never cancelled the model request")
	}
	b.run(chromedp.WaitVisible(`//li[contains(@class, "user.interrupt")]/following-sibling::li[contains(@class, "session.status_idle")]`))

	// What the model was told: the custom tool's answer, and the denial
	// with ada's words.
	if sent, _ := json.Marshal(u.Request(1).Raw["messages"]); !strings.Contains(string(sent), "Sunny, 21°C") {
		t.Errorf("the model never got the custom tool's result: %s", sent)
	}
	if sent, _ := json.Marshal(u.Request(2).Raw["messages"]); !strings.Contains(string(sent), "no, keep the folder") || !strings.Contains(string(sent), "wrote") {
		t.Errorf("the model's third request lacks the denial or the write's result: %s", sent)
	}
	var types []string
	var confirmations []string
	for e, err := range admin.ListAllEvents(ctx, sessionID, api.EventListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
		if e.Type == api.EventUserToolConfirmation {
			confirmations = append(confirmations, e.ToolUseID+" "+e.Result)
		}
	}
	if len(confirmations) != 2 || !strings.HasSuffix(confirmations[0], " allow") || !strings.HasSuffix(confirmations[1], " deny") {
		t.Errorf("confirmations stored: %v", confirmations)
	}
	if tail := strings.Join(types[len(types)-6:], " "); tail != "user.message session.status_running span.model_request_start user.interrupt span.model_request_end session.status_idle" {
		t.Errorf("the interrupted turn: %s", tail)
	}
	// The allowed write reached the store, the denied bash removed nothing.
	var versions *api.Page[api.MemoryVersion]
	for bound := time.Now().Add(30 * time.Second); versions == nil || len(versions.Data) == 0; { // a safety bound, not a timing
		if time.Now().After(bound) {
			t.Fatal("the allowed write never reached the store")
		}
		if versions, err = admin.ListMemoryVersions(ctx, notes.ID, client.ListMemoryVersionsParams{SessionID: sessionID}); err != nil {
			t.Fatal(err)
		}
		if len(versions.Data) == 0 {
			<-time.After(10 * time.Millisecond) // the worker's sync follows the write
		}
	}
	if p := versions.Data[0].Path; p == nil || *p != "/weather.md" {
		t.Errorf("the session wrote %v", p)
	}

	b.click(`nav[@aria-label="Main"]`, "Agents")
	b.screenshot("agents")
}

// loaded waits until the page has finished loading (its script ran), so
// that a click lands on the page as a person sees it.
func (b *browserTab) loaded() {
	b.t.Helper()
	browserRun(b, chromedp.Evaluate[bool](`new Promise(done => document.readyState === "complete" ? done(true) : addEventListener("load", () => done(true)))`, chromedp.EvalAwaitPromise))
}

// sameJSON reports whether a and b encode the same JSON values, whatever
// the order of their objects' keys.
func sameJSON(a, b any) bool {
	var x, y any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return json.Unmarshal(ja, &x) == nil && json.Unmarshal(jb, &y) == nil && reflect.DeepEqual(x, y)
}
