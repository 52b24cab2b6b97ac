package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
)

func TestCreateSessionRefusals(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	ag := e.scriptedAgent()
	archivedEnv := e.environment("old")
	e.must(200, "POST", "/v1/environments/"+archivedEnv.ID+"/archive", e.apiKey, nil, nil)
	archivedAgent := e.scriptedAgent()
	e.must(200, "POST", "/v1/agents/"+archivedAgent.ID+"/archive", e.apiKey, nil, nil)
	nine := make([]map[string]any, 9)
	for i := range nine {
		nine[i] = map[string]any{"type": "memory_store", "memory_store_id": "memstore_01JZZZZZZZZZZZZZZZZZZZZZZ" + string(rune('A'+i))}
	}
	k := e.apiKey
	bad := func(name string, body map[string]any, status int, mention ...string) cpRefusal {
		typ := api.InvalidRequest
		if status == 404 {
			typ = api.NotFound
		}
		return cpRefusal{name, "POST", "/v1/sessions", k, body, status, typ, mention}
	}
	e.checkRefusals(t, []cpRefusal{
		bad("no agent", map[string]any{"environment_id": env.ID}, 400, "agent is required"),
		bad("unknown agent", map[string]any{"agent": "agent_01JZZZZZZZZZZZZZZZZZZZZZZZ", "environment_id": env.ID}, 404, "agent", "no agent"),
		bad("archived agent", map[string]any{"agent": archivedAgent.ID, "environment_id": env.ID}, 400, "agent", "archived"),
		bad("wrong version", map[string]any{"agent": map[string]any{"type": "agent", "id": ag.ID, "version": 2}, "environment_id": env.ID}, 404, "no version 2"),
		bad("no environment", map[string]any{"agent": ag.ID}, 400, "environment_id is required"),
		bad("agent overrides", map[string]any{"agent": map[string]any{"type": "agent_with_overrides", "id": ag.ID, "system": "x"}, "environment_id": env.ID}, 400, "agent_with_overrides"),
		bad("archived environment", map[string]any{"agent": ag.ID, "environment_id": archivedEnv.ID}, 400, "environment", "archived"),
		bad("file resource", map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": []any{map[string]any{"type": "file", "file_id": "f"}}}, 400, "resources[0]", "only memory_store"),
		bad("nine stores", map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": nine}, 400, "resources", "at most 8"),
		bad("bad access", map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": []any{map[string]any{"type": "memory_store", "memory_store_id": "memstore_x", "access": "write"}}}, 400, "resources[0].access"),
		bad("long instructions", map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": []any{map[string]any{"type": "memory_store", "memory_store_id": "memstore_x", "instructions": strings.Repeat("i", api.MaxResourceInstructions+1)}}}, 400, "resources[0].instructions", "4096"),
		bad("unknown store", map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": []any{map[string]any{"type": "memory_store", "memory_store_id": "memstore_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}, 404, "resources[0].memory_store_id", "no memory store"),
		bad("vaults", map[string]any{"agent": ag.ID, "environment_id": env.ID, "vault_ids": []string{"v"}}, 400, "vault"),
		bad("non-message initial event", map[string]any{"agent": ag.ID, "environment_id": env.ID, "initial_events": []any{map[string]any{"type": "user.interrupt"}}}, 400, "initial_events", "user.message"),
		bad("bad metadata", map[string]any{"agent": ag.ID, "environment_id": env.ID, "metadata": map[string]string{"": "x"}}, 400, "metadata"),
	})
	var page api.Page[api.Session]
	e.must(200, "GET", "/v1/sessions?include_archived=true", e.apiKey, nil, &page)
	var work api.Page[api.Work]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, &work)
	if len(page.Data) != 0 || len(work.Data) != 0 {
		t.Fatalf("refused creates left %d sessions and %d work items", len(page.Data), len(work.Data))
	}
}

func TestSessionLifecycleAndList(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	ag := e.scriptedAgent()
	s1 := e.session(env.ID, ag.ID, map[string]any{"title": "one", "metadata": map[string]string{"k": "v"}})
	if s1.Status != api.SessionIdle || s1.Title == nil || *s1.Title != "one" || s1.Agent.Model.ID != api.ScriptedModel || s1.Agent.Version != 1 || len(s1.Resources) != 0 {
		t.Fatalf("created = %+v", s1)
	}
	e.clock.Advance(time.Second)
	s2 := e.session(env.ID, ag.ID, map[string]any{"initial_events": []any{api.UserMessage(`{"tool_calls":[]}`)}})
	if s2.Status != api.SessionIdle {
		t.Fatalf("a script with no calls should end idle at once, status %s", s2.Status)
	}
	if evs := e.events(s2.ID); len(evs) != 4 || evs[2].Type != api.EventAgentMessage {
		t.Fatalf("initial events log: %+v", evs)
	}
	var page api.Page[api.Session]
	e.must(200, "GET", "/v1/sessions?limit=1", e.apiKey, nil, &page)
	if len(page.Data) != 1 || page.Data[0].ID != s2.ID || page.NextPage == nil {
		t.Fatalf("first page = %+v", page)
	}
	var page2 api.Page[api.Session]
	e.must(200, "GET", "/v1/sessions?limit=1&page="+*page.NextPage, e.apiKey, nil, &page2)
	if len(page2.Data) != 1 || page2.Data[0].ID != s1.ID || page2.NextPage != nil {
		t.Fatalf("second page = %+v", page2)
	}
	if r := e.call("GET", "/v1/sessions?order=asc&page="+*page.NextPage, e.apiKey, nil); r.status != 400 {
		t.Fatalf("a desc cursor on an asc list: %d", r.status)
	}

	var up api.Session
	e.must(200, "POST", "/v1/sessions/"+s1.ID, e.apiKey, map[string]any{"title": nil, "metadata": map[string]any{"k": nil, "n": "1"}}, &up)
	if up.Title != nil || up.Metadata["n"] != "1" || len(up.Metadata) != 1 {
		t.Fatalf("updated = %+v", up)
	}

	var arch api.Session
	e.must(200, "POST", "/v1/sessions/"+s1.ID+"/archive", e.apiKey, nil, &arch)
	if arch.Status != api.SessionTerminated || arch.ArchivedAt == nil {
		t.Fatalf("archived = %+v", arch)
	}
	if r := e.call("POST", "/v1/sessions/"+s1.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage("x")}}); r.status != 400 {
		t.Fatalf("message to an archived session: %d %s", r.status, r.body)
	}
	e.must(200, "GET", "/v1/sessions", e.apiKey, nil, &page)
	if len(page.Data) != 1 || page.Data[0].ID != s2.ID {
		t.Fatalf("default list shows archived sessions: %+v", page.Data)
	}

	var del api.Deleted
	e.must(200, "DELETE", "/v1/sessions/"+s2.ID, e.apiKey, nil, &del)
	if del.ID != s2.ID || del.Type != "session_deleted" {
		t.Fatalf("deleted = %+v", del)
	}
	if r := e.call("GET", "/v1/sessions/"+s2.ID, e.apiKey, nil); r.status != 404 {
		t.Fatalf("deleted session: %d", r.status)
	}
	if r := e.call("DELETE", "/v1/environments/"+env.ID, e.apiKey, nil); r.status != 409 {
		t.Fatalf("deleting an environment in use: %d", r.status)
	}
}

func TestMessageToASessionWithoutWorkRequeuesIt(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	key := e.envKey(env.ID)
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"initial_events": []any{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)}})
	w, _ := e.poll(env.ID, key, "a")
	// The worker fails the item: it force-stops it without answering.
	e.must(204, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/stop", key, api.StopWorkRequest{Force: true}, nil)
	evs := e.events(sess.ID)
	last := evs[len(evs)-1]
	if last.Type != api.EventSessionStatusIdle || last.StopReason.Type != api.StopRequiresAction || last.StopReason.EventIDs[0] != evs[2].ID {
		t.Fatalf("after the failed item: %+v", last)
	}
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+sess.ID, e.apiKey, nil, &got)
	if got.Status != api.SessionIdle {
		t.Fatalf("status = %s", got.Status)
	}
	// An interrupt ends the turn and queues a new item for the session.
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserInterrupt()}}, nil)
	w2, _ := e.poll(env.ID, key, "b")
	if w2 == nil || w2.ID == w.ID || w2.Data.ID != sess.ID {
		t.Fatalf("after the interrupt, poll = %+v", w2)
	}
	evs = e.events(sess.ID)
	if last := evs[len(evs)-1]; last.Type != api.EventSessionStatusIdle || last.StopReason.Type != api.StopEndTurn {
		t.Fatalf("after the interrupt: %+v", last)
	}
	// A message while an item is live queues nothing more.
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}, nil)
	var page api.Page[api.Work]
	e.must(200, "GET", "/v1/environments/"+env.ID+"/work", e.apiKey, nil, &page)
	if len(page.Data) != 2 {
		t.Fatalf("%d work items, want 2", len(page.Data))
	}
}

func TestEventListPagingOrderAndTypes(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	for i := 0; i < 3; i++ {
		e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage(`{"tool_calls":[]}`)}}, nil)
	}
	all := e.events(sess.ID)
	if len(all) != 12 {
		t.Fatalf("%d events, want 12", len(all))
	}
	var ids []string
	page := "limit=5"
	for {
		var p api.Page[api.Event]
		e.must(200, "GET", "/v1/sessions/"+sess.ID+"/events?"+page, e.apiKey, nil, &p)
		for _, ev := range p.Data {
			ids = append(ids, ev.ID)
		}
		if p.NextPage == nil {
			break
		}
		page = "limit=5&page=" + *p.NextPage
	}
	for i := range all {
		if ids[i] != all[i].ID {
			t.Fatalf("paged ids differ at %d", i)
		}
		if i > 0 && !all[i].ProcessedAt.After(*all[i-1].ProcessedAt) {
			t.Fatalf("processed_at not increasing at %d on a frozen clock", i)
		}
	}
	var desc api.Page[api.Event]
	e.must(200, "GET", "/v1/sessions/"+sess.ID+"/events?order=desc&limit=2&types[]=agent.message&types[]=user.message", e.apiKey, nil, &desc)
	if len(desc.Data) != 2 || desc.Data[0].Type != api.EventAgentMessage || desc.Data[1].Type != api.EventUserMessage || desc.Data[0].ID != all[10].ID {
		t.Fatalf("desc filtered page = %+v", desc.Data)
	}
	var big api.Page[api.Event]
	e.must(200, "GET", "/v1/sessions/"+sess.ID+"/events?limit=5000", e.apiKey, nil, &big)
	if len(big.Data) != 12 {
		t.Fatalf("limit=5000 (clamped) returned %d", len(big.Data))
	}
}

// sseFrame is one parsed Server-Sent Events frame.
type sseFrame struct {
	id, event, data string
	comment         bool
}

// openStream connects to a session's stream and returns a channel of its
// frames.
func (e *cpEnv) openStream(t *testing.T, ctx context.Context, sessionID, cred, lastEventID string) (<-chan sseFrame, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.hs.URL+"/v1/sessions/"+sessionID+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Accept", "application/json") // as the official SDK sends it
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan sseFrame, 64)
	go func() {
		defer close(frames)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f != (sseFrame{}) {
					frames <- f
				}
				f = sseFrame{}
			case strings.HasPrefix(line, ":"):
				frames <- sseFrame{comment: true}
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data += line[6:]
			}
		}
	}()
	return frames, res
}

func nextFrame(t *testing.T, frames <-chan sseFrame) sseFrame {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("stream ended")
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10 s")
	}
	return sseFrame{}
}

func TestStreamFramesResumeAndEnd(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames, res := e.openStream(t, ctx, sess.ID, e.apiKey, "")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream answered %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"read","input":{"file_path":"/x"}}]}`)}}, nil)
	var got []sseFrame
	for len(got) < 3 {
		got = append(got, nextFrame(t, frames))
	}
	want := []string{api.EventUserMessage, api.EventSessionStatusRunning, api.EventAgentToolUse}
	all := e.events(sess.ID)
	for i, f := range got {
		var ev api.Event
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatal(err)
		}
		if f.event != want[i] || ev.Type != want[i] || f.id != ev.ID || f.id != all[i].ID {
			t.Fatalf("frame %d = %+v, want event %s with id %s", i, f, want[i], all[i].ID)
		}
	}
	cancel()

	// A reconnect with Last-Event-ID gets exactly what came after.
	e.must(200, "POST", "/v1/sessions/"+sess.ID+"/events", e.apiKey, api.SendEventsRequest{Events: []api.Event{api.UserToolResult(all[2].ID, "content", false)}}, nil)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	frames2, _ := e.openStream(t, ctx2, sess.ID, e.apiKey, got[1].id)
	var resumed []string
	for len(resumed) < 4 {
		resumed = append(resumed, nextFrame(t, frames2).event)
	}
	if strings.Join(resumed, " ") != "agent.tool_use user.tool_result agent.message session.status_idle" {
		t.Fatalf("resumed = %v", resumed)
	}
	// Deleting the session ends the stream with session.deleted.
	e.must(200, "DELETE", "/v1/sessions/"+sess.ID, e.apiKey, nil, nil)
	if f := nextFrame(t, frames2); f.event != api.EventSessionDeleted {
		t.Fatalf("after delete: %+v", f)
	}
	if _, ok := <-frames2; ok {
		t.Fatal("the stream stayed open after session.deleted")
	}

	if r := e.call("GET", "/v1/sessions/"+sess.ID+"/events/stream", e.apiKey, nil); r.status != 404 {
		t.Fatalf("stream of a deleted session: %d", r.status)
	}
}

func TestStreamRefusesAnUnknownLastEventIDAndKeepsAlive(t *testing.T) {
	e := newCPEnv(t, func(c *cpConfig) { c.Server.StreamKeepalive = 20 * time.Millisecond })
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	r := e.call("GET", "/v1/sessions/"+sess.ID+"/events/stream", e.apiKey, nil, "Last-Event-ID", "sevt_01JZZZZZZZZZZZZZZZZZZZZZZZ")
	if r.status != 400 || !strings.Contains(string(r.body), "list the events") {
		t.Fatalf("unknown Last-Event-ID: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames, _ := e.openStream(t, ctx, sess.ID, e.apiKey, "")
	if f := nextFrame(t, frames); !f.comment {
		t.Fatalf("idle stream sent %+v, want a keepalive comment", f)
	}
}

func TestStreamEndsWhenTheTokensWorkStops(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	key := e.envKey(env.ID)
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	w, sec := e.poll(env.ID, key, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames, res := e.openStream(t, ctx, sess.ID, sec.SessionsToken, "")
	if res.StatusCode != 200 {
		t.Fatalf("token stream: %d", res.StatusCode)
	}
	e.must(204, "POST", "/v1/environments/"+env.ID+"/work/"+w.ID+"/stop", e.apiKey, api.StopWorkRequest{Force: true}, nil)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-frames:
			if !ok {
				return // the server closed it
			}
		case <-deadline:
			t.Fatal("the stream stayed open after its token's work item stopped")
		}
	}
}

func TestResumeSettlesASessionWhoseItemStoppedBeforeACrash(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	key := e.envKey(env.ID)
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"initial_events": []any{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"true"}}]}`)}})
	w, _ := e.poll(env.ID, key, "a")
	// The stop committed, then the server died before telling the session.
	if _, err := e.db.StopWork(context.Background(), env.ID, w.ID, true); err != nil {
		t.Fatal(err)
	}
	if evs := e.events(sess.ID); evs[len(evs)-1].Type != api.EventAgentToolUse {
		t.Fatalf("unexpected log before the restart: %+v", evs[len(evs)-1])
	}
	restarted := app.New(app.Config{Store: e.db, Logger: e.app.Logger(), Now: e.clock.Now})
	defer restarted.Close()
	if err := restarted.Sessions.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := e.events(sess.ID)
	if last := evs[len(evs)-1]; last.Type != api.EventSessionStatusIdle || last.StopReason.Type != api.StopRequiresAction {
		t.Fatalf("after Resume: %+v", last)
	}
	if err := restarted.Sessions.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := e.events(sess.ID); len(again) != len(evs) {
		t.Fatal("a second Resume added events")
	}
}

func TestSessionResourcesSnapshotStoresAndMountThemBySlug(t *testing.T) {
	e := newCPEnv(t, func(c *cpConfig) { c.Server.MountPrefix = "/srv/mem" })
	env := e.environment("e")
	ag := e.scriptedAgent()
	mk := func(name, desc string) api.MemoryStore {
		var st api.MemoryStore
		e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": name, "description": desc}, &st)
		return st
	}
	a, b, c := mk("Team Notes", "what the team knows"), mk("team  notes!", ""), mk("???", "")
	archived := mk("old", "")
	e.must(200, "POST", "/v1/memory_stores/"+archived.ID+"/archive", e.apiKey, nil, nil)
	instr := "keep one fact per file"
	sess := e.session(env.ID, ag.ID, map[string]any{"resources": []any{
		map[string]any{"type": "memory_store", "memory_store_id": a.ID, "instructions": instr},
		map[string]any{"type": "memory_store", "memory_store_id": b.ID, "access": "read_only"},
		map[string]any{"type": "memory_store", "memory_store_id": c.ID},
	}})
	r := sess.Resources
	if len(r) != 3 {
		t.Fatalf("resources = %+v", r)
	}
	if r[0].MountPath != "/srv/mem/team-notes" || r[1].MountPath != "/srv/mem/team-notes-2" || r[2].MountPath != "/srv/mem/"+c.ID {
		t.Fatalf("mount paths = %s %s %s", r[0].MountPath, r[1].MountPath, r[2].MountPath)
	}
	if r[0].Access != api.AccessReadWrite || r[1].Access != api.AccessReadOnly || r[0].Instructions == nil || *r[0].Instructions != instr || r[1].Instructions != nil {
		t.Fatalf("access/instructions = %+v", r)
	}
	if r[0].Name != "Team Notes" || r[0].Description != "what the team knows" || r[0].ID == "" || r[0].Type != api.ResourceMemoryStore || r[0].CreatedAt.IsZero() {
		t.Fatalf("snapshot = %+v", r[0])
	}
	// Snapshots: renaming the store later does not change the session.
	e.must(200, "POST", "/v1/memory_stores/"+a.ID, e.apiKey, map[string]any{"name": "Renamed", "description": "new"}, nil)
	var got api.Session
	e.must(200, "GET", "/v1/sessions/"+sess.ID, e.apiKey, nil, &got)
	if got.Resources[0].Name != "Team Notes" || got.Resources[0].Description != "what the team knows" || got.Resources[0].MountPath != "/srv/mem/team-notes" {
		t.Fatalf("after a rename: %+v", got.Resources[0])
	}
	var bySession api.Page[api.Session]
	e.must(200, "GET", "/v1/sessions?memory_store_id="+b.ID, e.apiKey, nil, &bySession)
	if len(bySession.Data) != 1 || bySession.Data[0].ID != sess.ID {
		t.Fatalf("sessions with store b: %+v", bySession.Data)
	}

	// Refusals: an archived store, the same store twice.
	for _, c := range []struct {
		res  []any
		want string
	}{
		{[]any{map[string]any{"type": "memory_store", "memory_store_id": archived.ID}}, "archived"},
		{[]any{map[string]any{"type": "memory_store", "memory_store_id": a.ID}, map[string]any{"type": "memory_store", "memory_store_id": a.ID}}, "already attached"},
	} {
		r := e.call("POST", "/v1/sessions", e.apiKey, map[string]any{"agent": ag.ID, "environment_id": env.ID, "resources": c.res})
		if r.status != 400 || !strings.Contains(string(r.body), c.want) {
			t.Fatalf("%v: %d %s", c.res, r.status, r.body)
		}
	}
	var all api.Page[api.Session]
	e.must(200, "GET", "/v1/sessions", e.apiKey, nil, &all)
	if len(all.Data) != 1 {
		t.Fatalf("refused creates left sessions: %d", len(all.Data))
	}
}

// A server shutting down ends its event streams (CloseStreams, which
// `memstore serve` registers with http.Server.Shutdown): otherwise every
// worker's open stream would hold the shutdown until its deadline.
func TestCloseStreamsEndsOpenEventStreams(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames, res := e.openStream(t, ctx, sess.ID, e.apiKey, "")
	if res.StatusCode != 200 {
		t.Fatalf("stream: %d", res.StatusCode)
	}
	e.srv.CloseStreams()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return // the server ended it
			}
			if !f.comment {
				t.Fatalf("a closing stream sent %+v", f)
			}
		case <-deadline:
			t.Fatal("the stream stayed open after CloseStreams")
		}
	}
}

// The limits on a session's resources, at the boundary: 8 stores, and
// instructions of 4,096 characters (not bytes), are accepted; one more of
// either is refused (TestCreateSessionRefusals).
func TestSessionResourceLimitsAtTheBoundary(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	var res []any
	for i := range api.MaxSessionMemoryStores {
		var st api.MemoryStore
		e.must(200, "POST", "/v1/memory_stores", e.apiKey, map[string]any{"name": "Notes"}, &st)
		res = append(res, map[string]any{"type": "memory_store", "memory_store_id": st.ID})
		if i == api.MaxSessionMemoryStores-1 {
			res[i].(map[string]any)["instructions"] = strings.Repeat("é", api.MaxResourceInstructions)
		}
	}
	sess := e.session(env.ID, e.scriptedAgent().ID, map[string]any{"resources": res})
	if len(sess.Resources) != 8 {
		t.Fatalf("%d resources, want 8", len(sess.Resources))
	}
	for i, r := range sess.Resources {
		want := "/mnt/memory/notes"
		if i > 0 {
			want += fmt.Sprintf("-%d", i+1)
		}
		if r.MountPath != want {
			t.Errorf("resources[%d].mount_path = %s, want %s", i, r.MountPath, want)
		}
	}
	if in := sess.Resources[7].Instructions; in == nil || utf8.RuneCountInString(*in) != api.MaxResourceInstructions {
		t.Fatalf("instructions of 4,096 characters were not kept whole")
	}
}
