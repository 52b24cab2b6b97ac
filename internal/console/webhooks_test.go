package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// The webhooks page creates an endpoint under the API's rules: a refused
// one is explained and stores nothing; a created one shows its secret once.
func TestWebhookEndpointFromTheConsole(t *testing.T) {
	srv := startConsole(t)
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	token := v.csrf("/console/webhooks")
	count := func() int {
		eps, err := srv.Store.ListWebhookEndpoints(context.Background(), storage.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return len(eps)
	}
	for _, form := range []url.Values{
		{"csrf": {token}, "url": {"https://127.0.0.1/hook"}, "events": {webhooks.SessionCreated}},
		{"csrf": {token}, "url": {"https://93.184.215.14/hook"}},
		{"csrf": {token}, "url": {"https://93.184.215.14/hook"}, "events": {"vault.created"}},
	} {
		status, page := v.do("POST", "/console/webhooks", form)
		if status != http.StatusBadRequest || !strings.Contains(page, "Nothing was created") {
			t.Errorf("%v: status %d:\n%s", form, status, page)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("refused forms stored %d endpoints", n)
	}
	status, page := v.do("POST", "/console/webhooks", url.Values{"csrf": {token}, "url": {"https://93.184.215.14/hook"}, "name": {"ops"},
		"events": {webhooks.SessionStatusIdled, webhooks.SessionRequiresAction}})
	secret := regexp.MustCompile(`<pre class="key">(whsec_[^<]+)</pre>`).FindStringSubmatch(page)
	if status != http.StatusOK || secret == nil || count() != 1 {
		t.Fatalf("create: status %d, no secret shown:\n%s", status, page)
	}
	if _, page = v.do("GET", "/console/webhooks", nil); strings.Contains(page, secret[1]) || !strings.Contains(page, webhooks.SessionRequiresAction) || !strings.Contains(page, "https://93.184.215.14/hook") {
		t.Fatalf("the list shows the secret again, or not the endpoint:\n%s", page)
	}
}
