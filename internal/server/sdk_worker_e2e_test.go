package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
)

// TestOfficialWorkerServesAScriptedSession runs the official SDK's own
// environment worker against a memstore server: it claims the session's
// item, mounts both stores (their mount paths live under a temporary
// prefix, since the worker uses them verbatim), runs the script's tool
// calls, syncs the changes back, removes the folders and stops the item.
func TestOfficialWorkerServesAScriptedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the official worker end to end")
	}
	mnt := filepath.Join(t.TempDir(), "mnt", "memory")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	s := newSDKServer(t, func(_ *app.Config, c *server.Config) { c.MountPrefix = mnt })
	ctx := context.Background()
	c, err := client.New(s.url, client.WithAPIKey(s.apiKey))
	if err != nil {
		t.Fatal(err)
	}

	env, err := c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := c.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := c.CreateAgent(ctx, api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Team Notes"})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "Reference"})
	if err != nil {
		t.Fatal(err)
	}
	mustMemory := func(store, path, content string) *api.Memory {
		m, err := c.CreateMemory(ctx, store, api.CreateMemoryRequest{Path: path, Content: content})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	seed := mustMemory(rw.ID, "/seed.md", "remember the milk")
	editMe := mustMemory(rw.ID, "/edit-me.md", "version one")
	roMem := mustMemory(ro.ID, "/facts.md", "water is wet")

	rwDir, roDir := filepath.Join(mnt, "team-notes"), filepath.Join(mnt, "reference")
	script := `{"tool_calls":[
		{"name":"read","input":{"file_path":"` + rwDir + `/seed.md"}},
		{"name":"write","input":{"file_path":"` + rwDir + `/new.md","content":"written by the agent"}},
		{"name":"edit","input":{"file_path":"` + rwDir + `/edit-me.md","old_string":"one","new_string":"two"}},
		{"name":"write","input":{"file_path":"` + roDir + `/facts.md","content":"water is dry"}}
	],"end":"terminate"}`
	sess, err := c.CreateSession(ctx, api.CreateSessionRequest{
		Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		Resources: []api.SessionResourceParams{
			{Type: api.ResourceMemoryStore, MemoryStoreID: rw.ID},
			{Type: api.ResourceMemoryStore, MemoryStoreID: ro.ID, Access: api.AccessReadOnly},
		},
		InitialEvents: []api.Event{api.UserMessage(script)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Resources[0].MountPath != rwDir || sess.Resources[1].MountPath != roDir {
		t.Fatalf("mount paths = %s, %s", sess.Resources[0].MountPath, sess.Resources[1].MountPath)
	}

	// The official worker, talking to memstore with the environment key.
	sdk := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey("unused"), option.WithMaxRetries(1))
	worker := environments.NewEnvironmentWorker(sdk, environments.EnvironmentWorkerOptions{
		EnvironmentID:  env.ID,
		EnvironmentKey: key.Key,
		WorkerID:       "e2e-worker",
		Workdir:        t.TempDir(),
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	wctx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- worker.Run(wctx) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker.Run: %v", err)
		}
	}()

	// Wait for the worker to stop the item (it does so once the session has
	// terminated and its final sync is done).
	deadline := time.Now().Add(2 * time.Minute)
	var work api.Work
	for {
		var page *api.Page[api.Work]
		page, err = c.ListWork(ctx, env.ID, api.WorkListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 1 && page.Data[0].State == api.WorkStopped {
			work = page.Data[0]
			break
		}
		if time.Now().After(deadline) {
			evs, _ := c.ListEvents(ctx, sess.ID, api.EventListParams{Limit: 1000})
			t.Fatalf("the worker did not finish the session; work = %+v\nevents: %+v", page.Data, evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if work.AcknowledgedAt == nil || work.StartedAt == nil || work.StoppedAt == nil {
		t.Fatalf("stopped item = %+v", work)
	}

	// The agent saw every result, including the refusal of the read-only store.
	got, err := c.GetSession(ctx, sess.ID)
	if err != nil || got.Status != api.SessionTerminated {
		t.Fatalf("session = %+v, %v", got, err)
	}
	evs, err := c.ListEvents(ctx, sess.ID, api.EventListParams{Limit: 1000, Types: []string{api.EventAgentMessage}})
	if err != nil || len(evs.Data) != 1 {
		t.Fatalf("agent messages = %+v, %v", evs, err)
	}
	summary := evs.Data[0].Text()
	for _, want := range []string{"4 tool call(s), 1 failed", "1. read (ok): remember the milk", "2. write (ok)", "3. edit (ok)", "4. write (error)", "read-only"} {
		if !strings.Contains(summary, want) {
			t.Fatalf("summary lacks %q:\n%s", want, summary)
		}
	}

	// The read-write store holds the new versions, attributed to the session.
	content := func(store, id string) string {
		m, err := c.GetMemory(ctx, store, id, client.GetMemoryParams{View: api.ViewFull})
		if err != nil {
			t.Fatal(err)
		}
		return *m.Content
	}
	if got := content(rw.ID, editMe.ID); got != "version two" {
		t.Fatalf("edited memory = %q", got)
	}
	if got := content(rw.ID, seed.ID); got != "remember the milk" {
		t.Fatalf("read memory changed: %q", got)
	}
	bySession, err := c.ListMemoryVersions(ctx, rw.ID, client.ListMemoryVersionsParams{SessionID: sess.ID, View: api.ViewFull})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]string{}
	for _, v := range bySession.Data {
		if v.CreatedBy.Type != api.SessionActor || v.CreatedBy.SessionID != sess.ID || v.Path == nil || v.Content == nil {
			t.Fatalf("version %+v is not attributed to the session", v)
		}
		ops[*v.Path] = v.Operation + ":" + *v.Content
	}
	if len(ops) != 2 || ops["/new.md"] != "created:written by the agent" || ops["/edit-me.md"] != "modified:version two" {
		t.Fatalf("the session's versions = %v", ops)
	}

	// The read-only store is unchanged.
	if got := content(ro.ID, roMem.ID); got != "water is wet" {
		t.Fatalf("read-only memory = %q", got)
	}
	roVersions, err := c.ListMemoryVersions(ctx, ro.ID, client.ListMemoryVersionsParams{})
	if err != nil || len(roVersions.Data) != 1 {
		t.Fatalf("read-only store versions = %+v, %v", roVersions, err)
	}

	// The folders the worker created are gone.
	for _, dir := range []string{rwDir, roDir} {
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists after the item (%v)", dir, err)
		}
	}
}
