package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/webhooks"
)

// Two replicas sharing one PostgreSQL database both run their dispatcher:
// each event is accepted once, and each object's events arrive in order,
// whichever replica made the change and whichever sends it.
func TestReplicasDeliverEachWebhookOnceInOrder(t *testing.T) {
	pgURL := testenv.PostgresSchema(t)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		accepted = map[string]int{}
		order    = map[string][]string{}
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env webhooks.Envelope
		json.Unmarshal(body, &env)
		mu.Lock()
		defer mu.Unlock()
		accepted[r.Header.Get("webhook-id")]++
		order[env.Data.ID] = append(order[env.Data.ID], env.Data.Type)
	}))
	t.Cleanup(recv.Close)

	var stores []storage.Store
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	for range 2 {
		db, err := postgres.Open(ctx, pgURL, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler), Webhooks: app.WebhooksConfig{AllowPrivate: true}})
		t.Cleanup(a.Close)
		wg.Go(func() { a.RunWebhooks(runCtx, 5*time.Millisecond) })
		stores = append(stores, db)
	}
	now := time.Now().UTC()
	if err := stores[0].CreateWebhookEndpoint(ctx, webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: recv.URL,
		State: webhooks.StateEnabled, EnabledEvents: []string{webhooks.EnvironmentCreated, webhooks.EnvironmentUpdated, webhooks.EnvironmentArchived},
		CreatedAt: now, UpdatedAt: now}, Secret: "whsec_c2VjcmV0"}); err != nil {
		t.Fatal(err)
	}
	const envs = 6
	want := []string{webhooks.EnvironmentCreated, webhooks.EnvironmentUpdated, webhooks.EnvironmentUpdated, webhooks.EnvironmentArchived}
	var made []string
	for i := range envs {
		e := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
		if err := stores[i%2].CreateEnvironment(ctx, e); err != nil {
			t.Fatal(err)
		}
		for j, archive := range []bool{false, false, true} {
			if _, err := stores[(i+j+1)%2].UpdateEnvironment(ctx, e.ID, func(x *storage.Environment) error {
				x.Name = "renamed"
				if archive {
					x.ArchivedAt = &now
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		made = append(made, e.ID)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		if n == envs*len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered", n, envs*len(want))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for id, n := range accepted {
		if n != 1 {
			t.Errorf("webhook-id %s delivered %d times", id, n)
		}
	}
	for _, id := range made {
		if !slices.Equal(order[id], want) {
			t.Errorf("environment %s: %q, want %q", id, order[id], want)
		}
	}
}
