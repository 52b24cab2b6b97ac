package server

import (
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// replicas starts n servers on one PostgreSQL database, each with its own
// handle and the real clock (the database's), as separate processes are.
func replicas(t *testing.T, n int) []*cpEnv {
	url := testenv.PostgresSchema(t)
	out := make([]*cpEnv, n)
	for i := range out {
		db, err := postgres.Open(t.Context(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		out[i] = newCPEnv(t, func(c *Config) { c.Store, c.Now = db, nil })
		if i > 0 {
			out[i].apiKey = out[0].apiKey // bootstrapped once, in the shared database
		}
		if err := out[i].srv.ListenForWakes(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The queue statistics, workers_polling included, are the database's: a
// worker polling one replica is counted by the stats of another, and a
// claim made through one shows as pending through the other.
func TestQueueStatsAreTheSameOnEveryReplica(t *testing.T) {
	rs := replicas(t, 2)
	a := rs[0]
	env := a.environment("shared")
	key := a.envKey(env.ID)
	sess := a.session(env.ID, a.scriptedAgent().ID, nil)
	if w, _ := a.poll(env.ID, key, "worker-a"); w == nil || w.Data.ID != sess.ID {
		t.Fatalf("polling replica a claimed %+v, want the session's item", w)
	}
	for _, r := range rs {
		var st api.WorkQueueStats
		r.must(200, "GET", "/v1/environments/"+env.ID+"/work/stats", key, nil, &st)
		if st.Depth != 0 || st.Pending != 1 || st.WorkersPolling != 1 {
			t.Fatalf("stats through %s = %+v, want 1 pending, 1 worker polling", r.hs.URL, st)
		}
	}
}

// Replicas started together with one MEMSTORE_ADMIN_KEY all start: the
// ones that lose the race to register it find it registered.
func TestReplicasRegisterOneAdminKeyTogether(t *testing.T) {
	rs := replicas(t, 4)
	errs := make(chan error, len(rs))
	for _, r := range rs {
		go func() {
			_, _, err := r.srv.BootstrapAdminKey(t.Context(), "sk-memstore-shared-admin")
			errs <- err
		}()
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatalf("a replica failed to start: %v", err)
		}
	}
	rs[3].must(200, "GET", "/v1/memory_stores", "sk-memstore-shared-admin", nil, nil)
}
