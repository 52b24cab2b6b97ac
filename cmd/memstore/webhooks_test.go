package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/internal/webhooks"
)

// A `memstore serve` killed with SIGKILL after a change and before its
// webhook was delivered delivers it after a restart, and the receiver
// accepts each webhook-id exactly once.
func TestServeKilledBeforeDeliveryDeliversAfterRestart(t *testing.T) {
	const key = "sk-memstore-webhooks"
	var (
		mu       sync.Mutex
		up       bool
		accepted = map[string]int{} // webhook-id → 2xx answers
		types    = map[string]string{}
		refused  int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !up {
			refused++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var env webhooks.Envelope
		json.Unmarshal(body, &env)
		accepted[r.Header.Get("webhook-id")]++
		types[r.Header.Get("webhook-id")] = env.Data.Type + " " + env.Data.ID
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)

	data := filepath.Join(t.TempDir(), "data")
	p := serveProcess(t, data, key, "--webhooks-allow-private")
	var ep api.NewWebhookEndpoint
	p.must(t, "POST", "/v1/organizations/webhooks", key, map[string]any{"url": recv.URL, "enabled_events": []string{webhooks.EnvironmentCreated}}, &ep)
	var env api.Environment
	p.must(t, "POST", "/v1/environments", key, map[string]any{"name": "hooked"}, &env)
	// The kill comes once the refused attempt is recorded: killed between
	// the receiver's answer and that record, the delivery would wait out
	// its claim's lease (a minute) before the next server retries it.
	waitUntil(t, "the first attempt to be refused and recorded", func() bool {
		var page api.Page[api.WebhookDelivery]
		p.must(t, "GET", "/v1/organizations/webhooks/"+ep.ID+"/deliveries", key, nil, &page)
		return len(page.Data) == 1 && len(page.Data[0].Attempts) > 0
	})
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	mu.Lock()
	up = true
	mu.Unlock()
	p = serveProcess(t, data, key, "--webhooks-allow-private")
	var page api.Page[api.WebhookDelivery]
	waitUntil(t, "the delivery to succeed after the restart", func() bool {
		p.must(t, "GET", "/v1/organizations/webhooks/"+ep.ID+"/deliveries", key, nil, &page)
		return len(page.Data) == 1 && page.Data[0].State == webhooks.Delivered
	})
	mu.Lock()
	defer mu.Unlock()
	id := page.Data[0].ID
	if refused == 0 || accepted[id] != 1 || types[id] != webhooks.EnvironmentCreated+" "+env.ID || len(accepted) != 1 {
		t.Fatalf("refused %d, accepted %v (%v), want a refusal then %s once", refused, accepted, types, id)
	}
	p.stop(t, syscall.SIGTERM)
}

// The webhook verbs manage an endpoint end to end; a refused create (a
// loopback URL without the operator's flag) stores nothing.
func TestWebhookVerbs(t *testing.T) {
	rs, data := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--data", data}
	memstoreCLI(t, 1, append([]string{"webhook", "create", "--url", "https://127.0.0.1/hook", "--events", webhooks.SessionCreated}, conn...)...)
	var list []api.WebhookEndpoint
	decodeOut(t, memstoreCLI(t, 0, append([]string{"webhook", "list"}, conn...)...), &list)
	if len(list) != 0 {
		t.Fatalf("a refused create stored %+v", list)
	}
	var made api.NewWebhookEndpoint
	decodeOut(t, memstoreCLI(t, 0, append([]string{"webhook", "create", "--url", "https://93.184.215.14/hook", "--events", webhooks.SessionCreated + "," + webhooks.SessionDeleted}, conn...)...), &made)
	if made.SigningSecret == "" || len(made.EnabledEvents) != 2 {
		t.Fatalf("created %+v", made)
	}
	var up api.WebhookEndpoint
	decodeOut(t, memstoreCLI(t, 0, append([]string{"webhook", "update", "--state", "disabled", made.ID}, conn...)...), &up)
	if up.State != "disabled" {
		t.Fatalf("updated %+v", up)
	}
	var sec api.WebhookSigningSecret
	decodeOut(t, memstoreCLI(t, 0, append([]string{"webhook", "rotate-secret", made.ID}, conn...)...), &sec)
	if sec.SigningSecret == made.SigningSecret {
		t.Fatal("the secret did not change")
	}
	memstoreCLI(t, 0, append([]string{"webhook", "deliveries", made.ID}, conn...)...)
	memstoreCLI(t, 0, append([]string{"webhook", "delete", made.ID}, conn...)...)
	memstoreCLI(t, 1, append([]string{"webhook", "get", made.ID}, conn...)...)
}

// `memstore worker webhook` serves a session the server announces by
// webhook, with no poll loop, and stops when its context ends.
func TestWorkerWebhookVerbServesASession(t *testing.T) {
	rs := testServe(t, serveOptions{webhooksAllowPrivate: true})
	ctx := context.Background()
	admin, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "hooked"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "webhook worker"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	// The secret comes first, the worker's address after: make the
	// endpoint, start the worker with its secret, then point the endpoint
	// at it (an update keeps the secret).
	placeholder := "http://127.0.0.1:9/not-yet"
	hook, err := admin.CreateWebhook(ctx, api.WebhookEndpointParams{URL: &placeholder, EnabledEvents: []string{webhooks.SessionStatusRunStarted}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	logs := &testlog.Buffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(wctx, []string{"worker", "webhook", "--listen", "127.0.0.1:0", "--webhook-secret", hook.SigningSecret,
			"--base-url", rs.baseURL, "--environment-id", env.ID, "--environment-key", key.Key,
			"--workdir", t.TempDir(), "--mount-root", t.TempDir(), "--sandbox", "none"}, testStreams(io.Discard, logs))
	}()
	var addr string
	waitUntil(t, "the webhook worker to listen", func() bool {
		_, addr, _ = strings.Cut(logs.Line("worker webhook listening on"), "listening on ")
		addr = strings.TrimSpace(addr)
		return addr != ""
	})
	target := "http://" + addr
	if _, err := admin.UpdateWebhook(ctx, hook.ID, api.WebhookEndpointParams{URL: &target}); err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: env.ID,
		InitialEvents: []api.Event{api.UserMessage(`{"tool_calls":[{"name":"bash","input":{"command":"echo woken"}}],"end":"terminate"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the webhook-woken worker to serve the session", func() bool {
		items, err := admin.ListWork(ctx, env.ID, api.WorkListParams{})
		if err != nil || len(items.Data) == 0 {
			return false
		}
		s, err := admin.GetSession(ctx, sess.ID)
		return err == nil && s.Status == api.SessionTerminated && items.Data[0].State == api.WorkStopped
	})
	stop()
	if code := <-exited; code != 0 {
		t.Fatalf("worker webhook exited %d:\n%s", code, logs)
	}
	if strings.Contains(logs.String(), "worker polling for work") {
		t.Fatalf("a poll loop ran:\n%s", logs)
	}
}
