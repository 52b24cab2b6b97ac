package workercli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
)

// MetricsAddrFlag registers --metrics-addr, of serve, up and the worker
// verbs, on fs.
func MetricsAddrFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-addr", EnvOr("MEMSTORE_METRICS_ADDR", ""), "address to serve Prometheus metrics at (GET /metrics, no credential: keep it private); default: none (env MEMSTORE_METRICS_ADDR)")
}

// ServeMetrics serves what g gathers at /metrics on a listener of its own,
// for --metrics-addr. It is a separate address, not a path of the API, so that
// the API's credentials need not be handed to the monitoring system and
// the figures are not shown to whoever can reach the API. It returns once
// the address is bound, with the metrics' URL; stop shuts the listener
// down.
func ServeMetrics(addr string, g prometheus.Gatherer, logger *slog.Logger) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s for metrics: %w (pick a free address with --metrics-addr, or leave it empty to serve no metrics)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	url = "http://" + ln.Addr().String() + "/metrics"
	logger.Info("metrics served", "metrics_url", url)
	return url, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("the metrics listener failed", "addr", addr, "err", err)
		}
	}, nil
}
