package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testclock"
)

// cpFixture is a store with one environment, one agent and helpers to make
// sessions on them.
type cpFixture struct {
	t     *testing.T
	ctx   context.Context
	clock *testclock.Clock
	s     storage.Store
	env   storage.Environment
	agent api.Agent
}

func newCPFixture(t *testing.T, open Factory) *cpFixture {
	f := &cpFixture{t: t, ctx: context.Background(), clock: newClock()}
	f.s = open(t, f.clock.Now)
	t.Cleanup(func() { f.s.Close() })
	f.env = f.newEnvironment("build")
	f.agent = api.Agent{SessionAgent: api.SessionAgent{ID: ids.New(ids.Agent), Type: "agent", Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel},
		Tools: []json.RawMessage{}, Skills: []json.RawMessage{}, MCPServers: []json.RawMessage{},
		ExecutionIdentity: api.ExecutionIdentity{Type: "service_account"}, Version: 1},
		Metadata: map[string]string{}, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if err := f.s.CreateAgent(f.ctx, f.agent); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *cpFixture) newEnvironment(name string) storage.Environment {
	e := storage.Environment{ID: ids.New(ids.Environment), Name: name, ConfigType: api.EnvironmentConfigSelfHosted,
		Metadata: map[string]string{}, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if err := f.s.CreateEnvironment(f.ctx, e); err != nil {
		f.t.Fatal(err)
	}
	return e
}

// newSession creates a session on env with the given resources, returning
// it and its first work item's id.
func (f *cpFixture) newSession(env storage.Environment, res ...api.SessionResource) (api.Session, string) {
	f.t.Helper()
	now := f.clock.Now()
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID,
		Agent:    api.SessionAgent{ID: f.agent.ID, Type: "agent", Name: f.agent.Name, Model: f.agent.Model, Version: 1},
		Metadata: map[string]string{}, Resources: res, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	w := storage.Work{ID: ids.New(ids.Work), Metadata: map[string]string{}, CreatedAt: now}
	got, err := f.s.CreateSession(f.ctx, sess, w, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return got, w.ID
}

func (f *cpFixture) memoryStore(name string) storage.MemoryStoreRow {
	f.t.Helper()
	st, err := f.s.CreateMemoryStore(f.ctx, storage.NewMemoryStore{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// resource is st attached with the given access at mountPath.
func (f *cpFixture) resource(st storage.MemoryStoreRow, access, mountPath string) api.SessionResource {
	now := f.clock.Now()
	return api.SessionResource{ID: ids.New(ids.Resource), Type: api.ResourceMemoryStore, MemoryStoreID: st.ID, Access: access,
		Name: st.Name, MountPath: mountPath, CreatedAt: now, UpdatedAt: now}
}

func (f *cpFixture) claim(env storage.Environment, worker string) (storage.Work, string, error) {
	tokID := ids.New(ids.SessionsToken)
	hash := "hash-" + tokID
	w, _, err := f.s.ClaimWork(f.ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: worker, ClaimTTL: time.Minute,
		Token: storage.Credential{ID: tokID}, TokenHash: hash})
	return w, hash, err
}

func testEnvironments(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s

	got, err := s.GetEnvironment(ctx, f.env.ID)
	if err != nil || got.Name != "build" || got.ConfigType != api.EnvironmentConfigSelfHosted || got.Description != nil || !got.CreatedAt.Equal(f.clock.Now()) {
		t.Fatalf("GetEnvironment = %+v, %v", got, err)
	}
	if _, err := s.GetEnvironment(ctx, "env_nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown environment: %v", err)
	}

	// Update is a read-modify-write; an error from fn saves nothing.
	desc := "the build farm"
	up, err := s.UpdateEnvironment(ctx, f.env.ID, func(e *storage.Environment) error {
		e.Description, e.Metadata["team"] = &desc, "infra"
		return nil
	})
	if err != nil || up.Description == nil || *up.Description != desc || up.Metadata["team"] != "infra" {
		t.Fatalf("UpdateEnvironment = %+v, %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateEnvironment(ctx, f.env.ID, func(e *storage.Environment) error { e.Name = "changed"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error not returned: %v", err)
	}
	if got, _ := s.GetEnvironment(ctx, f.env.ID); got.Name != "build" || got.Metadata["team"] != "infra" {
		t.Fatalf("a failed update changed the environment: %+v", got)
	}

	// Newest first, paged by id, archived hidden unless asked for.
	second := f.newEnvironment("second")
	third := f.newEnvironment("third")
	now := f.clock.Now()
	if _, err := s.UpdateEnvironment(ctx, second.ID, func(e *storage.Environment) error { e.ArchivedAt = &now; return nil }); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListEnvironments(ctx, storage.ListQuery{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != third.ID || list[1].ID != f.env.ID {
		t.Fatalf("ListEnvironments = %v, %v; want third then build", names(list), err)
	}
	list, _ = s.ListEnvironments(ctx, storage.ListQuery{Limit: 1, IncludeArchived: true})
	if len(list) != 1 || list[0].ID != third.ID {
		t.Fatalf("first page = %v", names(list))
	}
	list, _ = s.ListEnvironments(ctx, storage.ListQuery{Limit: 5, IncludeArchived: true, After: third.ID})
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != f.env.ID {
		t.Fatalf("second page = %v", names(list))
	}

	// An environment with a session cannot be deleted; one without can, and
	// its keys die with it.
	f.newSession(f.env)
	if err := s.DeleteEnvironment(ctx, f.env.ID); !errors.Is(err, storage.ErrEnvironmentInUse) {
		t.Fatalf("deleting an environment in use: %v", err)
	}
	if _, err := s.GetEnvironment(ctx, f.env.ID); err != nil {
		t.Fatalf("refused delete removed the environment: %v", err)
	}
	key := storage.Credential{ID: ids.New(ids.EnvironmentKey), Kind: storage.EnvironmentKey, EnvironmentID: third.ID}
	if err := s.CreateCredential(ctx, key, "envkey-hash"); err != nil {
		t.Fatal(err)
	}
	// A claim's sessions token names the environment too; its session
	// must be deleted before the environment can be, and takes the token
	// with it.
	sess, _ := f.newSession(third)
	_, tokenHash, err := f.claim(third, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CredentialByHash(ctx, tokenHash); err != nil {
		t.Fatalf("the claim's token: %v", err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEnvironment(ctx, third.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEnvironment(ctx, third.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted environment still found: %v", err)
	}
	if _, err := s.CredentialByHash(ctx, "envkey-hash"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the deleted environment's key still works: %v", err)
	}
	if _, err := s.CredentialByHash(ctx, tokenHash); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the deleted session's token still works: %v", err)
	}
}

func names(es []storage.Environment) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func testAgents(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s
	got, err := s.GetAgent(ctx, f.agent.ID)
	if err != nil || got.Name != "scripted" || got.Model.ID != api.ScriptedModel || got.Version != 1 {
		t.Fatalf("GetAgent = %+v, %v", got, err)
	}
	now := f.clock.Now()
	if _, err := s.UpdateAgent(ctx, f.agent.ID, func(a *api.Agent) error { a.ArchivedAt = &now; return nil }); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListAgents(ctx, storage.ListQuery{Limit: 10}); len(list) != 0 {
		t.Fatalf("archived agent listed: %d", len(list))
	}
	if list, _ := s.ListAgents(ctx, storage.ListQuery{Limit: 10, IncludeArchived: true}); len(list) != 1 || list[0].ArchivedAt == nil {
		t.Fatalf("ListAgents(include archived) = %+v", list)
	}
	if _, err := s.GetAgent(ctx, "agent_nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

func testSessions(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s
	a, b := f.memoryStore("Notes"), f.memoryStore("notes")
	sess, workID := f.newSession(f.env, f.resource(a, api.AccessReadWrite, "/mnt/memory/notes"), f.resource(b, api.AccessReadOnly, "/mnt/memory/notes-2"))
	got, err := s.GetSession(ctx, sess.ID)
	if err != nil || len(got.Resources) != 2 || got.Resources[0].MemoryStoreID != a.ID || got.Resources[1].MountPath != "/mnt/memory/notes-2" || got.Status != api.SessionIdle {
		t.Fatalf("GetSession = %+v, %v", got, err)
	}
	w, err := s.GetWork(ctx, f.env.ID, workID)
	if err != nil || w.State != api.WorkQueued || w.SessionID != sess.ID || w.EnvironmentID != f.env.ID {
		t.Fatalf("the session's work item = %+v, %v", w, err)
	}
	if _, err := s.GetWork(ctx, "env_other", workID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a work item was found under another environment: %v", err)
	}

	other, _ := f.newSession(f.env)
	env2 := f.newEnvironment("other")
	third, _ := f.newSession(env2)
	for _, c := range []struct {
		q    storage.SessionQuery
		want []string
	}{
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}}, []string{third.ID, other.ID, sess.ID}},
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}, Asc: true}, []string{sess.ID, other.ID, third.ID}},
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}, MemoryStoreID: b.ID}, []string{sess.ID}},
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}, EnvironmentID: env2.ID}, []string{third.ID}},
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 1, After: third.ID}}, []string{other.ID}},
		{storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}, Statuses: []string{api.SessionRunning}}, nil},
	} {
		list, err := s.ListSessions(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, x := range list {
			gotIDs = append(gotIDs, x.ID)
		}
		if fmt.Sprint(gotIDs) != fmt.Sprint(c.want) {
			t.Fatalf("ListSessions(%+v) = %v, want %v", c.q, gotIDs, c.want)
		}
	}
	// A listed session carries its own resources, in order.
	list, err := s.ListSessions(ctx, storage.SessionQuery{ListQuery: storage.ListQuery{Limit: 10}, Statuses: []string{api.SessionIdle, api.SessionRunning}})
	if err != nil || len(list) != 3 || len(list[0].Resources) != 0 || len(list[1].Resources) != 0 ||
		len(list[2].Resources) != 2 || list[2].Resources[0].MemoryStoreID != a.ID || list[2].Resources[1].MemoryStoreID != b.ID {
		t.Fatalf("ListSessions = %+v, %v; want three sessions, the oldest with its two stores in order", list, err)
	}

	title := "renamed"
	up, err := s.UpdateSession(ctx, sess.ID, func(x *api.Session) error { x.Title = &title; return nil })
	if err != nil || up.Title == nil || *up.Title != title || len(up.Resources) != 2 {
		t.Fatalf("UpdateSession = %+v, %v", up, err)
	}

	// Deleting a session stops its work and kills the tokens minted for it.
	claimed, hash, err := f.claim(f.env, "w1")
	if err != nil || claimed.ID != workID {
		t.Fatalf("claim = %+v, %v; want %s", claimed, err, workID)
	}
	sent, err := s.AppendEvents(ctx, sess.ID, []api.Event{api.UserMessage("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventSeq(ctx, sess.ID, sent[0].ID); err != nil {
		t.Fatalf("EventSeq of a stored event: %v", err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	// Its events go with it (PostgreSQL's by the delete itself: no
	// foreign key cascades to them).
	if _, err := s.EventSeq(ctx, sess.ID, sent[0].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("EventSeq of a deleted session's event = %v; want not found", err)
	}
	if _, err := s.GetSession(ctx, sess.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted session still found: %v", err)
	}
	if _, err := s.ListEvents(ctx, sess.ID, storage.EventQuery{}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("events of a deleted session: %v", err)
	}
	if w, _ := s.GetWork(ctx, f.env.ID, workID); w.State != api.WorkStopped || w.StoppedAt == nil {
		t.Fatalf("work of a deleted session = %+v", w)
	}
	if _, err := s.CredentialByHash(ctx, hash); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("sessions token of a deleted session still works: %v", err)
	}
	if err := s.DeleteSession(ctx, sess.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// testStoresOfSessions: a session attaches only stores that exist and are
// live when it is created, and a store cannot be deleted while a session
// may still mount it.
func testStoresOfSessions(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s
	st := f.memoryStore("shared")
	archived := f.memoryStore("old")
	if _, err := s.ArchiveMemoryStore(ctx, archived.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		store storage.MemoryStoreRow
		want  error
	}{
		{storage.MemoryStoreRow{ID: ids.New(ids.MemoryStore)}, storage.ErrNotFound},
		{archived, storage.ErrStoreArchived},
	} {
		now := f.clock.Now()
		sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: f.env.ID, Agent: api.SessionAgent{ID: f.agent.ID},
			Resources: []api.SessionResource{f.resource(c.store, api.AccessReadWrite, "/mnt/memory/x")}, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
		w := storage.Work{ID: ids.New(ids.Work), CreatedAt: now}
		if _, err := s.CreateSession(ctx, sess, w, nil); !errors.Is(err, c.want) {
			t.Fatalf("attaching %s: %v, want %v", c.store.ID, err, c.want)
		}
		if _, err := s.GetSession(ctx, sess.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a refused CreateSession stored the session: %v", err)
		}
	}

	inUse := func(sessionID string) {
		t.Helper()
		var e *storage.StoreInUseError
		if err := s.DeleteMemoryStore(ctx, st.ID); !errors.As(err, &e) || e.SessionID != sessionID {
			t.Fatalf("DeleteMemoryStore = %v, want a StoreInUseError naming %s", err, sessionID)
		}
		if _, err := s.GetMemoryStore(ctx, st.ID); err != nil {
			t.Fatalf("a refused delete removed the store: %v", err)
		}
	}
	terminate := func(sessionID string) {
		t.Helper()
		if _, err := s.AppendEvents(ctx, sessionID, []api.Event{{Type: api.EventSessionStatusTerminated}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	served, workID := f.newSession(f.env, f.resource(st, api.AccessReadWrite, "/mnt/memory/shared"))
	f.clock.Advance(time.Millisecond)
	unserved, _ := f.newSession(f.env, f.resource(st, api.AccessReadOnly, "/mnt/memory/shared"))
	inUse(served.ID) // idle: a message would bring a worker back
	if w, _, err := f.claim(f.env, "w"); err != nil || w.ID != workID {
		t.Fatalf("claim = %+v, %v; want %s", w, err, workID)
	}
	terminate(served.ID)
	terminate(unserved.ID)
	inUse(served.ID) // terminated, but its worker has not stopped yet
	if _, err := s.StopWork(ctx, f.env.ID, workID, true); err != nil {
		t.Fatal(err)
	}
	// The unserved session's item is still queued, but nothing will mount
	// the store for a terminated session.
	if err := s.DeleteMemoryStore(ctx, st.ID); err != nil {
		t.Fatalf("delete once every session is over: %v", err)
	}
	if got, err := s.GetSession(ctx, served.ID); err != nil || len(got.Resources) != 1 || got.Resources[0].MemoryStoreID != st.ID {
		t.Fatalf("a finished session lost its resource: %+v, %v", got.Resources, err)
	}
}

// recorder is an AppendGuard that refuses batches holding an event of type
// "refuse" and records the views it saw.
type recorder struct {
	mu    sync.Mutex
	batch []api.Event
	views []storage.SessionView
}

func (r *recorder) guard(events []api.Event) storage.AppendGuard {
	return func(v storage.SessionView) error {
		r.mu.Lock()
		r.views = append(r.views, v)
		r.mu.Unlock()
		for _, e := range events {
			if e.Type == "refuse" {
				return errors.New("refused")
			}
		}
		return nil
	}
}

func (r *recorder) last() storage.SessionView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.views[len(r.views)-1]
}

func testEvents(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s
	sess, _ := f.newSession(f.env)
	rec := &recorder{}
	appendEvents := func(events ...api.Event) ([]api.Event, error) {
		return s.AppendEvents(ctx, sess.ID, events, rec.guard(events))
	}

	sent, err := appendEvents(api.UserMessage("one"), api.UserMessage("two"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0].ID == "" || sent[0].ProcessedAt == nil || !sent[0].ProcessedAt.Equal(f.clock.Now()) || sent[1].Text() != "two" {
		t.Fatalf("AppendEvents returned %+v", sent)
	}
	if v := rec.last(); !v.WorkLive || len(v.Log) != 0 || v.Seq != 0 || v.Session.ID != sess.ID {
		t.Fatalf("the guard saw %d events, seq %d, WorkLive %v", len(v.Log), v.Seq, v.WorkLive)
	}
	if _, err := appendEvents(
		api.Event{Type: api.EventSessionStatusRunning},
		api.Event{Type: api.EventAgentMessage, Content: api.TextContent("echo"), Extra: api.Extra{"reply_to": json.RawMessage(`"one"`)}},
		api.Event{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopEndTurn}},
		api.Event{Type: api.EventSessionStatusRunning},
		api.Event{Type: api.EventAgentMessage, Content: api.TextContent("echo")},
		api.Event{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopEndTurn}},
	); err != nil {
		t.Fatal(err)
	}
	all, types := loggedEvents(t, s, sess.ID, false)
	want := "[user.message user.message session.status_running agent.message session.status_idle session.status_running agent.message session.status_idle]"
	if types != want {
		t.Fatalf("log = %v\nwant  %s", types, want)
	}
	if v := rec.last(); len(v.Log) != 2 || v.Seq != all[1].Seq {
		t.Fatalf("the second guard saw %d events at seq %d, want 2 at %d", len(v.Log), v.Seq, all[1].Seq)
	}
	got, _ := s.GetSession(ctx, sess.ID)
	if got.Status != api.SessionIdle {
		t.Fatalf("status after the appends = %s, want idle (set by the last status event)", got.Status)
	}
	view, err := s.ViewSession(ctx, sess.ID)
	if err != nil || len(view.Log) != len(all) || view.Seq != all[len(all)-1].Seq || !view.WorkLive || view.Session.Status != api.SessionIdle {
		t.Fatalf("ViewSession = %d events at seq %d (WorkLive %v, %s), %v", len(view.Log), view.Seq, view.WorkLive, view.Session.Status, err)
	}

	// A refused batch stores nothing, not even its acceptable events.
	if _, err := appendEvents(api.UserMessage("three"), api.Event{Type: "refuse"}); err == nil || err.Error() != "refused" {
		t.Fatalf("the guard's refusal was not returned as is: %v", err)
	}
	if again, _ := s.ListEvents(ctx, sess.ID, storage.EventQuery{}); len(again) != len(all) {
		t.Fatalf("a refused append stored events: %d → %d", len(all), len(again))
	}
	if _, err := appendEvents(api.UserMessage("kept")); err != nil {
		t.Fatal(err)
	}
	if v := rec.last(); len(v.Log) != len(all) || v.Seq != all[len(all)-1].Seq {
		t.Fatalf("after a refused append the guard saw %d events (want %d)", len(v.Log), len(all))
	}

	// Paging both ways, type filters, and the sequence of one event.
	page, _ := s.ListEvents(ctx, sess.ID, storage.EventQuery{AfterSeq: all[1].Seq, Limit: 2})
	if len(page) != 2 || page[0].Seq != all[2].Seq {
		t.Fatalf("page after seq %d = %+v", all[1].Seq, page)
	}
	desc, _ := s.ListEvents(ctx, sess.ID, storage.EventQuery{Desc: true, BeforeSeq: all[7].Seq, Limit: 2})
	if len(desc) != 2 || desc[0].Seq != all[6].Seq || desc[1].Seq != all[5].Seq {
		t.Fatalf("descending page = %+v", desc)
	}
	msgs, _ := s.ListEvents(ctx, sess.ID, storage.EventQuery{Types: []string{api.EventAgentMessage, api.EventUserMessage}})
	if len(msgs) != 5 {
		t.Fatalf("type filter returned %d events, want 5", len(msgs))
	}
	if seq, err := s.EventSeq(ctx, sess.ID, all[3].Event.ID); err != nil || seq != all[3].Seq {
		t.Fatalf("EventSeq = %d, %v; want %d", seq, err, all[3].Seq)
	}
	if _, err := s.EventSeq(ctx, sess.ID, "sevt_nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("EventSeq of an unknown event: %v", err)
	}
	if _, err := s.AppendEvents(ctx, "sesn_nope", []api.Event{api.UserMessage("x")}, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("append to an unknown session: %v", err)
	}
	if _, err := s.ViewSession(ctx, "sesn_nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("view of an unknown session: %v", err)
	}
	// Unknown fields survive storage.
	if all[3].Event.Extra["reply_to"] == nil {
		t.Fatalf("an extra field was lost in storage: %+v", all[3].Event)
	}
}

// loggedEvents reads a session's whole log and its types, failing the
// test unless the sequence numbers (and, with stamps, the processed_at
// times) strictly increase.
func loggedEvents(t *testing.T, s storage.Store, sessionID string, stamps bool) ([]storage.StoredEvent, string) {
	t.Helper()
	all, err := s.ListEvents(context.Background(), sessionID, storage.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, e := range all {
		types = append(types, e.Event.Type)
		if i == 0 {
			continue
		}
		if prev := all[i-1]; e.Seq <= prev.Seq || stamps && !e.Event.ProcessedAt.After(*prev.Event.ProcessedAt) {
			t.Fatalf("event %d: seq %d and processed_at %v do not follow %d and %v", i, e.Seq, e.Event.ProcessedAt, prev.Seq, prev.Event.ProcessedAt)
		}
	}
	return all, fmt.Sprint(types)
}

// AppendSteps stores each round's events in order with what the rounds
// before it saw, stops at a round with none or after MaxStepRounds, and
// stores nothing when a later round refuses.
func testAppendSteps(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s
	sess, _ := f.newSession(f.env)
	if _, err := s.AppendEvents(ctx, sess.ID, []api.Event{api.UserMessage("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		all, _ := loggedEvents(t, s, sess.ID, false)
		return len(all)
	}

	// A later round's refusal loses nothing and stores nothing.
	refused := errors.New("refused in round 2")
	_, err := s.AppendSteps(ctx, sess.ID, func(v storage.SessionView, round int) ([]api.Event, error) {
		if round == 2 {
			return nil, refused
		}
		return []api.Event{{Type: api.EventSessionStatusRunning}}, nil
	})
	if !errors.Is(err, refused) || count() != 1 {
		t.Fatalf("a refusal in round 2 returned %v and left %d events, want it returned and 1 event", err, count())
	}

	// Three rounds, each seeing the ones before.
	v, err := s.AppendSteps(ctx, sess.ID, func(v storage.SessionView, round int) ([]api.Event, error) {
		if len(v.Log) != 1+round {
			return nil, fmt.Errorf("round %d saw %d events, want %d", round, len(v.Log), 1+round)
		}
		switch round {
		case 0:
			return []api.Event{{Type: api.EventSessionStatusRunning}}, nil
		case 1:
			return []api.Event{{Type: api.EventAgentMessage, Content: api.TextContent("hello")}}, nil
		case 2:
			return []api.Event{{Type: api.EventSessionStatusIdle, StopReason: &api.StopReason{Type: api.StopEndTurn}}}, nil
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, types := loggedEvents(t, s, sess.ID, true)
	if got, want := types, "[user.message session.status_running agent.message session.status_idle]"; got != want {
		t.Fatalf("log = %s, want %s", got, want)
	}
	if v.Seq != all[len(all)-1].Seq || len(v.Log) != 4 || v.Session.Status != api.SessionIdle {
		t.Fatalf("the view returned has seq %d, %d events, status %s; want seq %d, 4 events, idle", v.Seq, len(v.Log), v.Session.Status, all[len(all)-1].Seq)
	}
	if got, err := s.GetSession(ctx, sess.ID); err != nil || got.Status != api.SessionIdle {
		t.Fatalf("the session is %s (%v), want idle", got.Status, err)
	}

	// A step that never stops is cut after MaxStepRounds rounds.
	before := count()
	if _, err := s.AppendSteps(ctx, sess.ID, func(storage.SessionView, int) ([]api.Event, error) {
		return []api.Event{api.UserInterrupt()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := count() - before; got != storage.MaxStepRounds {
		t.Fatalf("an endless step appended %d events in one call, want %d", got, storage.MaxStepRounds)
	}
	if _, err := s.AppendSteps(ctx, "sesn_nope", func(storage.SessionView, int) ([]api.Event, error) { return nil, nil }); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a missing session: %v, want ErrNotFound", err)
	}
}

func testWorkQueue(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	ctx, s := f.ctx, f.s

	if _, _, err := f.claim(f.env, "w1"); !errors.Is(err, storage.ErrNoWork) {
		t.Fatalf("claim on an empty queue: %v", err)
	}
	first, firstWork := f.newSession(f.env)
	f.clock.Advance(time.Second)
	_, secondWork := f.newSession(f.env)
	other := f.newEnvironment("other")
	f.newSession(other)

	st, err := s.WorkStats(ctx, f.env.ID)
	if err != nil || st.Depth != 2 || st.Pending != 0 || st.OldestQueuedAt == nil || !st.OldestQueuedAt.Equal(f.clock.Now().Add(-time.Second)) {
		t.Fatalf("WorkStats = %+v, %v", st, err)
	}

	// Oldest first; the claim mints a sessions token scoped to it.
	w, hash, err := f.claim(f.env, "w1")
	if err != nil || w.ID != firstWork || w.State != api.WorkQueued || w.ClaimedAt == nil || w.WorkerID != "w1" || w.TokenID == "" {
		t.Fatalf("first claim = %+v, %v", w, err)
	}
	// A session's items, whichever environment is asked about: its own only.
	if items, err := s.SessionWork(ctx, first.ID); err != nil || len(items) != 1 || items[0].ID != firstWork || items[0].WorkerID != "w1" {
		t.Fatalf("SessionWork = %+v, %v; want the claimed %s alone", items, err, firstWork)
	}
	tok, err := s.CredentialByHash(ctx, hash)
	if err != nil || tok.Kind != storage.SessionsToken || tok.EnvironmentID != f.env.ID || tok.SessionID != first.ID || tok.WorkID != firstWork || tok.ID != w.TokenID {
		t.Fatalf("minted token = %+v, %v", tok, err)
	}
	if st, _ := s.WorkStats(ctx, f.env.ID); st.Depth != 1 || st.Pending != 1 {
		t.Fatalf("stats after a claim = %+v, want depth 1 pending 1", st)
	}

	// Ack: claimed → starting; an unclaimed item cannot be acked.
	if _, err := s.AckWork(ctx, f.env.ID, secondWork); !errors.Is(err, storage.ErrWorkNotClaimed) {
		t.Fatalf("ack of an unclaimed item: %v", err)
	}
	w, err = s.AckWork(ctx, f.env.ID, firstWork)
	if err != nil || w.State != api.WorkStarting || w.AcknowledgedAt == nil {
		t.Fatalf("ack = %+v, %v", w, err)
	}
	if again, err := s.AckWork(ctx, f.env.ID, firstWork); err != nil || again.State != api.WorkStarting {
		t.Fatalf("second ack = %+v, %v", again, err)
	}

	// Heartbeats: NO_HEARTBEAT first, then the last token; anything else is
	// a mismatch that changes nothing.
	beat := func(expected, tokenID string, ttl time.Duration) (storage.Work, error) {
		return s.HeartbeatWork(ctx, storage.Heartbeat{EnvironmentID: f.env.ID, WorkID: firstWork, Expected: expected, TTL: ttl, TokenID: tokenID})
	}
	var mm *storage.LeaseMismatchError
	if _, err := beat("2026-01-01T00:00:00.000000000Z", w.TokenID, time.Minute); !errors.As(err, &mm) || mm.Current.State != api.WorkStarting {
		t.Fatalf("a first beat without NO_HEARTBEAT: %v", err)
	}
	f.clock.Advance(time.Second)
	w, err = beat(api.NoHeartbeat, w.TokenID, 30*time.Second)
	if err != nil || w.State != api.WorkActive || w.LatestHeartbeatAt == nil || w.StartedAt == nil || w.LeaseTTLSeconds != 30 ||
		!w.LeaseExpiresAt.Equal(f.clock.Now().Add(30*time.Second)) {
		t.Fatalf("first beat = %+v, %v", w, err)
	}
	last := storage.HeartbeatToken(*w.LatestHeartbeatAt)
	if _, err := beat(api.NoHeartbeat, w.TokenID, time.Minute); !errors.As(err, &mm) || mm.Current.LatestHeartbeatAt == nil {
		t.Fatalf("a replayed NO_HEARTBEAT: %v", err)
	}
	f.clock.Advance(10 * time.Second)
	w, err = beat(last, w.TokenID, 30*time.Second)
	if err != nil || storage.HeartbeatToken(*w.LatestHeartbeatAt) == last {
		t.Fatalf("second beat = %+v, %v", w, err)
	}
	last = storage.HeartbeatToken(*w.LatestHeartbeatAt)

	// The lease lapses: the item goes back to the queue at its old place
	// and the old token loses its lease even with the right expectation.
	f.clock.Advance(31 * time.Second)
	if settled, err := s.ExpireLeases(ctx, f.env.ID); err != nil || len(settled) != 1 || settled[0].ID != firstWork || settled[0].State != api.WorkQueued {
		t.Fatalf("ExpireLeases = %+v, %v; want %s queued again", settled, err, firstWork)
	}
	w, _ = s.GetWork(ctx, f.env.ID, firstWork)
	if w.State != api.WorkQueued || w.ClaimedAt != nil || w.TokenID != "" || w.LatestHeartbeatAt != nil || w.AcknowledgedAt != nil {
		t.Fatalf("lapsed item = %+v, want queued and unclaimed", w)
	}
	if _, err := beat(last, tok.ID, time.Minute); !errors.As(err, &mm) {
		t.Fatalf("the lapsed holder renewed: %v", err)
	}
	re, _, err := f.claim(f.env, "w2")
	if err != nil || re.ID != firstWork || re.WorkerID != "w2" || re.TokenID == tok.ID {
		t.Fatalf("re-claim = %+v, %v; want %s for w2 with a new token", re, err, firstWork)
	}
	if _, err := beat(api.NoHeartbeat, tok.ID, time.Minute); !errors.As(err, &mm) {
		t.Fatalf("the old token renewed the new claim: %v", err)
	}

	// reclaim_older_than: a claimed, unacked item is offered again only
	// once its claim is that old.
	if _, _, err := f.claim(f.env, "w3"); err != nil {
		t.Fatalf("claiming the second item: %v", err)
	}
	if _, _, err := f.claim(f.env, "w3"); !errors.Is(err, storage.ErrNoWork) {
		t.Fatalf("everything is claimed, yet: %v", err)
	}
	f.clock.Advance(5 * time.Second)
	reclaim := func(older time.Duration) (storage.Work, error) {
		w, _, err := s.ClaimWork(ctx, storage.Claim{EnvironmentID: f.env.ID, WorkerID: "w4", ClaimTTL: time.Minute, ReclaimOlderThan: older,
			Token: storage.Credential{ID: ids.New(ids.SessionsToken)}, TokenHash: ids.New("h")})
		return w, err
	}
	if _, err := reclaim(10 * time.Second); !errors.Is(err, storage.ErrNoWork) {
		t.Fatalf("reclaimed a 5 s old claim with reclaim_older_than 10 s: %v", err)
	}
	if got, err := reclaim(5 * time.Second); err != nil || got.ID != firstWork || got.WorkerID != "w4" {
		t.Fatalf("reclaim = %+v, %v; want the older claim", got, err)
	}

	// Stops: graceful on a claimed item → stopping; a lapsed stopping item
	// is stopped, not re-queued; stopping a stopped item is refused.
	w, err = s.StopWork(ctx, f.env.ID, secondWork, false)
	if err != nil || w.State != api.WorkStopping || w.StopRequestedAt == nil || w.StoppedAt != nil {
		t.Fatalf("graceful stop = %+v, %v", w, err)
	}
	// Its worker learns of the stop on its next beat, whatever it expects.
	if got, err := s.HeartbeatWork(ctx, storage.Heartbeat{EnvironmentID: f.env.ID, WorkID: secondWork, Expected: "stale", TTL: time.Minute}); err != nil || got.State != api.WorkStopping {
		t.Fatalf("heartbeat of a stopping item with a stale expectation = %+v, %v; want stopping", got, err)
	}
	f.clock.Advance(2 * time.Minute)
	settled, err := s.ExpireLeases(ctx, f.env.ID)
	i := slices.IndexFunc(settled, func(w storage.Work) bool { return w.ID == secondWork })
	if err != nil || i < 0 || settled[i].State != api.WorkStopped {
		t.Fatalf("ExpireLeases of a stopping item = %+v, %v; want %s stopped", settled, err, secondWork)
	}
	if _, err := s.StopWork(ctx, f.env.ID, secondWork, true); !errors.Is(err, storage.ErrWorkStopped) {
		t.Fatalf("stopping a stopped item: %v", err)
	}
	if _, err := s.AckWork(ctx, f.env.ID, secondWork); !errors.Is(err, storage.ErrWorkStopped) {
		t.Fatalf("acking a stopped item: %v", err)
	}
	// The first item lapsed too (w4's claim was never renewed) and is
	// queued again; a forced stop stops it at once.
	w, err = s.StopWork(ctx, f.env.ID, firstWork, true)
	if err != nil || w.State != api.WorkStopped || w.StoppedAt == nil {
		t.Fatalf("forced stop = %+v, %v", w, err)
	}
	// A stopped item answers a heartbeat with its state, renewing nothing.
	if got, err := s.HeartbeatWork(ctx, storage.Heartbeat{EnvironmentID: f.env.ID, WorkID: firstWork, Expected: api.NoHeartbeat, TTL: time.Minute}); err != nil || got.State != api.WorkStopped || got.LeaseExpiresAt != nil {
		t.Fatalf("heartbeat of a stopped item = %+v, %v", got, err)
	}

	// EnsureWork re-queues a session left without a live item, once.
	w, queued, err := s.EnsureWork(ctx, first.ID, storage.Work{ID: ids.New(ids.Work), Metadata: map[string]string{}})
	if err != nil || !queued || w.State != api.WorkQueued || w.SessionID != first.ID || w.EnvironmentID != f.env.ID {
		t.Fatalf("EnsureWork = %+v, %v, %v", w, queued, err)
	}
	if stored, err := s.GetWork(ctx, f.env.ID, w.ID); err != nil || stored.State != api.WorkQueued || stored.SessionID != first.ID {
		t.Fatalf("the item EnsureWork queued = %+v, %v", stored, err)
	}
	if _, queued, _ := s.EnsureWork(ctx, first.ID, storage.Work{ID: ids.New(ids.Work)}); queued {
		t.Fatal("EnsureWork queued a second live item")
	}

	// Metadata patch and listing.
	up, err := s.UpdateWork(ctx, f.env.ID, w.ID, func(x *storage.Work) error { x.Metadata["k"] = "v"; return nil })
	if err != nil || up.Metadata["k"] != "v" {
		t.Fatalf("UpdateWork = %+v, %v", up, err)
	}
	list, err := s.ListWork(ctx, f.env.ID, storage.ListQuery{Limit: 10})
	if err != nil || len(list) != 3 || list[0].ID != w.ID {
		t.Fatalf("ListWork = %d items, %v", len(list), err)
	}
}

// testReclaimOrder: a claim that may reclaim takes the item that entered
// the queue first, whether it is an old unacknowledged claim or an item
// nobody claimed yet.
func testReclaimOrder(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	_, older := f.newSession(f.env)
	if w, _, err := f.claim(f.env, "w1"); err != nil || w.ID != older {
		t.Fatalf("first claim = %+v, %v", w, err)
	}
	f.clock.Advance(time.Second)
	_, younger := f.newSession(f.env)
	f.clock.Advance(5 * time.Second)
	claim := func(reclaim time.Duration) string {
		t.Helper()
		w, _, err := f.s.ClaimWork(f.ctx, storage.Claim{EnvironmentID: f.env.ID, WorkerID: "w2", ClaimTTL: time.Minute, ReclaimOlderThan: reclaim,
			Token: storage.Credential{ID: ids.New(ids.SessionsToken)}, TokenHash: ids.New("h")})
		if err != nil {
			t.Fatalf("claim (reclaim %v): %v", reclaim, err)
		}
		return w.ID
	}
	if got := claim(5 * time.Second); got != older {
		t.Fatalf("a reclaiming claim took %s; want the older, unacknowledged %s", got, older)
	}
	if got := claim(0); got != younger {
		t.Fatalf("the next claim took %s; want %s", got, younger)
	}
}

// testConcurrentClaims has many pollers race for fewer items: each item is
// claimed exactly once.
func testConcurrentClaims(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	const items, pollers = 6, 12
	for i := 0; i < items; i++ {
		f.newSession(f.env)
	}
	var (
		mu    sync.Mutex
		got   = map[string]string{}
		wg    sync.WaitGroup
		errCh = make(chan error, pollers)
	)
	for p := 0; p < pollers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			w, _, err := f.claim(f.env, fmt.Sprintf("w%d", p))
			if errors.Is(err, storage.ErrNoWork) {
				return
			}
			if err != nil {
				errCh <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if prev, dup := got[w.ID]; dup {
				errCh <- fmt.Errorf("%s claimed by both %s and w%d", w.ID, prev, p)
			}
			got[w.ID] = fmt.Sprintf("w%d", p)
		}(p)
	}
	wg.Wait()
	close(errCh)
	for err := range errCh {
		t.Fatal(err)
	}
	if len(got) != items {
		t.Fatalf("%d items claimed, want %d", len(got), items)
	}
}
