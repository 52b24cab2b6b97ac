package worker

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/testserver"
)

// Sessions run end to end by a worker that webhooks wake, with no poll
// loop: the server's session.status_run_started delivery reaches the
// handler, which answers at once, drains the queue (the session's memory
// synced to the server) and idles until the next delivery wakes it.
func TestWebhookWorkerServesSessionsWithoutPolling(t *testing.T) {
	srv := startServerWith(t, testserver.Options{Webhooks: &app.WebhooksConfig{AllowPrivate: true}})
	f := newFixtureWith(t, srv, api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}})
	logs := &testlog.Buffer{}
	w := f.worker(f.memoryConfig(logs))

	var (
		handler  atomic.Pointer[WebhookHandler]
		answered atomic.Int32
		unsigned atomic.Int32
	)
	recv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		handler.Load().ServeHTTP(rec, r)
		if rec.Code == http.StatusUnauthorized {
			unsigned.Add(1)
		} else {
			answered.Add(1)
		}
		rw.WriteHeader(rec.Code)
	}))
	t.Cleanup(recv.Close)
	ep, err := f.admin.CreateWebhook(context.Background(), api.WebhookEndpointParams{URL: ptr(recv.URL), EnabledEvents: []string{RunStarted}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.NewWebhookHandler(ep.SigningSecret)
	if err != nil {
		t.Fatal(err)
	}
	handler.Store(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)

	st := f.memStore("notes", nil)
	for i, content := range []string{"first\n", "second\n"} {
		sess := f.session(script(api.ScriptEndTerminate,
			toolCall("write", map[string]any{"file_path": "/mnt/memory/notes/run.md", "content": content})), attach(st, "read_write"))
		waitFor(t, "the webhook-woken worker to serve the session", func() bool {
			return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
		})
		waitFor(t, "the memory to be synced", func() bool { return f.memories(st.ID)["/run.md"] == content })
		if answered.Load() < int32(i+1) {
			t.Fatalf("%d deliveries answered after session %d", answered.Load(), i+1)
		}
	}
	if unsigned.Load() != 0 {
		t.Fatalf("%d deliveries of memstore's did not verify", unsigned.Load())
	}
	if strings.Contains(logs.String(), "worker polling for work") {
		t.Fatal("a poll loop ran")
	}

	// A forged delivery is refused and wakes nothing. Run is stopped first,
	// so a wake it would have consumed stays in the channel to be seen.
	stop()
	select {
	case <-h.kick:
	default:
	}
	forged := httptest.NewRecorder()
	h.ServeHTTP(forged, httptest.NewRequest("POST", "/", strings.NewReader(`{"type":"event","data":{"type":"session.status_run_started"}}`)))
	if forged.Code != http.StatusUnauthorized {
		t.Fatalf("forged delivery answered %d, want 401", forged.Code)
	}
	if len(h.kick) != 0 {
		t.Fatal("the forged delivery woke the worker")
	}
}

func ptr[T any](v T) *T { return &v }

// A handler is refused without the environment's credentials or with a
// secret that is not a whsec_ one, with a message that says what to pass.
func TestNewWebhookHandlerRefusals(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	onWork := func(context.Context, api.Work) error { return nil }
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for _, tc := range []struct {
		name, envID, envKey, secret, want string
	}{
		{"no environment", "", "", secret, "--environment-id and --environment-key"},
		{"no secret", "env_1", "key", "", "not a whsec_ secret"},
		{"not a secret", "env_1", "key", "whsec_!!!", "not a whsec_ secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(Config{Client: c, Workdir: t.TempDir(), EnvironmentID: tc.envID, EnvironmentKey: tc.envKey, OnWork: onWork})
			if err != nil {
				t.Fatal(err)
			}
			h, err := w.NewWebhookHandler(tc.secret)
			if err == nil || h != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewWebhookHandler = %v, %v; want a refusal saying %q", h, err, tc.want)
			}
		})
	}
	w, err := New(Config{Client: c, Workdir: t.TempDir(), EnvironmentID: "env_1", EnvironmentKey: "key", OnWork: onWork})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.NewWebhookHandler(secret); err != nil {
		t.Fatalf("a valid secret was refused: %v", err)
	}
}
