package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves h (a Prometheus /metrics handler) at /metrics on a
// listener of its own, for `serve --metrics-addr` and `worker poll
// --metrics-addr`. It is a separate address, not a path of the API, so that
// the API's credentials need not be handed to the monitoring system and
// the figures are not shown to whoever can reach the API. It returns once
// the address is bound; stop shuts the listener down.
func serveMetrics(addr string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for metrics: %w (pick a free address with --metrics-addr, or leave it empty to serve no metrics)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	logger.Info("metrics served", "metrics_url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("the metrics listener failed", "addr", addr, "err", err)
		}
	}, nil
}
