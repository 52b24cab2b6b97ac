package dispatcher

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// BenchmarkDeliver is the dispatcher's throughput to a receiver on
// loopback that answers at once: claim, sign, POST, record, per delivery
// (a batch of 16 in flight), on SQLite.
func BenchmarkDeliver(b *testing.B) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer recv.Close()
	db, _ := fixture(b, recv.URL)
	ctx := context.Background()
	now := time.Now().UTC()
	for range b.N {
		if err := db.CreateEnvironment(ctx, storage.Environment{ID: ids.New(ids.Environment), Name: "e", ConfigType: api.EnvironmentConfigSelfHosted,
			CreatedAt: now, UpdatedAt: now}); err != nil {
			b.Fatal(err)
		}
	}
	d := New(Config{Store: db, Logger: slog.New(slog.DiscardHandler), Egress: egress.Policy{AllowPrivate: true}})
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		n, err := d.RunOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		sent += n
	}
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "deliveries/s")
}
