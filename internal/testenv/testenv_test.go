package testenv_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testenv"
)

func TestServerRunsOnTheTestsClockAndCanBeWrapped(t *testing.T) {
	start := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	clk := testenv.NewClock(start)
	srv := testenv.StartServer(t, testenv.Options{Clock: clk})
	admin := srv.Admin(t)
	clk.Advance(time.Hour)
	st, err := admin.CreateMemoryStore(t.Context(), api.CreateMemoryStoreRequest{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if !st.CreatedAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("created_at %v, want the test clock's %v", st.CreatedAt, start.Add(time.Hour))
	}
	srv.Wrap(func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "teapot", http.StatusTeapot) })
	})
	if _, err := admin.GetMemoryStore(t.Context(), st.ID); !client.IsStatus(err, http.StatusTeapot) {
		t.Fatalf("wrapped server answered %v", err)
	}
	srv.Wrap(nil)
	if _, err := admin.GetMemoryStore(t.Context(), st.ID); err != nil {
		t.Fatalf("unwrapped server answered %v", err)
	}
}

func TestRealClockFollowsTimeShiftedByAdvance(t *testing.T) {
	clk := testenv.RealClock()
	clk.Advance(time.Hour)
	if d := clk.Now().Sub(time.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("a real clock advanced by an hour is %v ahead", d)
	}
}
