package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/storagetest"
	"github.com/memstore/memstore/internal/testenv"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, now func() time.Time) storage.Store {
		db, err := postgres.Open(t.Context(), testenv.PostgresSchema(t), postgres.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}

// An unreachable database at start-up is one line saying where memstore
// looked and what to check; it needs no running server.
func TestOpenUnreachableIsOneClearLine(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://memstore:secret@127.0.0.1:1/memstore?connect_timeout=2", postgres.Options{})
	if err == nil {
		t.Fatal("opened a database that is not there")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, "secret") || !strings.Contains(msg, "127.0.0.1:1/memstore") || !strings.Contains(msg, "check that the server is running") {
		t.Fatalf("error = %q", msg)
	}
}

// Two servers on one database: an event appended or an item queued through
// one wakes the waiters of the other (LISTEN/NOTIFY, delivered at commit).
func TestAWriteOnOneReplicaWakesAnother(t *testing.T) {
	url := testenv.PostgresSchema(t)
	open := func() *postgres.DB {
		db, err := postgres.Open(t.Context(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	wakes := make(chan storage.Wake, 16)
	if err := b.Listen(t.Context(), func(w storage.Wake) { wakes <- w }); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	env := api.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "e", Config: api.EnvironmentConfig{Type: api.EnvironmentConfigSelfHosted}, CreatedAt: now, UpdatedAt: now}
	if err := a.CreateEnvironment(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	sess := api.Session{ID: ids.New(ids.Session), Type: "session", EnvironmentID: env.ID, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now}
	if _, err := a.CreateSession(t.Context(), sess, storage.Work{Work: api.Work{ID: ids.New(ids.Work), CreatedAt: now}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if w := <-wakes; w != (storage.Wake{Topic: storage.TopicQueue, Key: env.ID}) {
		t.Fatalf("first wake = %+v, want the queue of %s", w, env.ID)
	}
	if _, err := a.AppendEvents(t.Context(), sess.ID, []api.Event{{Type: api.EventSessionStatusRunning}}, nil); err != nil {
		t.Fatal(err)
	}
	if w := <-wakes; w != (storage.Wake{Topic: storage.TopicSession, Key: sess.ID}) {
		t.Fatalf("second wake = %+v, want session %s", w, sess.ID)
	}
}

// A connection the database drops (a restart, a failover, an
// administrator) fails the request in flight with storage.ErrUnavailable,
// which the server answers 503 x-should-retry: true, and the next request
// runs on a new connection without anyone restarting anything.
func TestALostConnectionIsUnavailableThenRecovers(t *testing.T) {
	app := fmt.Sprintf("memstore_lost_%d", time.Now().UnixNano())
	url := testenv.PostgresSchema(t) + "&pool_max_conns=1&application_name=" + app
	db, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := pgx.Connect(t.Context(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	// The pool may notice a dead idle connection before using it and
	// replace it silently; try until a request meets the loss head on.
	for attempt := 0; attempt < 20; attempt++ {
		if _, err := db.CountCredentials(t.Context(), storage.APIKey); err != nil {
			t.Fatalf("before the loss: %v", err)
		}
		if _, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
			t.Fatal(err)
		}
		_, err := db.CountCredentials(t.Context(), storage.APIKey)
		if err == nil {
			continue
		}
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("a lost connection gave %v, want storage.ErrUnavailable", err)
		}
		if _, err := db.CountCredentials(t.Context(), storage.APIKey); err != nil {
			t.Fatalf("the next request did not recover: %v", err)
		}
		return
	}
	t.Fatal("no request met the lost connection in 20 attempts")
}
