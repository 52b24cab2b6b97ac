package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/webhooks"
)

// fixture is a real SQLite store with one endpoint subscribed to
// environment.created, pointing at url.
func fixture(t testing.TB, url string) (*sqlite.DB, webhooks.Endpoint) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	e := webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: url, State: webhooks.StateEnabled,
		EnabledEvents: []string{webhooks.EnvironmentCreated}, CreatedAt: now, UpdatedAt: now}, Secret: NewSecret()}
	if err := db.CreateWebhookEndpoint(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateEnvironment(context.Background(), storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return db, e
}

func attempts(t *testing.T, db *sqlite.DB, endpointID string) []webhooks.Attempt {
	t.Helper()
	ds, err := db.ListWebhookDeliveries(context.Background(), endpointID, storage.ListQuery{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries = %+v, %v", ds, err)
	}
	return ds[0].Attempts
}

// An address is checked again when dialled: an endpoint stored with a
// loopback URL (or whose name later resolves there) gets no request.
func TestDialRefusesPrivateAddresses(t *testing.T) {
	var hits atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer recv.Close()
	db, e := fixture(t, recv.URL)
	d := New(Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	if n, err := d.RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if hits.Load() != 0 {
		t.Fatal("the dispatcher reached a loopback receiver")
	}
	if a := attempts(t, db, e.ID); len(a) != 1 || a[0].StatusCode != 0 || !strings.Contains(a[0].Error, "loopback") {
		t.Fatalf("attempt = %+v", a)
	}
}

// A redirect is an answer, not a destination: the signed request is sent
// only where the endpoint says, and a 3xx is a failed attempt.
func TestRedirectIsNotFollowed(t *testing.T) {
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	defer elsewhere.Close()
	recv := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect))
	defer recv.Close()
	db, e := fixture(t, recv.URL)
	d := New(Config{Store: db, Logger: slog.New(slog.DiscardHandler), Egress: egress.Policy{AllowPrivate: true}})
	if _, err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if followed.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
	if a := attempts(t, db, e.ID); len(a) != 1 || a[0].StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("attempt = %+v", a)
	}
}

// unreadable is a real store in which one endpoint cannot be read, as when
// the database fails that one query.
type unreadable struct {
	storage.Webhooks
	id string
}

func (u unreadable) GetWebhookEndpoint(ctx context.Context, id string) (webhooks.Endpoint, error) {
	if id == u.id {
		return webhooks.Endpoint{}, errors.New("injected: the endpoint could not be read")
	}
	return u.Webhooks.GetWebhookEndpoint(ctx, id)
}

// A round in which one endpoint cannot be read still sends the deliveries
// of the others, and gives that endpoint's back: they go out at the next
// round, not after their leases lapse.
func TestAnUnreadableEndpointHoldsBackOnlyItsOwnDeliveries(t *testing.T) {
	var hits atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer recv.Close()
	db, broken := fixture(t, recv.URL) // one delivery to broken
	now := time.Now().UTC()
	good := webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: recv.URL, State: webhooks.StateEnabled,
		EnabledEvents: []string{webhooks.EnvironmentCreated}, CreatedAt: now, UpdatedAt: now}, Secret: NewSecret()}
	if err := db.CreateWebhookEndpoint(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateEnvironment(context.Background(), storage.Environment{ID: ids.New(ids.Environment), Name: "f", ConfigType: api.EnvironmentConfigSelfHosted,
		CreatedAt: now, UpdatedAt: now}); err != nil { // one more to each
		t.Fatal(err)
	}
	cfg := Config{Store: unreadable{db, broken.ID}, Logger: slog.New(slog.DiscardHandler), Egress: egress.Policy{AllowPrivate: true}}
	if n, err := New(cfg).RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("RunOnce with %s unreadable = %d, %v; want the other endpoint's 1 delivery sent", broken.ID, n, err)
	}
	if hits.Load() != 1 || len(attempts(t, db, good.ID)) != 1 {
		t.Fatalf("%d requests received, %d attempts recorded for the readable endpoint; want 1 and 1", hits.Load(), len(attempts(t, db, good.ID)))
	}
	cfg.Store = db // the endpoint reads again; no time has passed
	if n, err := New(cfg).RunOnce(context.Background()); n != 2 || err != nil {
		t.Fatalf("the next round = %d, %v; want the 2 given-back deliveries sent", n, err)
	}
	if hits.Load() != 3 {
		t.Fatalf("%d requests received, want 3", hits.Load())
	}
}
