package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// sdkServer is a memstore server on httptest over a real SQLite file, with
// the official SDK client pointed at it.
type sdkServer struct {
	t      *testing.T
	url    string
	apiKey string
	client anthropic.Client
}

func newSDKServer(t *testing.T, opts ...func(*server.Config)) *sdkServer {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cfg := server.Config{App: a}
	for _, o := range opts {
		o(&cfg)
	}
	// The secret's api_base_url must be known before the server is built,
	// so the listener comes first.
	hs := httptest.NewUnstartedServer(nil)
	cfg.PublicBaseURL = "http://" + hs.Listener.Addr().String()
	srv := server.New(cfg)
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		a.Close()
		db.Close()
	})
	key, _, err := a.Credentials.BootstrapAdminKey(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return &sdkServer{t: t, url: hs.URL, apiKey: key, client: anthropic.NewClient(option.WithBaseURL(hs.URL), option.WithAPIKey(key), option.WithMaxRetries(0))}
}

// post sends a raw JSON request with the admin key, for what the SDK has no
// call for (environment keys).
func (s *sdkServer) post(path string, body, out any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.url+path, bytes.NewReader(b))
	req.Header.Set("x-api-key", s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		s.t.Fatalf("POST %s: %d %s", path, res.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		s.t.Fatal(err)
	}
}

// requireFields fails unless raw (a JSON object) holds every field that the
// SDK type of sample tags api:"required", recursively through nested
// objects and arrays of objects: the SDK decodes leniently, so a missing
// field would otherwise pass unnoticed as a zero value.
func requireFields(t *testing.T, what, raw string, sample any) {
	t.Helper()
	if missing := missingRequired(raw, sample); len(missing) > 0 {
		t.Errorf("%s lacks required fields %v: %s", what, missing, raw)
	}
}

func missingRequired(raw string, sample any) []string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return []string{"(not a JSON object)"}
	}
	return checkRequired("", obj, reflect.TypeOf(sample))
}

func checkRequired(prefix string, obj map[string]json.RawMessage, typ reflect.Type) []string {
	var missing []string
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		val, present := obj[name]
		if f.Tag.Get("api") == "required" && !present {
			missing = append(missing, prefix+name)
			continue
		}
		if !present || strings.HasSuffix(f.Type.Name(), "Union") {
			continue
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}):
			var sub map[string]json.RawMessage
			if json.Unmarshal(val, &sub) == nil && sub != nil {
				missing = append(missing, checkRequired(prefix+name+".", sub, ft)...)
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && !strings.HasSuffix(ft.Elem().Name(), "Union"):
			var subs []map[string]json.RawMessage
			if json.Unmarshal(val, &subs) == nil {
				for _, sub := range subs {
					missing = append(missing, checkRequired(prefix+name+"[].", sub, ft.Elem())...)
				}
			}
		}
	}
	return missing
}

func TestRequiredFieldCheckSeesMissingFields(t *testing.T) {
	got := missingRequired(`{"id":"s","agent":{"id":"a"}}`, anthropic.BetaManagedAgentsSession{})
	joined := strings.Join(got, " ")
	for _, want := range []string{"status", "resources", "agent.name", "agent.skills"} {
		if !strings.Contains(" "+joined+" ", " "+want+" ") {
			t.Fatalf("missing = %v; want it to name %s", got, want)
		}
	}
	if strings.Contains(" "+joined+" ", " id ") {
		t.Fatalf("a present field reported missing: %v", got)
	}
}

func TestOfficialSDKDrivesTheControlPlane(t *testing.T) {
	s := newSDKServer(t)
	ctx := context.Background()
	c := s.client

	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{
		Name:     "build farm",
		Config:   anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}},
		Metadata: map[string]string{"team": "infra"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.Config.Type != "self_hosted" || env.Metadata["team"] != "infra" || env.JSON.Description.Raw() != "null" {
		t.Fatalf("environment = %s", env.RawJSON())
	}
	requireFields(t, "environment", env.RawJSON(), anthropic.BetaEnvironment{})
	got, err := c.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	if err != nil || got.ID != env.ID {
		t.Fatalf("Get = %v, %v", got, err)
	}
	up, err := c.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Description: param.NewOpt("the farm")})
	if err != nil || up.Description != "the farm" {
		t.Fatalf("Update = %v, %v", up, err)
	}
	envs, err := c.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	if err != nil || len(envs.Data) != 1 {
		t.Fatalf("List = %v, %v", envs, err)
	}

	var key api.EnvironmentKey
	s.post("/v1/environments/"+env.ID+"/keys", map[string]string{"name": "ci"}, &key)

	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "scripted",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: api.ScriptedModel},
	})
	if err != nil {
		t.Fatal(err)
	}
	if agent.Model.ID != api.ScriptedModel || agent.Version != 1 || agent.ExecutionIdentity.Type != "service_account" {
		t.Fatalf("agent = %s", agent.RawJSON())
	}
	requireFields(t, "agent", agent.RawJSON(), anthropic.BetaManagedAgentsAgent{})
	if agents, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{}); err != nil || len(agents.Data) != 1 {
		t.Fatalf("agents = %v, %v", agents, err)
	}

	sess, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfBetaManagedAgentsAgents: &anthropic.BetaManagedAgentsAgentParams{ID: agent.ID, Version: param.NewOpt(int64(1))}},
		EnvironmentID: env.ID,
		Title:         param.NewOpt("first"),
		InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: `{"tool_calls":[{"name":"bash","input":{"command":"echo hi"}}]}`}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Status != anthropic.BetaManagedAgentsSessionStatusRunning || sess.Agent.ID != agent.ID || sess.Title != "first" || sess.EnvironmentID != env.ID {
		t.Fatalf("session = %s", sess.RawJSON())
	}
	requireFields(t, "session", sess.RawJSON(), anthropic.BetaManagedAgentsSession{})

	// Work, with the environment key, as the SDK's worker calls it.
	workOpts := []option.RequestOption{option.WithHeaderDel("X-Api-Key"), option.WithAuthToken(key.Key)}
	work, err := c.Beta.Environments.Work.Poll(ctx, env.ID, anthropic.BetaEnvironmentWorkPollParams{
		BlockMs: param.NewOpt(int64(10)), AnthropicWorkerID: param.NewOpt("sdk-test"),
	}, workOpts...)
	if err != nil || work == nil || work.Data.ID != sess.ID || work.Secret == "" {
		t.Fatalf("Poll = %+v, %v", work, err)
	}
	requireFields(t, "work", work.RawJSON(), anthropic.BetaSelfHostedWork{})
	secret, err := api.DecodeWorkSecret(work.Secret)
	if err != nil || secret.SessionsToken == "" || secret.APIBaseURL != s.url {
		t.Fatalf("secret = %+v, %v", secret, err)
	}
	if _, err := c.Beta.Environments.Work.Ack(ctx, work.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: env.ID}, workOpts...); err != nil {
		t.Fatal(err)
	}
	empty, err := c.Beta.Environments.Work.Poll(ctx, env.ID, anthropic.BetaEnvironmentWorkPollParams{}, workOpts...)
	if err != nil || (empty != nil && empty.ID != "") {
		t.Fatalf("empty poll = %+v, %v", empty, err)
	}
	tokOpts := []option.RequestOption{option.WithHeaderDel("X-Api-Key"), option.WithAuthToken(secret.SessionsToken)}
	hb, err := c.Beta.Environments.Work.Heartbeat(ctx, work.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: env.ID, ExpectedLastHeartbeat: param.NewOpt(api.NoHeartbeat),
	}, tokOpts...)
	if err != nil || hb.State != "active" || !hb.LeaseExtended {
		t.Fatalf("Heartbeat = %+v, %v", hb, err)
	}
	requireFields(t, "heartbeat", hb.RawJSON(), anthropic.BetaSelfHostedWorkHeartbeatResponse{})
	_, err = c.Beta.Environments.Work.Heartbeat(ctx, work.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: env.ID, ExpectedLastHeartbeat: param.NewOpt(api.NoHeartbeat),
	}, tokOpts...)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 412 || !strings.Contains(apiErr.RawJSON(), `"current_state"`) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	stats, err := c.Beta.Environments.Work.Stats(ctx, env.ID, anthropic.BetaEnvironmentWorkStatsParams{}, workOpts...)
	if err != nil || stats.WorkersPolling != 1 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
	requireFields(t, "stats", stats.RawJSON(), anthropic.BetaSelfHostedWorkQueueStats{})
	wl, err := c.Beta.Environments.Work.List(ctx, env.ID, anthropic.BetaEnvironmentWorkListParams{}, workOpts...)
	if err != nil || len(wl.Data) != 1 {
		t.Fatalf("work List = %+v, %v", wl, err)
	}

	// Events, with the sessions token, as the SDK's tool runner calls them.
	events, err := c.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(1000)), Order: anthropic.BetaSessionEventListParamsOrderAsc}, tokOpts...)
	if err != nil {
		t.Fatal(err)
	}
	var toolUse anthropic.BetaManagedAgentsSessionEventUnion
	for _, e := range events.Data {
		if e.Type == "agent.tool_use" {
			toolUse = e
		}
	}
	call := toolUse.AsAgentToolUse()
	if call.Name != "bash" || call.Input["command"] != "echo hi" || call.ProcessedAt.IsZero() {
		t.Fatalf("tool use = %s", toolUse.RawJSON())
	}
	requireFields(t, "agent.tool_use", toolUse.RawJSON(), anthropic.BetaManagedAgentsAgentToolUseEvent{})

	stream := c.Beta.Sessions.Events.StreamEvents(ctx, sess.ID, anthropic.BetaSessionEventStreamParams{}, tokOpts...)
	defer stream.Close()
	sent, err := c.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserToolResult: &anthropic.BetaManagedAgentsUserToolResultEventParams{
			ToolUseID: call.ID, IsError: param.NewOpt(false),
			Content: []anthropic.BetaManagedAgentsUserToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "hi"}}},
		},
	}}}, tokOpts...)
	if err != nil || len(sent.Data) != 1 || sent.Data[0].ID == "" {
		t.Fatalf("Send = %+v, %v", sent, err)
	}
	var streamed []string
	for stream.Next() {
		ev := stream.Current()
		streamed = append(streamed, ev.Type)
		switch ev.Type {
		case "agent.message":
			requireFields(t, "agent.message", ev.RawJSON(), anthropic.BetaManagedAgentsAgentMessageEvent{})
			if !strings.Contains(ev.AsAgentMessage().Content[0].Text, "bash (ok): hi") {
				t.Fatalf("summary = %s", ev.RawJSON())
			}
		case "session.status_idle":
			requireFields(t, "session.status_idle", ev.RawJSON(), anthropic.BetaManagedAgentsSessionStatusIdleEvent{})
			if ev.StopReason.Type != "end_turn" {
				t.Fatalf("idle = %s", ev.RawJSON())
			}
		}
		if ev.Type == "session.status_idle" {
			break
		}
	}
	if strings.Join(streamed, " ") != "user.tool_result agent.message session.status_idle" {
		t.Fatalf("streamed %v (err %v)", streamed, stream.Err())
	}

	// Stop answers 204 as SPEC §3 says. The SDK's worker reads the stop
	// raw and is content with it; the typed Work.Stop expects a body and
	// reports an error although the stop happened (documented in
	// docs/behaviour.md). If this changes, so must docs/behaviour.md.
	_, err = c.Beta.Environments.Work.Stop(ctx, work.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: env.ID, BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: param.NewOpt(true)}}, tokOpts...)
	if err == nil || errors.As(err, &apiErr) {
		t.Fatalf("Work.Stop on a 204: %v, want the SDK's decode error (not an API error)", err)
	}
	if stopped, err := c.Beta.Environments.Work.Get(ctx, work.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: env.ID}); err != nil || stopped.State != "stopped" {
		t.Fatalf("after Work.Stop: %+v, %v", stopped, err)
	}

	list, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	if err != nil || len(list.Data) != 1 || list.Data[0].Status != "idle" {
		t.Fatalf("sessions List = %+v, %v", list, err)
	}
	arch, err := c.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	if err != nil || arch.Status != "terminated" || arch.ArchivedAt.IsZero() {
		t.Fatalf("Archive = %+v, %v", arch, err)
	}
	del, err := c.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	if err != nil || del.ID != sess.ID || del.Type != "session_deleted" {
		t.Fatalf("Delete = %+v, %v", del, err)
	}
	edel, err := c.Beta.Environments.Delete(ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	if err != nil || edel.Type != "environment_deleted" {
		t.Fatalf("environment Delete = %+v, %v", edel, err)
	}
	if _, err := c.Beta.Agents.Archive(ctx, agent.ID, anthropic.BetaAgentArchiveParams{}); err != nil {
		t.Fatal(err)
	}
}
