package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/memstore/memstore/api"
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
	waitUntil(t, "the first attempt to be refused", func() bool { mu.Lock(); defer mu.Unlock(); return refused > 0 })
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
	if accepted[id] != 1 || types[id] != webhooks.EnvironmentCreated+" "+env.ID || len(accepted) != 1 {
		t.Fatalf("accepted %v (%v), want %s once", accepted, types, id)
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
