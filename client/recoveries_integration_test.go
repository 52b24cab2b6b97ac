package client_test

import (
	"context"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testserver"
)

// A worker asks the environment whether the server takes recoveries:
// memstore says so to the environment's key, a server without memstore's
// extensions (Anthropic's API) does not, and its recoveries endpoint is an
// unknown route there.
func TestOffersRecoveriesTellsMemstoreFromTheHostedAPI(t *testing.T) {
	ctx := context.Background()
	for _, hosted := range []bool{false, true} {
		rs := startServer(t)
		if hosted {
			rs.Wrap(testserver.WithoutExtensions)
		}
		admin := adminClient(t, rs)
		env := must(admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "fleet"})).ok(t)
		key := must(admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "worker"})).ok(t)
		worker := rs.Client(t, client.WithBearerToken(key.Key))
		offered, err := worker.OffersRecoveries(ctx, env.ID)
		if err != nil || offered == hosted {
			t.Fatalf("hosted %v: OffersRecoveries = %v, %v", hosted, offered, err)
		}
		if hosted {
			_, err := worker.RecoverMemory(ctx, env.ID, api.RecoveryRequest{})
			if !client.IsStatus(err, 404) {
				t.Fatalf("a recovery on the hosted API: %v, want 404", err)
			}
		}
	}
}
