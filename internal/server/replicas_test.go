package server

import (
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/modeltest"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// replicas starts n servers on one PostgreSQL database, each with its own
// handle and the real clock (the database's), as separate processes are,
// each following the others' changes and sweeping for dropped turns.
func replicas(t testing.TB, n int, opts ...func(*cpConfig)) []*cpEnv {
	rs := quietReplicas(t, n, opts...)
	for _, r := range rs {
		r.listen(t)
	}
	return rs
}

// quietReplicas is replicas before each listens: a replica that does not
// listen yet neither hears of the others' changes nor sweeps for turns.
func quietReplicas(t testing.TB, n int, opts ...func(*cpConfig)) []*cpEnv {
	url := testenv.PostgresSchema(t)
	out := make([]*cpEnv, n)
	for i := range out {
		db, err := postgres.Open(t.Context(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		out[i] = newCPEnv(t, append(opts, func(c *cpConfig) { c.App.Store, c.App.Now = db, nil })...)
		if i > 0 {
			out[i].apiKey = out[0].apiKey // bootstrapped once, in the shared database
		}
	}
	return out
}

// listen starts e following the changes the other replicas commit, and
// sweeping for the turns a dead replica dropped.
func (e *cpEnv) listen(t testing.TB) {
	if err := e.app.ListenForWakes(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The queue statistics, workers_polling included, are the database's: a
// worker polling one replica is counted by the stats of another, and a
// claim made through one shows as pending through the other.
func TestQueueStatsAreTheSameOnEveryReplica(t *testing.T) {
	rs := replicas(t, 2)
	a := rs[0]
	env := a.environment("shared")
	key := a.envKey(env.ID)
	sess := a.session(env.ID, a.scriptedAgent().ID, nil)
	if w, _ := a.poll(env.ID, key, "worker-a"); w == nil || w.Data.ID != sess.ID {
		t.Fatalf("polling replica a claimed %+v, want the session's item", w)
	}
	for _, r := range rs {
		var st api.WorkQueueStats
		r.must(200, "GET", "/v1/environments/"+env.ID+"/work/stats", key, nil, &st)
		if st.Depth != 0 || st.Pending != 1 || st.WorkersPolling != 1 {
			t.Fatalf("stats through %s = %+v, want 1 pending, 1 worker polling", r.hs.URL, st)
		}
	}
}

// Replicas started together with one MEMSTORE_ADMIN_KEY all start: the
// ones that lose the race to register it find it registered.
func TestReplicasRegisterOneAdminKeyTogether(t *testing.T) {
	rs := replicas(t, 4)
	errs := make(chan error, len(rs))
	for _, r := range rs {
		go func() {
			_, _, err := r.app.Credentials.BootstrapAdminKey(t.Context(), "sk-memstore-shared-admin")
			errs <- err
		}()
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatalf("a replica failed to start: %v", err)
		}
	}
	rs[3].must(200, "GET", "/v1/memory_stores", "sk-memstore-shared-admin", nil, nil)
}

// A model call in flight on one replica is cancelled by an interrupt sent
// through another: the replica holding the session's turn is nudged by the
// other's write, and the turn ends once, on the holder.
func TestAnInterruptThroughAnotherReplicaReachesTheTurnsHolder(t *testing.T) {
	u := modeltest.New(t)
	cancelled := make(chan struct{})
	u.Hang(cancelled)
	u.Reply(anthropic.StopReasonEndTurn, modeltest.Usage(1, 1, 0, 0), modeltest.Text("unused"))
	rs := replicas(t, 2, func(c *cpConfig) { c.App.Model = agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"} })
	a, b := rs[0], rs[1]
	sess := startModelTurn(a, "think hard")
	<-u.Arrived // replica a holds the turn, its model call in flight
	b.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", b.apiKey, map[string]any{"events": []api.Event{api.UserInterrupt()}}, nil)
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // a safety bound, not a timing
		t.Fatal("the model call on replica a went on after an interrupt sent through replica b")
	}
	want := "user.message session.status_running span.model_request_start user.interrupt span.model_request_end session.status_idle"
	if got := logUntil(b, sess.ID, api.EventSessionStatusIdle); got != want || u.Count() != 1 {
		t.Fatalf("log %s after %d model calls; want %s after 1", got, u.Count(), want)
	}
}

// A replica that dies in the middle of a model call drops the session's
// turn; another replica, which no request about the session reached, finds
// it in its sweep, makes the call again, and the tool call is emitted once.
// Replica b starts listening only once a holds the turn: listening from the
// start, b's sweep could take the turn first, and a's death would drop
// nothing.
func TestATurnDroppedByADeadReplicaIsTakenUp(t *testing.T) {
	u := modeltest.New(t)
	cancelled := make(chan struct{})
	u.Hang(cancelled)
	u.Reply(anthropic.StopReasonToolUse, modeltest.Usage(1, 1, 0, 0), modeltest.ToolUse("toolu_1", "glob", `{"pattern":"**"}`))
	rs := quietReplicas(t, 2, func(c *cpConfig) {
		c.App.Model = agent.ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test"}
		c.App.TurnSweep, c.App.TurnRetry = 20*time.Millisecond, 20*time.Millisecond
	})
	a, b := rs[0], rs[1]
	a.listen(t)
	sess := startModelTurn(a, "look")
	<-u.Arrived // replica a holds the turn, its model call in flight
	b.listen(t)
	a.app.Close() // replica a dies: its runner stops, its connections end
	a.db.Close()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // a safety bound, not a timing
		t.Fatal("replica a's model call went on after its server closed")
	}
	want := "user.message session.status_running span.model_request_start agent.tool_use span.model_request_end"
	if got := logUntil(b, sess.ID, api.EventSpanModelRequestEnd); got != want || u.Count() != 2 {
		t.Fatalf("log %s after %d model calls; want %s after 2", got, u.Count(), want)
	}
}

// startModelTurn creates, through e, a session of an agent with a Claude
// model and the whole toolset, and sends it message: its turn starts.
func startModelTurn(e *cpEnv, message string) api.Session {
	env := e.environment("model")
	var ag api.Agent
	e.must(200, "POST", "/v1/agents", e.apiKey, map[string]any{"name": "model", "model": map[string]string{"id": "claude-sonnet-4-5"},
		"tools": []map[string]string{{"type": "agent_toolset_20260401"}}}, &ag)
	sess := e.session(env.ID, ag.ID, nil)
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, map[string]any{"events": []api.Event{api.UserMessage(message)}}, nil)
	return sess
}

// logUntil reads a session's event types through e until the last is last
// (a safety bound ends a test that would hang), space-separated.
func logUntil(e *cpEnv, sessionID, last string) string {
	var got string
	for bound := time.Now().Add(30 * time.Second); !strings.HasSuffix(got, last) && time.Now().Before(bound); time.Sleep(10 * time.Millisecond) {
		var page api.Page[api.Event]
		e.must(200, "GET", "/v1/sessions/"+sessionID+"/events?limit=100", e.apiKey, nil, &page)
		var types []string
		for _, ev := range page.Data {
			types = append(types, ev.Type)
		}
		got = strings.Join(types, " ")
	}
	return got
}
