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
