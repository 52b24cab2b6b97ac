package app_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// refusedAs checks err is an *api.Error of type t whose message contains
// want (what was wrong, said to the caller).
func refusedAs(t *testing.T, err error, typ api.ErrorType, want string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Type != typ || !strings.Contains(ae.Message, want) {
		t.Fatalf("err = %v; want a %s saying %q", err, typ, want)
	}
}

// session makes an environment and an agent through the services, and an
// idle session on them straight in storage (its creation is the API's).
func (f *fixture) session() (api.Session, storage.Work) {
	f.t.Helper()
	env, err := f.app.Environments.Create(f.ctx, api.CreateEnvironmentRequest{Name: "builders"}, person)
	if err != nil {
		f.t.Fatal(err)
	}
	ag, err := f.app.Agents.Create(f.ctx, api.CreateAgentRequest{Name: "helper", Model: api.ModelConfig{ID: api.ScriptedModel}}, person)
	if err != nil {
		f.t.Fatal(err)
	}
	now := time.Now().UTC()
	sess := api.Session{ID: ids.NewAt(ids.Session, now), Type: "session", EnvironmentID: env.ID, Agent: ag.SessionAgent,
		Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	work := storage.Work{ID: ids.NewAt(ids.Work, now), CreatedAt: now}
	sess, err = f.db.CreateSession(f.ctx, sess, work, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return sess, work
}

// An environment the rules refuse is not made, and a refused patch leaves
// the environment as it was.
func TestEnvironmentRefusalsChangeNothing(t *testing.T) {
	f := newFixture(t, app.Config{})
	_, err := f.app.Environments.Create(f.ctx, api.CreateEnvironmentRequest{Name: "x", Config: &api.EnvironmentConfig{Type: "cloud"}}, person)
	refusedAs(t, err, api.InvalidRequest, `send {"type":"self_hosted"}`)
	_, err = f.app.Environments.Create(f.ctx, api.CreateEnvironmentRequest{Name: ""}, person)
	mustRefuse(t, err, "name")
	if list, err := f.db.ListEnvironments(f.ctx, storage.ListQuery{Limit: 10}); err != nil || len(list) != 0 {
		t.Fatalf("environments after two refusals = %v, %v; want none", list, err)
	}

	env, err := f.app.Environments.Create(f.ctx, api.CreateEnvironmentRequest{Name: "builders"}, person)
	if err != nil {
		t.Fatal(err)
	}
	if env.Scope != "organization" {
		t.Fatalf("scope = %q; want the default, organization", env.Scope)
	}
	renamed := "renamed"
	_, err = f.app.Environments.Update(f.ctx, env.ID, api.UpdateEnvironmentRequest{Name: &renamed, Scope: "galaxy"}, person)
	refusedAs(t, err, api.InvalidRequest, `scope must be "organization" or "account", got "galaxy"`)
	got, err := f.db.GetEnvironment(f.ctx, env.ID)
	if err != nil || got.Name != "builders" || got.Scope != "organization" {
		t.Fatalf("after a refused update: %+v, %v; want it unchanged", got, err)
	}
	if _, err := f.app.Environments.Update(f.ctx, "env_missing", api.UpdateEnvironmentRequest{Name: &renamed}, person); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("update of a missing environment: %v; want storage.ErrNotFound", err)
	}
}

// An environment with a session cannot be deleted, and stays; archiving
// twice keeps the first time.
func TestEnvironmentInUseIsKeptAndArchiveIsOnce(t *testing.T) {
	f := newFixture(t, app.Config{})
	sess, _ := f.session()
	if err := f.app.Environments.Delete(f.ctx, sess.EnvironmentID, person); !errors.Is(err, storage.ErrEnvironmentInUse) {
		t.Fatalf("delete of an environment with a session: %v; want storage.ErrEnvironmentInUse", err)
	}
	if _, err := f.db.GetEnvironment(f.ctx, sess.EnvironmentID); err != nil {
		t.Fatalf("the refused environment is gone: %v", err)
	}
	first, err := f.app.Environments.Archive(f.ctx, sess.EnvironmentID, person)
	if err != nil || first.ArchivedAt == nil {
		t.Fatalf("archive: %+v, %v", first, err)
	}
	again, err := f.app.Environments.Archive(f.ctx, sess.EnvironmentID, person)
	if err != nil || !again.ArchivedAt.Equal(*first.ArchivedAt) {
		t.Fatalf("archive again: %v, %v; want the first archive time %v kept", again.ArchivedAt, err, first.ArchivedAt)
	}
	if recs := f.log.Records(t, 0, "environment archived"); len(recs) != 2 || recs[0]["user_id"] != "user_01" {
		t.Fatalf("environment archived lines = %v; want two naming user_01", recs)
	}
}

// An agent the rules refuse is not made.
func TestAgentRefusalsChangeNothing(t *testing.T) {
	f := newFixture(t, app.Config{})
	_, err := f.app.Agents.Create(f.ctx, api.CreateAgentRequest{Name: "helper"}, person)
	refusedAs(t, err, api.InvalidRequest, "model is required")
	_, err = f.app.Agents.Create(f.ctx, api.CreateAgentRequest{Name: "helper", Model: api.ModelConfig{ID: api.ScriptedModel}, Tools: []json.RawMessage{json.RawMessage(`"bash"`)}}, person)
	refusedAs(t, err, api.InvalidRequest, "tools[0] must be an object with a type")
	if list, err := f.db.ListAgents(f.ctx, storage.ListQuery{Limit: 10}); err != nil || len(list) != 0 {
		t.Fatalf("agents after two refusals = %v, %v; want none", list, err)
	}
}

// A refused send appends nothing to the session's log and queues nothing.
func TestRefusedEventsAppendNothing(t *testing.T) {
	f := newFixture(t, app.Config{})
	sess, _ := f.session()
	before, err := f.db.ListEvents(f.ctx, sess.ID, storage.EventQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.app.Sessions.Send(f.ctx, sess.ID, nil, person)
	refusedAs(t, err, api.InvalidRequest, "events is required")
	many := make([]api.Event, 51)
	for i := range many {
		many[i] = api.Event{Type: api.EventUserMessage, Content: []api.ContentBlock{{Type: "text", Text: "hi"}}}
	}
	_, err = f.app.Sessions.Send(f.ctx, sess.ID, many, person)
	refusedAs(t, err, api.InvalidRequest, "events has 51 entries; send at most 50")
	after, err := f.db.ListEvents(f.ctx, sess.ID, storage.EventQuery{Limit: 100})
	if err != nil || len(after) != len(before) {
		t.Fatalf("log after refused sends has %d events (%v); want %d", len(after), err, len(before))
	}
	if _, err := f.app.Sessions.Send(f.ctx, "sesn_missing", many[:1], person); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("send to a missing session: %v; want storage.ErrNotFound", err)
	}
}

// A refused session or work patch leaves them as they were.
func TestRefusedPatchesChangeNothing(t *testing.T) {
	f := newFixture(t, app.Config{})
	sess, work := f.session()
	long := strings.Repeat("t", 1001)
	_, err := f.app.Sessions.Update(f.ctx, sess.ID, api.UpdateSessionRequest{Title: api.NullableString{Set: true, Value: long}}, person)
	mustRefuse(t, err, "title")
	if got, err := f.db.GetSession(f.ctx, sess.ID); err != nil || got.Title != nil {
		t.Fatalf("title after a refused update = %v, %v; want none", got.Title, err)
	}
	ok, bad := "v", strings.Repeat("v", api.MaxMetadataValueChars+1)
	_, err = f.app.Work.Update(f.ctx, sess.EnvironmentID, work.ID, map[string]*string{"a": &ok, "b": &bad}, person)
	mustRefuse(t, err, "metadata")
	if got, err := f.db.GetWork(f.ctx, sess.EnvironmentID, work.ID); err != nil || len(got.Metadata) != 0 {
		t.Fatalf("work metadata after a refused update = %v, %v; want none", got.Metadata, err)
	}
}
