package client_test

// Every control-plane method of the client against the real server, with
// the credentials a deployment uses: the admin API key for management, an
// environment key for the work queue, and the sessions token from a work
// secret for everything about one item.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

func TestEnvironmentsAndAgentsAgainstServer(t *testing.T) {
	rs := startServer(t)
	c := adminClient(t, rs)
	ctx := context.Background()

	env := must(c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "builders", Metadata: map[string]string{"site": "a"}})).ok(t)
	if !strings.HasPrefix(env.ID, "env_") || env.Config.Type != api.EnvironmentConfigSelfHosted || env.Metadata["site"] != "a" {
		t.Fatalf("CreateEnvironment = %+v", env)
	}
	if got := must(c.GetEnvironment(ctx, env.ID)).ok(t); got.ID != env.ID || got.Name != "builders" {
		t.Errorf("GetEnvironment = %+v", got)
	}
	newName := "builders-2"
	upd := must(c.UpdateEnvironment(ctx, env.ID, api.UpdateEnvironmentRequest{Name: &newName, Metadata: map[string]*string{"site": nil, "zone": ptr("z")}})).ok(t)
	if upd.Name != newName || upd.Metadata["site"] != "" || upd.Metadata["zone"] != "z" {
		t.Errorf("UpdateEnvironment = %+v", upd)
	}
	key := must(c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "worker-1"})).ok(t)
	if key.Type != "environment_key" || key.Key == "" || key.EnvironmentID != env.ID {
		t.Errorf("CreateEnvironmentKey = %+v", key)
	}
	other := must(c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "spare"})).ok(t)
	if a := must(c.ArchiveEnvironment(ctx, other.ID)).ok(t); a.ArchivedAt == nil {
		t.Errorf("ArchiveEnvironment = %+v", a)
	}
	var names []string
	for e, err := range c.ListAllEnvironments(ctx, api.EnvironmentListParams{Limit: 1, IncludeArchived: true}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{newName, "spare"}) {
		t.Errorf("ListAllEnvironments = %v", names)
	}
	if p := must(c.ListEnvironments(ctx, api.EnvironmentListParams{})).ok(t); len(p.Data) != 1 || p.Data[0].ID != env.ID {
		t.Errorf("ListEnvironments without archived = %+v", p.Data)
	}
	if d := must(c.DeleteEnvironment(ctx, other.ID)).ok(t); d.ID != other.ID || d.Type != api.EnvironmentDeletedType {
		t.Errorf("DeleteEnvironment = %+v", d)
	}
	_, err := c.GetEnvironment(ctx, other.ID)
	wantAPIError(t, err, 404, api.NotFound)

	agent := must(c.CreateAgent(ctx, api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}})).ok(t)
	if !strings.HasPrefix(agent.ID, "agent_") || agent.Model.ID != api.ScriptedModel || agent.Version != 1 {
		t.Fatalf("CreateAgent = %+v", agent)
	}
	if got := must(c.GetAgent(ctx, agent.ID)).ok(t); got.ID != agent.ID || got.Name != "scripted" {
		t.Errorf("GetAgent = %+v", got)
	}
	old := must(c.CreateAgent(ctx, api.CreateAgentRequest{Name: "old", Model: api.ModelConfig{ID: api.ScriptedModel}})).ok(t)
	if a := must(c.ArchiveAgent(ctx, old.ID)).ok(t); a.ArchivedAt == nil {
		t.Errorf("ArchiveAgent = %+v", a)
	}
	var agents []string
	for a, err := range c.ListAllAgents(ctx, api.AgentListParams{Limit: 1, IncludeArchived: true}) {
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a.ID)
	}
	if len(agents) != 2 || !slices.Contains(agents, old.ID) {
		t.Errorf("ListAllAgents = %v", agents)
	}
	if p := must(c.ListAgents(ctx, api.AgentListParams{})).ok(t); len(p.Data) != 1 || p.Data[0].ID != agent.ID {
		t.Errorf("ListAgents without archived = %+v", p.Data)
	}
}

// workerSetup is an environment with a key, a scripted agent and a session
// waiting for a worker.
type workerSetup struct {
	admin, worker *client.Client
	env           *api.Environment
	session       *api.Session
}

func setupWorker(t *testing.T, rs *testserver.Server) workerSetup {
	t.Helper()
	ctx := context.Background()
	admin := adminClient(t, rs)
	ws := testserver.NewWorkers(t, admin, testserver.ScriptedAgent())
	sess := must(admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: ws.Agent.ID}, EnvironmentID: ws.Env.ID, Title: ptr("first"), Metadata: map[string]string{"k": "v"}})).ok(t)
	worker := admin.With(client.WithBearerToken(ws.Key), client.WithWorkerID("worker-a"))
	return workerSetup{admin: admin, worker: worker, env: ws.Env, session: sess}
}

func TestSessionsAgainstServer(t *testing.T) {
	rs := startServer(t)
	ws := setupWorker(t, rs)
	c, ctx := ws.admin, context.Background()

	s := ws.session
	if !strings.HasPrefix(s.ID, "sesn_") || s.EnvironmentID != ws.env.ID || s.Title == nil || *s.Title != "first" || s.Metadata["k"] != "v" {
		t.Fatalf("CreateSession = %+v", s)
	}
	if got := must(c.GetSession(ctx, s.ID)).ok(t); got.ID != s.ID || got.Agent.Model.ID != api.ScriptedModel {
		t.Errorf("GetSession = %+v", got)
	}
	upd := must(c.UpdateSession(ctx, s.ID, api.UpdateSessionRequest{Title: api.NewNullableString("renamed"), Metadata: map[string]*string{"k": nil}})).ok(t)
	if upd.Title == nil || *upd.Title != "renamed" || upd.Metadata["k"] != "" {
		t.Errorf("UpdateSession = %+v", upd)
	}
	s2 := must(c.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: s.Agent.ID}, EnvironmentID: ws.env.ID})).ok(t)
	var ids []string
	for x, err := range c.ListAllSessions(ctx, api.SessionListParams{Limit: 1, EnvironmentID: ws.env.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, []string{s2.ID, s.ID}) {
		t.Errorf("ListAllSessions = %v, want newest first %v", ids, []string{s2.ID, s.ID})
	}
	if p := must(c.ListSessions(ctx, api.SessionListParams{Statuses: []string{api.SessionTerminated}})).ok(t); len(p.Data) != 0 {
		t.Errorf("no session is terminated, yet the status filter lists %d", len(p.Data))
	}
	if a := must(c.ArchiveSession(ctx, s2.ID)).ok(t); a.ArchivedAt == nil {
		t.Errorf("ArchiveSession = %+v", a)
	}
	if d := must(c.DeleteSession(ctx, s2.ID)).ok(t); d.ID != s2.ID || d.Type != api.SessionDeletedType {
		t.Errorf("DeleteSession = %+v", d)
	}
	_, err := c.GetSession(ctx, s2.ID)
	wantAPIError(t, err, 404, api.NotFound)
}

func TestWorkQueueAgainstServer(t *testing.T) {
	rs := startServer(t)
	ws := setupWorker(t, rs)
	ctx := context.Background()
	envID := ws.env.ID

	st := must(ws.worker.WorkStats(ctx, envID)).ok(t)
	if st.Depth != 1 || st.OldestQueuedAt == nil {
		t.Errorf("WorkStats before the poll = %+v, want one queued item", st)
	}
	w, err := ws.worker.PollWork(ctx, envID, api.WorkPollParams{BlockMS: 50})
	if err != nil || w == nil {
		t.Fatalf("PollWork = %+v, %v", w, err)
	}
	if w.Data.ID != ws.session.ID || w.EnvironmentID != envID || w.Secret == nil {
		t.Fatalf("claimed item = %+v", w)
	}
	secret, err := api.DecodeWorkSecret(*w.Secret)
	if err != nil || secret.SessionsToken == "" || secret.APIBaseURL != rs.URL {
		t.Fatalf("secret = %+v, %v", secret, err)
	}
	if none, err := ws.worker.PollWork(ctx, envID, api.WorkPollParams{BlockMS: 1}); none != nil || err != nil {
		t.Errorf("second poll = %+v, %v; want no work", none, err)
	}
	if st := must(ws.worker.WorkStats(ctx, envID)).ok(t); st.Pending != 1 || st.WorkersPolling != 1 {
		t.Errorf("WorkStats after the poll = %+v, want one pending item and one worker (worker-a)", st)
	}
	acked := must(ws.worker.AckWork(ctx, envID, w.ID)).ok(t)
	if acked.State != api.WorkStarting || acked.Secret != nil {
		t.Errorf("AckWork = %+v, want starting, no secret", acked)
	}

	// Everything about the item goes with the sessions token.
	item := ws.worker.With(client.WithBearerToken(secret.SessionsToken))
	if s := must(item.GetSession(ctx, ws.session.ID)).ok(t); s.ID != ws.session.ID {
		t.Errorf("GetSession with the sessions token = %+v", s)
	}
	hb := must(item.HeartbeatWork(ctx, envID, w.ID, api.WorkHeartbeatParams{ExpectedLastHeartbeat: api.NoHeartbeat, DesiredTTLSeconds: 30})).ok(t)
	if hb.State != api.WorkActive || !hb.LeaseExtended || hb.TTLSeconds != 30 || hb.LastHeartbeat == "" {
		t.Fatalf("first heartbeat = %+v", hb)
	}
	hb2 := must(item.HeartbeatWork(ctx, envID, w.ID, api.WorkHeartbeatParams{ExpectedLastHeartbeat: hb.LastHeartbeat})).ok(t)
	_, err = item.HeartbeatWork(ctx, envID, w.ID, api.WorkHeartbeatParams{ExpectedLastHeartbeat: api.NoHeartbeat})
	lease, lost := client.StaleHeartbeat(err)
	if !lost || lease == nil || lease.State != api.WorkActive || lease.LastHeartbeat == nil || *lease.LastHeartbeat != hb2.LastHeartbeat {
		t.Errorf("stale heartbeat: err = %v, lease = %+v, want the 412 with the current lease", err, lease)
	}

	got := must(ws.admin.GetWork(ctx, envID, w.ID)).ok(t)
	if got.State != api.WorkActive || got.Secret != nil || got.LatestHeartbeatAt == nil {
		t.Errorf("GetWork = %+v", got)
	}
	meta := must(ws.admin.UpdateWork(ctx, envID, w.ID, api.UpdateWorkRequest{Metadata: map[string]*string{"host": ptr("h1")}})).ok(t)
	if meta.Metadata["host"] != "h1" {
		t.Errorf("UpdateWork = %+v", meta)
	}
	var listed []string
	for x, err := range ws.worker.ListAllWork(ctx, envID, api.WorkListParams{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, x.ID)
	}
	if !slices.Equal(listed, []string{w.ID}) {
		t.Errorf("ListAllWork = %v", listed)
	}
	if p := must(ws.worker.ListWork(ctx, envID, api.WorkListParams{})).ok(t); len(p.Data) != 1 {
		t.Errorf("ListWork = %+v", p.Data)
	}

	// A graceful stop reaches the worker on its next beat; a forced one ends
	// the item; stopping it again is a conflict.
	if err := ws.admin.StopWork(ctx, envID, w.ID, api.StopWorkRequest{}); err != nil {
		t.Fatal(err)
	}
	if hb3 := must(item.HeartbeatWork(ctx, envID, w.ID, api.WorkHeartbeatParams{ExpectedLastHeartbeat: hb2.LastHeartbeat})).ok(t); hb3.State != api.WorkStopping {
		t.Errorf("heartbeat after a graceful stop = %+v, want stopping", hb3)
	}
	if err := item.StopWork(ctx, envID, w.ID, api.StopWorkRequest{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := must(ws.admin.GetWork(ctx, envID, w.ID)).ok(t); got.State != api.WorkStopped || got.StoppedAt == nil {
		t.Errorf("after a forced stop = %+v", got)
	}
	err = ws.admin.StopWork(ctx, envID, w.ID, api.StopWorkRequest{Force: true})
	wantAPIError(t, err, 409, api.Conflict)

	// The stopped item's token no longer works.
	_, err = item.GetSession(ctx, ws.session.ID)
	wantAPIError(t, err, 403, api.Permission)
}

func TestEventsAgainstServer(t *testing.T) {
	rs := startServer(t)
	ws := setupWorker(t, rs)
	c, ctx := ws.admin, context.Background()
	sid := ws.session.ID

	sent := must(c.SendEvents(ctx, sid, api.UserMessage("hello"), api.UserMessage("again"))).ok(t)
	if len(sent.Data) != 2 || !strings.HasPrefix(sent.Data[0].ID, "sevt_") || sent.Data[0].Text() != "hello" {
		t.Fatalf("SendEvents = %+v", sent)
	}
	var texts []string
	for e, err := range c.ListAllEvents(ctx, sid, api.EventListParams{Limit: 1, Types: []string{api.EventUserMessage}}) {
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, e.Text())
	}
	if !slices.Equal(texts, []string{"hello", "again"}) {
		t.Errorf("ListAllEvents = %v", texts)
	}
	desc := must(c.ListEvents(ctx, sid, api.EventListParams{Order: "desc", Types: []string{api.EventUserMessage}})).ok(t)
	if len(desc.Data) != 2 || desc.Data[0].Text() != "again" {
		t.Errorf("ListEvents desc = %+v", desc.Data)
	}

	// A live stream sees what is sent after it opened.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := c.StreamEvents(sctx, sid, client.StreamEventsParams{})
	if err != nil {
		t.Fatal(err)
	}
	third := must(c.SendEvents(ctx, sid, api.UserMessage("third"))).ok(t)
	e := nextUserMessage(t, s)
	if e.Text() != "third" || e.ID != third.Data[0].ID || s.LastEventID() != e.ID {
		t.Errorf("streamed %+v (last id %q), want the third message", e, s.LastEventID())
	}
	s.Close()

	// Reconnecting from LastEventID loses nothing sent while disconnected.
	must(c.SendEvents(ctx, sid, api.UserMessage("fourth"))).ok(t)
	s, err = c.StreamEvents(sctx, sid, client.StreamEventsParams{LastEventID: e.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e := nextUserMessage(t, s); e.Text() != "fourth" {
		t.Errorf("after resuming, streamed %q, want fourth", e.Text())
	}

	// Interrupts are events too.
	must(c.SendEvents(ctx, sid, api.UserInterrupt())).ok(t)
	if p := must(c.ListEvents(ctx, sid, api.EventListParams{Types: []string{api.EventUserInterrupt}})).ok(t); len(p.Data) != 1 {
		t.Errorf("interrupts listed = %d, want 1", len(p.Data))
	}

	_, err = c.StreamEvents(ctx, sid, client.StreamEventsParams{LastEventID: "not-an-event"})
	wantAPIError(t, err, 400, api.InvalidRequest)
}

// nextUserMessage reads the stream up to the next user.message, skipping
// what the runtime emits around it.
func nextUserMessage(t *testing.T, s *client.EventStream) api.Event {
	t.Helper()
	for s.Next() {
		if e := s.Event(); e.Type == api.EventUserMessage {
			return e
		}
	}
	t.Fatalf("stream ended before a user.message: %v", s.Err())
	return api.Event{}
}
