package sqlitetopg_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/storage/sqlitetopg"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/webhooks"
)

// A data folder with stores, versions (one redacted, one a deletion),
// sessions, events and a claimed work item arrives in PostgreSQL whole:
// the counts and hashes agree, and the PostgreSQL backend reads the same
// objects back.
func TestCopyMovesADataFolderIntoPostgres(t *testing.T) {
	pgURL := testenv.PostgresSchema(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memstore.db")
	src, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	by := storage.Actor{Kind: storage.ActorAPIKey, ID: "apikey_1"}
	st, err := src.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "notes", Metadata: map[string]string{"team": "a"}})
	must(err)
	m, err := src.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/a.md", Content: "one", By: by})
	must(err)
	first := m.VersionID
	two := "two\x00bytes"
	_, _, err = src.UpdateMemory(ctx, storage.MemoryUpdate{StoreID: st.ID, MemoryID: m.ID, Content: &two, By: by})
	must(err)
	_, err = src.RedactMemoryVersion(ctx, st.ID, first, by)
	must(err)
	gone, err := src.CreateMemory(ctx, storage.NewMemory{StoreID: st.ID, Path: "/b.md", Content: "", By: by})
	must(err)
	must(src.DeleteMemory(ctx, st.ID, gone.ID, "", by))

	now := time.Now().UTC()
	hook := webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: "https://example.test/hook", State: webhooks.StateEnabled,
		EnabledEvents: []string{webhooks.EnvironmentCreated, webhooks.SessionStatusRunStarted}, CreatedAt: now, UpdatedAt: now}, Secret: "whsec_c2VjcmV0"}
	must(src.CreateWebhookEndpoint(ctx, hook))
	env := storage.Environment{ID: ids.New(ids.Environment), Name: "build", ConfigType: api.EnvironmentConfigSelfHosted, Metadata: map[string]string{}, CreatedAt: now, UpdatedAt: now}
	must(src.CreateEnvironment(ctx, env))
	agent := api.Agent{SessionAgent: api.SessionAgent{ID: ids.New(ids.Agent), Type: "agent", Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}, Tools: []json.RawMessage{}, Skills: []json.RawMessage{}, MCPServers: []json.RawMessage{}, Version: 1}, Metadata: map[string]string{}, CreatedAt: now, UpdatedAt: now}
	must(src.CreateAgent(ctx, agent))
	res := api.SessionResource{ID: ids.New(ids.Resource), Type: api.ResourceMemoryStore, MemoryStoreID: st.ID, Access: "read_write", Name: st.Name, MountPath: "/mnt/memory/notes", CreatedAt: now, UpdatedAt: now}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Agent: agent.SessionAgent, Metadata: map[string]string{}, Resources: []api.SessionResource{res}, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	_, err = src.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), Metadata: map[string]string{}, CreatedAt: now}, nil)
	must(err)
	_, err = src.AppendEvents(ctx, sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}, {Type: api.EventSessionStatusIdle}}, nil)
	must(err)
	claimed, err := src.ClaimDeliveries(ctx, time.Now().UTC(), 10, "t", webhooks.Policy{})
	must(err)
	must(src.FinishDeliveries(ctx, "t", []webhooks.Result{{Seq: claimed[0].Seq, Attempt: &webhooks.Attempt{AttemptedAt: now, StatusCode: 503, ResponseExcerpt: "later"}}}, webhooks.Policy{}.WithDefaults()))
	_, _, err = src.ClaimWork(ctx, storage.Claim{EnvironmentID: env.ID, WorkerID: "wk", ClaimTTL: time.Minute, Token: storage.Credential{ID: ids.New(ids.SessionsToken)}, TokenHash: "h"})
	must(err)
	must(src.Close())

	tables, err := sqlitetopg.Copy(ctx, path, pgURL)
	must(err)
	rows := map[string]int64{}
	for _, tb := range tables {
		rows[tb.Name] = tb.Rows
	}
	want := map[string]int64{"memory_stores": 1, "memories": 1, "memory_versions": 4, "sessions": 1, "session_events": 2, "work_items": 1, "credentials": 1, "session_resources": 1,
		"webhook_endpoints": 1, "webhook_events": 2, "webhook_deliveries": 2, "webhook_attempts": 1}
	for name, n := range want {
		if rows[name] != n {
			t.Errorf("%s: copied %d rows, want %d", name, rows[name], n)
		}
	}

	dst, err := postgres.Open(ctx, pgURL, postgres.Options{})
	must(err)
	defer dst.Close()
	got, err := dst.GetMemory(ctx, st.ID, m.ID)
	if err != nil || *got.Content != two {
		t.Fatalf("memory after the copy: %v %+v", err, got)
	}
	red, err := dst.GetMemoryVersion(ctx, st.ID, first)
	if err != nil || !red.Redacted() || red.Content != "" || red.RedactedBy != by {
		t.Fatalf("redacted version after the copy: %v %+v", err, red)
	}
	evs, err := dst.ListEvents(ctx, sess.ID, storage.EventQuery{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events after the copy: %v %d", err, len(evs))
	}
	// The log goes on after the copied events.
	more, err := dst.AppendEvents(ctx, sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil)
	must(err)
	if seq, err := dst.EventSeq(ctx, sess.ID, more[0].ID); err != nil || seq <= evs[1].Seq {
		t.Fatalf("new event seq %d after %d: %v", seq, evs[1].Seq, err)
	}
	if _, err := dst.CredentialByHash(ctx, "h"); err != nil {
		t.Fatalf("sessions token after the copy: %v", err)
	}

	// A second copy into the same database is refused, changing nothing.
	if _, err := sqlitetopg.Copy(ctx, path, pgURL); err == nil {
		t.Fatal("a copy into a database holding data was accepted")
	}
	if n, err := dst.CountMemories(ctx, st.ID); err != nil || n != 1 {
		t.Fatalf("after the refused copy: %d memories, %v", n, err)
	}
}
