package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// BenchmarkStorageStatusAppend is the cost of a session status change with
// no webhook endpoint, and with endpoints subscribed to it (each then gets
// a delivery in the change's transaction): the outbox's price on the
// hottest write path.
func BenchmarkStorageStatusAppend(b *testing.B) {
	for _, endpoints := range []int{0, 1, 5} {
		b.Run(map[int]string{0: "no-endpoint", 1: "1-endpoint", 5: "5-endpoints"}[endpoints], func(b *testing.B) {
			db, _ := benchStore(b)
			ctx := context.Background()
			now := time.Now().UTC()
			for range endpoints {
				if err := db.CreateWebhookEndpoint(ctx, webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.New(ids.Webhook), URL: "https://example.test/",
					State: webhooks.StateEnabled, EnabledEvents: []string{webhooks.SessionStatusRunStarted, webhooks.SessionStatusIdled}, CreatedAt: now, UpdatedAt: now}, Secret: "whsec_c2VjcmV0"}); err != nil {
					b.Fatal(err)
				}
			}
			env := storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted, CreatedAt: now, UpdatedAt: now}
			if err := db.CreateEnvironment(ctx, env); err != nil {
				b.Fatal(err)
			}
			agent := api.Agent{SessionAgent: api.SessionAgent{ID: ids.New(ids.Agent), Name: "a", Model: api.ModelConfig{ID: api.ScriptedModel}}, CreatedAt: now, UpdatedAt: now}
			if err := db.CreateAgent(ctx, agent); err != nil {
				b.Fatal(err)
			}
			// A fresh session every 200 appends keeps the log (which each
			// append reads) short, as a real turn's is.
			var sessionID string
			b.ResetTimer()
			for i := range b.N {
				if i%200 == 0 {
					b.StopTimer()
					sess := api.Session{ID: ids.New(ids.Session), EnvironmentID: env.ID, Agent: agent.SessionAgent, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
					if _, err := db.CreateSession(ctx, sess, storage.Work{ID: ids.New(ids.Work), CreatedAt: now}, nil); err != nil {
						b.Fatal(err)
					}
					sessionID = sess.ID
					b.StartTimer()
				}
				typ := api.EventSessionStatusRunning
				if i%2 == 1 {
					typ = api.EventSessionStatusIdle
				}
				if _, err := db.AppendEvents(ctx, sessionID, []api.Event{{Type: typ}}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
