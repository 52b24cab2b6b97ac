package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/server"
)

// weather is the application's function, the custom tool the official
// SessionToolRunner answers. It answers once released: an application
// slower than the session's idle, so the test sees the session wait.
type weather struct {
	calls   chan string
	release chan struct{}
}

func (weather) Name() string        { return "get_weather" }
func (weather) Description() string { return "The weather in a city." }
func (weather) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}
}
func (w weather) Execute(_ context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	var in struct{ City string }
	json.Unmarshal(input, &in)
	w.calls <- in.City
	<-w.release
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: "Sunny, 21°C in " + in.City}}}, nil
}

// The official Go SDK's SessionToolRunner answers a custom tool: the
// model's call becomes agent.custom_tool_use, the session idles with
// requires_action naming it, the runner posts user.custom_tool_result, the
// output reaches the model as the tool_result of its call, and the turn
// ends with the model's answer.
func TestTheSDKSessionToolRunnerAnswersACustomTool(t *testing.T) {
	u := modeltest.New(t)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(10, 5, 0, 0), modeltest.ToolUse("toolu_1", "get_weather", `{"city":"Paris"}`))
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(20, 5, 0, 0), modeltest.Text("It is sunny in Paris."))
	s := newSDKServer(t, func(a *app.Config, _ *server.Config) {
		a.Model = agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"}
	})
	ctx := context.Background()
	c := s.client

	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "weather", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "get_weather", Description: "The weather in a city.",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: env.ID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	maxIdle := time.Duration(0) // stop only when told
	w := weather{calls: make(chan string, 1), release: make(chan struct{})}
	runner := c.Beta.Sessions.Events.NewToolRunner(ctx, sess.ID, anthropic.SessionToolRunnerOptions{Tools: []anthropic.BetaTool{w}, MaxIdle: &maxIdle})
	defer runner.Close()
	dispatched := make(chan anthropic.DispatchedToolCall, 1)
	go func() {
		if runner.Next() {
			dispatched <- runner.Current()
		}
	}()

	if _, err := c.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "Weather in Paris?"}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	// The session waits for the application: idle, requires_action naming
	// the call.
	waitFor := func(what string, done func(types []string) bool) []anthropic.BetaManagedAgentsSessionEventUnion {
		t.Helper()
		for bound := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			page, err := c.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, e := range page.Data {
				types = append(types, e.Type)
			}
			if done(types) {
				return page.Data
			}
			if time.Now().After(bound) { // a safety bound, not a timing
				t.Fatalf("the session never reached %s: %v", what, types)
			}
		}
	}
	log := waitFor("requires_action", func(types []string) bool {
		return len(types) > 0 && types[len(types)-1] == api.EventSessionStatusIdle
	})
	idle := log[len(log)-1]
	if use := log[3]; use.Type != api.EventAgentCustomToolUse || idle.StopReason.Type != api.StopRequiresAction || len(idle.StopReason.EventIDs) != 1 || idle.StopReason.EventIDs[0] != use.ID {
		t.Fatalf("the session idles with %+v after %s %s", idle.StopReason, use.Type, use.ID)
	}
	close(w.release)
	var call anthropic.DispatchedToolCall
	select {
	case call = <-dispatched:
	case <-time.After(30 * time.Second): // a safety bound, not a timing
		t.Fatal("the runner dispatched no call")
	}
	if !call.Custom || call.Name != "get_weather" || !call.Posted || call.IsError || <-w.calls != "Paris" {
		t.Fatalf("dispatched %+v", call)
	}

	// The log, read with the SDK: the call, the idle naming it, the answer,
	// the model's reply.
	var types []string
	log = waitFor("the end of the turn", func(ts []string) bool {
		types = ts
		return len(ts) > 0 && ts[len(ts)-1] == api.EventSessionStatusIdle && strings.Contains(strings.Join(ts, " "), api.EventAgentMessage)
	})
	useID := log[3].ID
	if answer := log[6]; answer.Type != api.EventUserCustomToolResult || answer.CustomToolUseID != useID {
		t.Fatalf("the runner answered with %s for %q, want the call %s", answer.Type, answer.CustomToolUseID, useID)
	}
	want := "user.message session.status_running span.model_request_start agent.custom_tool_use span.model_request_end session.status_idle user.custom_tool_result session.status_running span.model_request_start agent.message span.model_request_end session.status_idle"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("log %s\nwant %s", got, want)
	}
	// The model got the tool's output as the tool_result of its call.
	if n := u.Count(); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	msgs, _ := json.Marshal(u.Request(1).Raw["messages"])
	if !strings.Contains(string(msgs), `"content":[{"text":"Sunny, 21°C in Paris","type":"text"}],"is_error":false,"tool_use_id":"`+useID+`"`) {
		t.Fatalf("the second request's messages: %s", msgs)
	}
	tools, _ := json.Marshal(u.Request(0).Raw["tools"])
	if !strings.Contains(string(tools), `"input_schema":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"name":"get_weather"`) {
		t.Fatalf("tools declared: %s", tools)
	}
}
