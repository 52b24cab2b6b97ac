package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testserver"
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

// A change made in the console that stores a delivery wakes the dispatcher
// as one made through the API does: the event goes out at once, although
// the dispatcher's interval is an hour.
func TestAConsoleChangeIsDeliveredAtOnce(t *testing.T) {
	got := make(chan string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- string(body)
	}))
	defer recv.Close()
	srv := testserver.Start(t, testserver.Options{Console: true, Webhooks: &app.WebhooksConfig{AllowPrivate: true}, WebhookInterval: time.Hour})
	if _, err := app.NewUsers(srv.Store, nil, nil).Create(context.Background(), "ada", testPassword); err != nil {
		t.Fatal(err)
	}
	admin := srv.Admin(t)
	hook := recv.URL + "/hook"
	if _, err := admin.CreateWebhook(context.Background(), api.WebhookEndpointParams{URL: &hook, EnabledEvents: []string{webhooks.MemoryStoreArchived}}); err != nil {
		t.Fatal(err)
	}
	st, err := admin.CreateMemoryStore(context.Background(), api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVisitor(t, srv)
	v.login("ada", testPassword)
	path := "/console/stores/" + st.ID + "/settings"
	if status, page := v.do("POST", "/console/stores/"+st.ID+"/archive", url.Values{"csrf": {v.csrf(path)}}); status != http.StatusSeeOther {
		t.Fatalf("archive: status %d:\n%s", status, page)
	}
	select {
	case body := <-got:
		if !strings.Contains(body, webhooks.MemoryStoreArchived) || !strings.Contains(body, st.ID) {
			t.Fatalf("received %s; want the store's memory_store.archived", body)
		}
	case <-time.After(30 * time.Second): // a safety bound, not a timing
		t.Fatal("the console's archive was not delivered: the dispatcher was not woken")
	}
}
