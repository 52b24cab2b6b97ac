package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/testserver"
	"github.com/memstore/memstore/internal/webhooks"
)

// pagedFolderSize is how many memories the fixture puts in one folder: more
// than one page of a store's tree (100 entries).
const pagedFolderSize = 105

// consoleFixture is what seedConsole made: a store with nested folders
// whose names need escaping in a URL, a folder longer than a page, a
// memory with a history (one version redacted, one memory deleted), and a
// session, an environment and a webhook endpoint for the other pages.
type consoleFixture struct {
	StoreID string
	// Nested is the deepest folder: "/decisions/2026 Q1 & Q2/100% done/".
	Nested string
	// Paged is the folder with pagedFolderSize memories, "/log/".
	Paged string
	// Edited is a memory with several versions; Deleted one deleted.
	Edited, Deleted string
	SessionID       string
	EnvironmentID   string
	AgentID         string
	// SkillID has two versions: the skill page links to the first.
	SkillID string
}

// startSeededConsole starts a console with ada signed up and
// seedConsole's data in it. Its webhooks go to a local receiver that
// answers 204 (the endpoint must reach a host; nothing is sent during a
// test, the delivery loop runs once an hour).
func startSeededConsole(t *testing.T) (*testserver.Server, consoleFixture) {
	t.Helper()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(recv.Close)
	srv := testserver.Start(t, testserver.Options{Console: true, Webhooks: &app.WebhooksConfig{AllowPrivate: true}, WebhookInterval: time.Hour})
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(context.Background(), "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	return srv, seedConsole(t, srv, recv.URL+"/hook")
}

func seedConsole(t *testing.T, srv *testserver.Server, hook string) consoleFixture {
	t.Helper()
	ctx := context.Background()
	admin := srv.Admin(t)
	f := consoleFixture{Nested: "/decisions/2026 Q1 & Q2/100% done/", Paged: "/log/"}
	store, err := admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Team notes", Description: ptr("what the team decided")})
	if err != nil {
		t.Fatal(err)
	}
	f.StoreID = store.ID
	create := func(path, content string) *api.Memory {
		t.Helper()
		m, err := admin.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: path, Content: content})
		if err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
		return m
	}
	create("/readme.md", "start here")
	create("/decisions/adr-1.md", "use SQLite")
	create("/decisions/2026 Q1 & Q2/plan.md", "the plan")
	create(f.Nested+"shipped.md", "it shipped")
	create("/c++ notes/templates.md", "angle brackets")
	for i := range pagedFolderSize {
		create(fmt.Sprintf("%sentry-%03d.md", f.Paged, i), fmt.Sprintf("entry %d", i))
	}
	edited := create("/decisions/adr-2.md", "first text")
	f.Edited = edited.ID
	for _, text := range []string{"second text", "third text"} {
		if _, err := admin.UpdateMemory(ctx, store.ID, edited.ID, api.UpdateMemoryRequest{Content: &text}); err != nil {
			t.Fatal(err)
		}
	}
	versions, err := admin.ListMemoryVersions(ctx, store.ID, client.ListMemoryVersionsParams{MemoryID: edited.ID})
	if err != nil || len(versions.Data) != 3 {
		t.Fatalf("versions of the edited memory: %v, %v", versions, err)
	}
	if _, err := admin.RedactMemoryVersion(ctx, store.ID, versions.Data[2].ID); err != nil {
		t.Fatal(err)
	}
	deleted := create("/decisions/dropped.md", "never mind")
	if _, err := admin.DeleteMemory(ctx, store.ID, deleted.ID, client.DeleteMemoryParams{}); err != nil {
		t.Fatal(err)
	}
	f.Deleted = deleted.ID

	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	f.EnvironmentID = env.ID
	if _, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "note-taker", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		Resources: []api.SessionResourceParams{{Type: "memory_store", MemoryStoreID: store.ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.SessionID = sess.ID
	f.AgentID = agent.ID
	skillMD := func(what string) []client.SkillFile {
		return []client.SkillFile{{Path: "notes/SKILL.md", Content: []byte("---\nname: notes\ndescription: " + what + "\n---\nKeep notes short.\n")}}
	}
	skill, err := admin.CreateSkill(ctx, "", skillMD("Take notes."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateSkillVersion(ctx, skill.ID, skillMD("Take shorter notes.")); err != nil {
		t.Fatal(err)
	}
	f.SkillID = skill.ID
	if _, err := admin.CreateWebhook(ctx, api.WebhookEndpointParams{URL: &hook, EnabledEvents: []string{webhooks.MemoryStoreArchived}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func ptr[T any](v T) *T { return &v }
