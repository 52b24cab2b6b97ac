package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/testenv"
)

// A database lost under a running server answers 503 with x-should-retry:
// true (the SDKs retry it) and changes nothing; the server recovers by
// itself, so the retried request succeeds.
func TestALostDatabaseIs503AndRecovers(t *testing.T) {
	appName := fmt.Sprintf("memstore_503_%d", time.Now().UnixNano())
	db, err := postgres.Open(t.Context(), testenv.PostgresSchema(t)+"&pool_max_conns=1&application_name="+appName, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := app.New(app.Config{Store: db, Logger: slog.New(slog.DiscardHandler)})
	defer a.Close()
	srv := New(Config{App: a})
	key, _, err := a.Credentials.BootstrapAdminKey(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	admin, err := pgx.Connect(t.Context(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	list := func() *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", hs.URL+"/v1/memory_stores", nil)
		req.Header.Set("x-api-key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The pool may replace a dead idle connection before using it; try
	// until a request meets the loss head on.
	for attempt := 0; attempt < 20; attempt++ {
		if res := list(); res.StatusCode != 200 {
			t.Fatalf("before the loss: %d", res.StatusCode)
		}
		if _, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, appName); err != nil {
			t.Fatal(err)
		}
		res := list()
		if res.StatusCode == 200 {
			continue
		}
		var env api.ErrorEnvelope
		json.NewDecoder(res.Body).Decode(&env)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("x-should-retry") != "true" || env.Error == nil || env.Error.Type != api.Internal {
			t.Fatalf("a lost database answered %d x-should-retry=%q %+v", res.StatusCode, res.Header.Get("x-should-retry"), env.Error)
		}
		if res := list(); res.StatusCode != 200 {
			t.Fatalf("the retry after the loss: %d", res.StatusCode)
		}
		return
	}
	t.Fatal("no request met the lost database in 20 attempts")
}
