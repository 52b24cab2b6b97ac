package server

import (
	"context"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// TestWebhookEndpointsRefuseAnEnvironmentKey: managing endpoints needs an
// API key; a worker's environment key is refused on every verb (403
// permission_error), and the endpoint, its secret and the list are as they
// were.
func TestWebhookEndpointsRefuseAnEnvironmentKey(t *testing.T) {
	e := newCPEnv(t)
	key := e.envKey(e.environment("w").ID)
	var made api.NewWebhookEndpoint
	e.must(200, "POST", "/v1/organizations/webhooks", e.apiKey, map[string]any{"url": "https://93.184.215.14/hook", "enabled_events": []string{webhooks.SessionCreated}}, &made)
	hook := "/v1/organizations/webhooks/" + made.ID
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/organizations/webhooks", map[string]any{"url": "https://93.184.215.14/other", "enabled_events": []string{webhooks.SessionCreated}}},
		{"GET", "/v1/organizations/webhooks", nil},
		{"GET", hook, nil},
		{"POST", hook, map[string]any{"name": "renamed", "state": "disabled"}},
		{"POST", hook + "/regenerate_signing_secret", nil},
		{"GET", hook + "/deliveries", nil},
		{"DELETE", hook, nil},
	} {
		if r := e.call(c.method, c.path, key, c.body); r.status != 403 || r.errType() != string(api.Permission) || !strings.Contains(string(r.body), "API key") {
			t.Errorf("%s %s with an environment key: %d %s; want 403 permission_error naming the API key", c.method, c.path, r.status, r.body)
		}
	}
	list, err := e.db.ListWebhookEndpoints(context.Background(), storage.ListQuery{})
	if err != nil || len(list) != 1 {
		t.Fatalf("endpoints after the refusals: %+v, %v; want the one made", list, err)
	}
	if got := list[0]; got.ID != made.ID || got.Name != "" || got.State != webhooks.StateEnabled || got.URL != "https://93.184.215.14/hook" || got.Secret != made.SigningSecret {
		t.Fatalf("endpoint after the refusals: %+v; want it unchanged", got)
	}
}
