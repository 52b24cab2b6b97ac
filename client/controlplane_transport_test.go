package client_test

// Wire mechanics of the control-plane calls whose answers vary between
// servers (no-work polls, 204 stops, 412 heartbeats) and of the event
// stream, against scripted handlers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

const workJSON = `{"type":"work","id":"work_1","environment_id":"env_1","data":{"type":"session","id":"sesn_1"},"state":"queued","secret":"s3cr3t","metadata":{},"created_at":"2026-01-02T03:04:05Z"}`

func TestPollWorkNoWork(t *testing.T) {
	for name, step := range map[string]http.HandlerFunc{
		"200 null":         reply(200, "null"),
		"204":              reply(204, ""),
		"200 empty object": reply(200, "{}"),
		"200 empty body":   reply(200, ""),
	} {
		t.Run(name, func(t *testing.T) {
			_, c, _ := fixture(t, step)
			w, err := c.PollWork(context.Background(), "env_1", api.WorkPollParams{BlockMS: 500})
			if w != nil || err != nil {
				t.Errorf("PollWork = %+v, %v; want no item and no error", w, err)
			}
		})
	}
}

func TestPollWorkClaims(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, workJSON))
	c = c.With(client.WithBearerToken("env-key"), client.WithWorkerID("from-client"))
	w, err := c.PollWork(context.Background(), "env_1", api.WorkPollParams{BlockMS: 999, ReclaimOlderThanMS: 5000, WorkerID: "from-params"})
	if err != nil || w == nil || w.ID != "work_1" || w.Data.ID != "sesn_1" || w.Secret == nil || *w.Secret != "s3cr3t" {
		t.Fatalf("PollWork = %+v, %v", w, err)
	}
	r := rec.requests()[0]
	if r.method != http.MethodGet || r.rawPath != "/v1/environments/env_1/work/poll" || r.rawQuery != "block_ms=999&reclaim_older_than_ms=5000" {
		t.Errorf("sent %s %s?%s", r.method, r.rawPath, r.rawQuery)
	}
	if got := r.header.Values("Anthropic-Worker-Id"); len(got) != 1 || got[0] != "from-params" {
		t.Errorf("Anthropic-Worker-ID = %v, want the per-call id only", got)
	}
	if r.header.Get("Anthropic-Beta") != client.BetaManagedAgents {
		t.Errorf("anthropic-beta = %q: control-plane calls carry only the managed-agents beta", r.header.Get("Anthropic-Beta"))
	}
}

func TestStopWorkAcceptsBothAnswers(t *testing.T) {
	for name, step := range map[string]http.HandlerFunc{
		"204":       reply(204, ""),
		"200 work":  reply(200, strings.Replace(workJSON, `"queued"`, `"stopped"`, 1)),
		"200 empty": reply(200, ""),
	} {
		t.Run(name, func(t *testing.T) {
			rec, c, _ := fixture(t, step)
			if err := c.StopWork(context.Background(), "env_1", "work_1", api.StopWorkRequest{Force: true}); err != nil {
				t.Fatal(err)
			}
			if r := rec.requests()[0]; r.rawPath != "/v1/environments/env_1/work/work_1/stop" || r.body != `{"force":true}` {
				t.Errorf("sent %s %q", r.rawPath, r.body)
			}
		})
	}
	_, c, _ := fixture(t, reply(409, envelope(api.Conflict, "already stopped"), "x-should-retry", "false"))
	if err := c.StopWork(context.Background(), "env_1", "work_1", api.StopWorkRequest{}); !client.IsStatus(err, 409) {
		t.Errorf("stopping a stopped item: err = %v, want the 409", err)
	}
}

func TestHeartbeat(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, `{"type":"work_heartbeat","last_heartbeat":"hb_2","lease_extended":true,"state":"active","ttl_seconds":60}`))
	hb, err := c.HeartbeatWork(context.Background(), "env_1", "work_1", api.WorkHeartbeatParams{ExpectedLastHeartbeat: api.NoHeartbeat, DesiredTTLSeconds: 60})
	if err != nil || hb.LastHeartbeat != "hb_2" || !hb.LeaseExtended || hb.State != api.WorkActive || hb.TTLSeconds != 60 {
		t.Fatalf("HeartbeatWork = %+v, %v", hb, err)
	}
	if r := rec.requests()[0]; r.method != http.MethodPost || r.rawQuery != "desired_ttl_seconds=60&expected_last_heartbeat=NO_HEARTBEAT" || r.body != "" || r.header.Get("Content-Type") != "" {
		t.Errorf("sent %s ?%s body %q", r.method, r.rawQuery, r.body)
	}
}

func TestStaleHeartbeat(t *testing.T) {
	details := api.HeartbeatPreconditionDetails{ErrorCode: api.HeartbeatPreconditionFailed, CurrentState: api.WorkLeaseState{State: api.WorkActive, TTLSeconds: 120, LastHeartbeat: ptr("hb_9")}}
	body := fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":"stale","details":%s}}`, mustJSON(details.Map()))
	rec, c, _ := fixture(t, reply(412, body, "x-should-retry", "false"))
	_, err := c.HeartbeatWork(context.Background(), "env_1", "work_1", api.WorkHeartbeatParams{ExpectedLastHeartbeat: "hb_1"})
	st, ok := client.StaleHeartbeat(err)
	if !ok || st == nil || st.State != api.WorkActive || st.TTLSeconds != 120 || st.LastHeartbeat == nil || *st.LastHeartbeat != "hb_9" {
		t.Fatalf("StaleHeartbeat(%v) = %+v, %v", err, st, ok)
	}
	if len(rec.requests()) != 1 {
		t.Errorf("a stale heartbeat was repeated")
	}

	// A 412 without details is still a lost lease; other errors are not.
	_, c, _ = fixture(t, reply(412, envelope(api.InvalidRequest, "stale")))
	_, err = c.HeartbeatWork(context.Background(), "env_1", "work_1", api.WorkHeartbeatParams{ExpectedLastHeartbeat: "hb_1"})
	if st, ok := client.StaleHeartbeat(err); !ok || st != nil {
		t.Errorf("bare 412: StaleHeartbeat = %+v, %v", st, ok)
	}
	for _, other := range []error{nil, errors.New("x"), &api.Error{Type: api.NotFound, StatusCode: 404}} {
		if _, ok := client.StaleHeartbeat(other); ok {
			t.Errorf("StaleHeartbeat(%v) = true", other)
		}
	}
}

func TestHeartbeatIsNotRetried(t *testing.T) {
	rec, c, _ := fixture(t, dropConnection, reply(200, `{"type":"work_heartbeat"}`))
	if _, err := c.HeartbeatWork(context.Background(), "env_1", "work_1", api.WorkHeartbeatParams{ExpectedLastHeartbeat: "hb_1"}); err == nil || len(rec.requests()) != 1 {
		t.Errorf("err = %v after %d requests: a beat that may have landed was repeated", err, len(rec.requests()))
	}
}

func TestControlPlaneRoutes(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, `{"id":"x","type":"y","data":null,"next_page":null}`))
	ctx := context.Background()
	calls := []struct {
		call func() error
		want string
	}{
		{func() error { _, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e"}); return err }, "POST /v1/environments"},
		{func() error { _, err := c.GetEnvironment(ctx, "env_1"); return err }, "GET /v1/environments/env_1"},
		{func() error { _, err := c.UpdateEnvironment(ctx, "env_1", api.UpdateEnvironmentRequest{}); return err }, "POST /v1/environments/env_1"},
		{func() error { _, err := c.ArchiveEnvironment(ctx, "env_1"); return err }, "POST /v1/environments/env_1/archive"},
		{func() error { _, err := c.DeleteEnvironment(ctx, "env_1"); return err }, "DELETE /v1/environments/env_1"},
		{func() error { _, err := c.ListEnvironments(ctx, api.EnvironmentListParams{Limit: 2}); return err }, "GET /v1/environments?limit=2"},
		{func() error {
			_, err := c.CreateEnvironmentKey(ctx, "env_1", api.CreateEnvironmentKeyRequest{Name: "k"})
			return err
		}, "POST /v1/environments/env_1/keys"},
		{func() error { _, err := c.AckWork(ctx, "env_1", "work_1"); return err }, "POST /v1/environments/env_1/work/work_1/ack"},
		{func() error { _, err := c.GetWork(ctx, "env_1", "work_1"); return err }, "GET /v1/environments/env_1/work/work_1"},
		{func() error { _, err := c.UpdateWork(ctx, "env_1", "work_1", api.UpdateWorkRequest{}); return err }, "POST /v1/environments/env_1/work/work_1"},
		{func() error { _, err := c.ListWork(ctx, "env_1", api.WorkListParams{Page: "p"}); return err }, "GET /v1/environments/env_1/work?page=p"},
		{func() error { _, err := c.WorkStats(ctx, "env_1"); return err }, "GET /v1/environments/env_1/work/stats"},
		{func() error { _, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "a"}); return err }, "POST /v1/agents"},
		{func() error { _, err := c.GetAgent(ctx, "agent_1"); return err }, "GET /v1/agents/agent_1"},
		{func() error { _, err := c.ListAgents(ctx, api.AgentListParams{IncludeArchived: true}); return err }, "GET /v1/agents?include_archived=true"},
		{func() error { _, err := c.CreateSession(ctx, api.CreateSessionRequest{}); return err }, "POST /v1/sessions"},
		{func() error { _, err := c.GetSession(ctx, "sesn_1"); return err }, "GET /v1/sessions/sesn_1"},
		{func() error { _, err := c.UpdateSession(ctx, "sesn_1", api.UpdateSessionRequest{}); return err }, "POST /v1/sessions/sesn_1"},
		{func() error { _, err := c.ArchiveSession(ctx, "sesn_1"); return err }, "POST /v1/sessions/sesn_1/archive"},
		{func() error { _, err := c.DeleteSession(ctx, "sesn_1"); return err }, "DELETE /v1/sessions/sesn_1"},
		{func() error {
			_, err := c.ListSessions(ctx, api.SessionListParams{Statuses: []string{"idle", "running"}})
			return err
		}, "GET /v1/sessions?statuses%5B%5D=idle&statuses%5B%5D=running"},
		{func() error {
			_, err := c.ListEvents(ctx, "sesn_1", api.EventListParams{Limit: 1000, Order: "asc"})
			return err
		}, "GET /v1/sessions/sesn_1/events?limit=1000&order=asc"},
		{func() error { _, err := c.SendEvents(ctx, "sesn_1", api.UserInterrupt()); return err }, "POST /v1/sessions/sesn_1/events"},
	}
	for i, tc := range calls {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.want, err)
			continue
		}
		r := rec.requests()[i]
		got := r.method + " " + r.rawPath
		if r.rawQuery != "" {
			got += "?" + r.rawQuery
		}
		if got != tc.want {
			t.Errorf("sent %q, want %q", got, tc.want)
		}
	}
	if body := rec.requests()[len(calls)-1].body; body != `{"events":[{"type":"user.interrupt"}]}` {
		t.Errorf("SendEvents body = %s", body)
	}
}

// sse serves a fixed event stream and records the Last-Event-ID it was
// asked to resume from.
func sse(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("X-Resumed-From", r.Header.Get("Last-Event-ID"))
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		io.WriteString(w, body)
	}
}

func TestStreamEvents(t *testing.T) {
	stream := ": hello\n\n" +
		"id: ev_1\nevent: agent.tool_use\ndata: {\"id\":\"ev_1\",\"type\":\"agent.tool_use\",\"name\":\"read\",\"input\":{\"file_path\":\"/a\"}}\n\n" +
		"event: ping\ndata: {}\n\n" +
		"id: ev_2\nevent: session.status_idle\ndata: {\"id\":\"ev_2\",\"type\":\"session.status_idle\",\n" +
		"data: \"stop_reason\":{\"type\":\"end_turn\"}}\n\n" +
		"retry: 1500\n\n"
	rec, c, _ := fixture(t, sse(stream))
	s, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{LastEventID: "ev_0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastEventID() != "ev_0" {
		t.Errorf("LastEventID before any event = %q, want the resume point", s.LastEventID())
	}
	var got []string
	for s.Next() {
		e := s.Event()
		got = append(got, e.Type+"@"+s.LastEventID())
		if e.Type == api.EventAgentToolUse && (e.Name != "read" || string(e.Input) != `{"file_path":"/a"}`) {
			t.Errorf("tool use = %+v", e)
		}
		if e.Type == api.EventSessionStatusIdle && (e.StopReason == nil || e.StopReason.Type != api.StopEndTurn) {
			t.Errorf("idle = %+v", e)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"agent.tool_use@ev_1", "session.status_idle@ev_2"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events = %v, want %v", got, want)
	}
	if s.ReconnectDelay().Milliseconds() != 1500 {
		t.Errorf("ReconnectDelay = %v", s.ReconnectDelay())
	}
	r := rec.requests()[0]
	if r.rawPath != "/v1/sessions/sesn_1/events/stream" || r.header.Get("Last-Event-ID") != "ev_0" || r.header.Get("Accept") != "text/event-stream" {
		t.Errorf("stream request = %s %v", r.rawPath, r.header)
	}
	if st := c.Stats(); st.BytesReceived != int64(len(stream)) {
		t.Errorf("BytesReceived = %d, want %d: streamed bytes count as traffic", st.BytesReceived, len(stream))
	}
}

func TestStreamEventsIDFallsBackToEventID(t *testing.T) {
	_, c, _ := fixture(t, sse("event: agent.message\ndata: {\"id\":\"ev_5\",\"type\":\"agent.message\"}\n\n"))
	s, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Next() || s.LastEventID() != "ev_5" {
		t.Errorf("LastEventID = %q, want the event's own id when frames carry none", s.LastEventID())
	}
}

func TestStreamEventsErrors(t *testing.T) {
	t.Run("error frame", func(t *testing.T) {
		_, c, _ := fixture(t, sse("event: agent.message\ndata: {\"type\":\"agent.message\"}\n\nevent: error\ndata: "+envelope(api.Overloaded, "busy")+"\n\n"))
		s, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n := 0
		for s.Next() {
			n++
		}
		if n != 1 || !client.IsType(s.Err(), api.Overloaded) {
			t.Errorf("%d events then %v, want 1 then the overloaded error", n, s.Err())
		}
		if s.Next() {
			t.Errorf("Next after the end returned true")
		}
	})
	t.Run("bad JSON", func(t *testing.T) {
		_, c, _ := fixture(t, sse("event: agent.message\ndata: {nope\n\n"))
		s, _ := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{})
		defer s.Close()
		if s.Next() || s.Err() == nil || !strings.Contains(s.Err().Error(), "agent.message") {
			t.Errorf("err = %v, want a decoding error naming the frame", s.Err())
		}
	})
	t.Run("not a stream", func(t *testing.T) {
		_, c, _ := fixture(t, reply(200, `{"data":[]}`))
		if _, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{}); err == nil || !strings.Contains(err.Error(), "application/json") {
			t.Errorf("err = %v, want a clear refusal of a JSON answer", err)
		}
	})
	t.Run("connect refused", func(t *testing.T) {
		_, c, _ := fixture(t, reply(404, envelope(api.NotFound, "no session"), "x-should-retry", "false"))
		if _, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{}); !client.IsStatus(err, 404) {
			t.Errorf("err = %v, want the 404", err)
		}
	})
	t.Run("connect retried", func(t *testing.T) {
		rec, c, _ := fixture(t, reply(503, ""), sse("data: {\"type\":\"agent.message\"}\n\n"))
		s, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{})
		if err != nil || len(rec.requests()) != 2 {
			t.Fatalf("err = %v after %d requests", err, len(rec.requests()))
		}
		defer s.Close()
		if !s.Next() || s.Event().Type != api.EventAgentMessage {
			t.Errorf("first event = %+v, %v (a frame without event: still carries an event)", s.Event(), s.Err())
		}
	})
}

func TestStreamEventsCancel(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	_, c, _ := fixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.StreamEvents(ctx, "sesn_1", client.StreamEventsParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	if s.Next() || !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("after cancel: err = %v, want context.Canceled", s.Err())
	}
}

func TestStreamEventsEndsASilentConnection(t *testing.T) {
	// A server that answers, sends one keep-alive, then goes silent with
	// the connection open: a dead peer that TCP has not noticed.
	block := make(chan struct{})
	defer close(block)
	_, c, _ := fixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, ": keepalive\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	s, err := c.StreamEvents(context.Background(), "sesn_1", client.StreamEventsParams{IdleTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Next() || !errors.Is(s.Err(), client.ErrStreamIdle) {
		t.Fatalf("after the silence: err = %v, want ErrStreamIdle", s.Err())
	}
	if !strings.Contains(s.Err().Error(), "reconnect") {
		t.Errorf("err = %v, want it to say what to do", s.Err())
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
