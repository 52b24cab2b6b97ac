package server

import (
	"net/http"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// scopeFixture: two environments with a key each, a session on each, the
// first session's item claimed (so its sessions token exists).
type scopeFixture struct {
	*cpEnv
	envA, envB   api.Environment
	keyA, keyB   string
	sessA, sessB api.Session
	workA        *api.Work
	tokA         string
}

func newScopeFixture(t *testing.T) *scopeFixture {
	e := newCPEnv(t)
	f := &scopeFixture{cpEnv: e, envA: e.environment("a"), envB: e.environment("b")}
	f.keyA, f.keyB = e.envKey(f.envA.ID), e.envKey(f.envB.ID)
	ag := e.scriptedAgent()
	script := map[string]any{"initial_events": []any{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}],"end":"terminate"}`)}}
	f.sessA = e.session(f.envA.ID, ag.ID, script)
	f.sessB = e.session(f.envB.ID, ag.ID, script)
	var sec api.WorkSecret
	f.workA, sec = e.poll(f.envA.ID, f.keyA, "w")
	f.tokA = sec.SessionsToken
	return f
}

// refused asserts that a call answers status with the given error type.
func (f *scopeFixture) refused(status int, typ api.ErrorType, method, path, cred string, body any) {
	f.t.Helper()
	r := f.call(method, path, cred, body)
	if r.status != status || r.errType() != string(typ) {
		f.t.Fatalf("%s %s: %d %s; want %d %s", method, path, r.status, r.body, status, typ)
	}
}

func (f *scopeFixture) eventCount(sessionID string) int { return len(f.events(sessionID)) }

func TestScopeEnvironmentKeyServesOnlyItsOwnQueue(t *testing.T) {
	f := newScopeFixture(t)
	workB := f.workIDs(f.envB.ID)[0]
	base := "/v1/environments/" + f.envB.ID + "/work"
	for _, c := range []struct{ method, path string }{
		{"GET", base + "/poll"},
		{"GET", base},
		{"GET", base + "/stats"},
		{"GET", base + "/" + workB},
		{"POST", base + "/" + workB + "/ack"},
		{"POST", base + "/" + workB + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT"},
		{"POST", base + "/" + workB + "/stop"},
	} {
		f.refused(http.StatusForbidden, api.Permission, c.method, c.path, f.keyA, nil)
	}
	if w := f.work(f.envB.ID, workB); w.State != api.WorkQueued || w.AcknowledgedAt != nil || w.StopRequestedAt != nil {
		t.Fatalf("refused calls changed environment b's item: %+v", w)
	}
	if w, _ := f.poll(f.envB.ID, f.keyB, "b"); w == nil || w.ID != workB {
		t.Fatal("environment b's own key cannot claim its item after the refusals")
	}
}

func (f *scopeFixture) workIDs(env string) []string {
	var page api.Page[api.Work]
	f.must(200, "GET", "/v1/environments/"+env+"/work", f.apiKey, nil, &page)
	var out []string
	for _, w := range page.Data {
		out = append(out, w.ID)
	}
	return out
}

func TestScopeEnvironmentKeyReadsOnlyItsEnvironmentsSessions(t *testing.T) {
	f := newScopeFixture(t)
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID, f.keyA, nil, nil)
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID+"/events", f.keyA, nil, nil)
	n := f.eventCount(f.sessB.ID)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessB.ID, f.keyA, nil)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessB.ID+"/events", f.keyA, nil)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessB.ID+"/events/stream", f.keyA, nil)
	f.refused(403, api.Permission, "POST", "/v1/sessions/"+f.sessB.ID+"/events", f.keyA, api.SendEventsRequest{Events: []api.Event{api.UserInterrupt()}})
	if f.eventCount(f.sessB.ID) != n {
		t.Fatal("a refused send appended events")
	}
	// Sessions are created, listed, changed and removed with an API key only.
	f.refused(403, api.Permission, "GET", "/v1/sessions", f.keyA, nil)
	f.refused(403, api.Permission, "POST", "/v1/sessions", f.keyA, map[string]any{"agent": f.sessA.Agent.ID, "environment_id": f.envA.ID})
	f.refused(403, api.Permission, "POST", "/v1/sessions/"+f.sessA.ID, f.keyA, map[string]any{"title": "x"})
	f.refused(403, api.Permission, "POST", "/v1/sessions/"+f.sessA.ID+"/archive", f.keyA, nil)
	f.refused(403, api.Permission, "DELETE", "/v1/sessions/"+f.sessA.ID, f.keyA, nil)
	var page api.Page[api.Session]
	f.must(200, "GET", "/v1/sessions", f.apiKey, nil, &page)
	if len(page.Data) != 2 || page.Data[0].Title != nil || page.Data[0].ArchivedAt != nil || page.Data[1].ArchivedAt != nil {
		t.Fatalf("refused session calls changed the sessions: %+v", page.Data)
	}
}

func TestScopeEnvironmentKeyCannotManageEnvironmentsOrAgents(t *testing.T) {
	f := newScopeFixture(t)
	keys := f.credentialCount(storage.EnvironmentKey)
	f.refused(403, api.Permission, "POST", "/v1/environments", f.keyA, api.CreateEnvironmentRequest{Name: "x"})
	f.refused(403, api.Permission, "GET", "/v1/environments", f.keyA, nil)
	f.refused(403, api.Permission, "POST", "/v1/environments/"+f.envA.ID+"/keys", f.keyA, nil)
	f.refused(403, api.Permission, "POST", "/v1/environments/"+f.envA.ID, f.keyA, map[string]any{"name": "renamed"})
	f.refused(403, api.Permission, "POST", "/v1/environments/"+f.envA.ID+"/archive", f.keyA, nil)
	f.refused(403, api.Permission, "DELETE", "/v1/environments/"+f.envB.ID, f.keyA, nil)
	f.refused(403, api.Permission, "POST", "/v1/agents", f.keyA, map[string]any{"name": "a", "model": "scripted"})
	f.refused(403, api.Permission, "GET", "/v1/environments/"+f.envB.ID, f.keyA, nil)
	if n := f.credentialCount(storage.EnvironmentKey); n != keys {
		t.Fatalf("environment keys %d → %d", keys, n)
	}
	var list api.Page[api.Environment]
	f.must(200, "GET", "/v1/environments", f.apiKey, nil, &list)
	if len(list.Data) != 2 || list.Data[1].Name != "a" || list.Data[1].ArchivedAt != nil {
		t.Fatalf("environments after refused calls: %+v", list.Data)
	}
	var agents api.Page[api.Agent]
	f.must(200, "GET", "/v1/agents", f.apiKey, nil, &agents)
	if len(agents.Data) != 1 {
		t.Fatalf("%d agents", len(agents.Data))
	}
}

func TestScopeSessionsTokenReachesOnlyItsSessionAndWork(t *testing.T) {
	f := newScopeFixture(t)
	// Its own session and item work.
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID, f.tokA, nil, nil)
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID+"/events", f.tokA, nil, nil)
	f.must(200, "POST", "/v1/environments/"+f.envA.ID+"/work/"+f.workA.ID+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", f.tokA, nil, nil)

	n := f.eventCount(f.sessB.ID)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessB.ID, f.tokA, nil)
	f.refused(403, api.Permission, "POST", "/v1/sessions/"+f.sessB.ID+"/events", f.tokA, api.SendEventsRequest{Events: []api.Event{api.UserInterrupt()}})
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessB.ID+"/events/stream", f.tokA, nil)
	if f.eventCount(f.sessB.ID) != n {
		t.Fatal("a refused send appended events to another session")
	}
	workB := f.workIDs(f.envB.ID)[0]
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/environments/" + f.envB.ID + "/work/" + workB + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT"},
		{"POST", "/v1/environments/" + f.envB.ID + "/work/" + workB + "/stop"},
		{"GET", "/v1/environments/" + f.envA.ID + "/work/poll"},
		{"POST", "/v1/environments/" + f.envA.ID + "/work/" + f.workA.ID + "/ack"},
		{"GET", "/v1/environments/" + f.envA.ID + "/work/" + f.workA.ID},
		{"GET", "/v1/environments/" + f.envA.ID + "/work"},
		{"GET", "/v1/environments/" + f.envA.ID + "/work/stats"},
		{"GET", "/v1/sessions"},
		{"POST", "/v1/environments/" + f.envA.ID + "/keys"},
	} {
		f.refused(403, api.Permission, c.method, c.path, f.tokA, nil)
	}
	if w := f.work(f.envB.ID, workB); w.State != api.WorkQueued || w.StopRequestedAt != nil || w.LatestHeartbeatAt != nil {
		t.Fatalf("refused calls changed another item: %+v", w)
	}
	if w := f.work(f.envA.ID, f.workA.ID); w.AcknowledgedAt == nil && w.State != api.WorkActive {
		t.Fatalf("own item state: %+v", w)
	}
}

func TestScopeSessionsTokenOutlivesTerminationButNotTheStop(t *testing.T) {
	f := newScopeFixture(t)
	evs := f.events(f.sessA.ID)
	// The agent's call gets its answer and the script terminates the session.
	f.must(200, "POST", "/v1/sessions/"+f.sessA.ID+"/events", f.tokA, api.SendEventsRequest{Events: []api.Event{api.UserToolResult(evs[2].ID, "", false)}}, nil)
	var sess api.Session
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID, f.tokA, nil, &sess)
	if sess.Status != api.SessionTerminated {
		t.Fatalf("status = %s", sess.Status)
	}
	// After termination the token still reads (the worker's final sync).
	f.must(200, "GET", "/v1/sessions/"+f.sessA.ID+"/events", f.tokA, nil, nil)
	// Once the item is stopped, it no longer works, for anything.
	f.must(204, "POST", "/v1/environments/"+f.envA.ID+"/work/"+f.workA.ID+"/stop", f.tokA, api.StopWorkRequest{Force: true}, nil)
	n := f.eventCount(f.sessA.ID)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessA.ID, f.tokA, nil)
	f.refused(403, api.Permission, "GET", "/v1/sessions/"+f.sessA.ID+"/events", f.tokA, nil)
	f.refused(403, api.Permission, "POST", "/v1/sessions/"+f.sessA.ID+"/events", f.tokA, api.SendEventsRequest{Events: []api.Event{api.UserInterrupt()}})
	if f.eventCount(f.sessA.ID) != n {
		t.Fatal("a dead token appended events")
	}
	// Except that its worker may still learn the item's state and get the
	// 409 it expects for a second stop.
	var hb api.WorkHeartbeat
	f.must(200, "POST", "/v1/environments/"+f.envA.ID+"/work/"+f.workA.ID+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", f.tokA, nil, &hb)
	if hb.State != api.WorkStopped || hb.LeaseExtended {
		t.Fatalf("heartbeat of the stopped item = %+v", hb)
	}
	f.refused(409, api.Conflict, "POST", "/v1/environments/"+f.envA.ID+"/work/"+f.workA.ID+"/stop", f.tokA, nil)
}

func TestScopeSessionsTokenDiesWithItsSession(t *testing.T) {
	f := newScopeFixture(t)
	f.must(200, "DELETE", "/v1/sessions/"+f.sessA.ID, f.apiKey, nil, nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions/" + f.sessA.ID},
		{"POST", "/v1/environments/" + f.envA.ID + "/work/" + f.workA.ID + "/heartbeat?expected_last_heartbeat=NO_HEARTBEAT"},
		{"POST", "/v1/environments/" + f.envA.ID + "/work/" + f.workA.ID + "/stop"},
	} {
		f.refused(401, api.Authentication, c.method, c.path, f.tokA, nil)
	}
	if w := f.work(f.envA.ID, f.workA.ID); w.State != api.WorkStopped {
		t.Fatalf("the deleted session's item = %+v", w)
	}
}

func TestScopeDeletedEnvironmentKeyStopsWorking(t *testing.T) {
	f := newScopeFixture(t)
	f.must(200, "DELETE", "/v1/sessions/"+f.sessB.ID, f.apiKey, nil, nil)
	f.must(200, "DELETE", "/v1/environments/"+f.envB.ID, f.apiKey, nil, nil)
	f.refused(401, api.Authentication, "GET", "/v1/environments/"+f.envB.ID+"/work/poll", f.keyB, nil)
}
