package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memstore/memstore/internal/storage"
)

// metrics are the server's Prometheus series, in the registry of its app
// (each app has its own: two in one process, as in tests, never share or
// clash over counters).
type metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	streamsOpen     prometheus.Gauge
	claims          *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, store storage.Store) *metrics {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_http_requests_total",
			Help: "API requests answered, by route pattern (never a raw id) and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memstore_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route pattern (long polls and event streams included: they wait by design).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		streamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memstore_event_streams_open",
			Help: "Session event streams (Server-Sent Events) open now.",
		}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_work_claims_total",
			Help: "Work items claimed by a poll, by environment.",
		}, []string{"environment_id"}),
	}
	m.reg.MustRegister(m.requests, m.requestDuration, m.streamsOpen, m.claims,
		queueDepth{store: store},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Metrics gathers the server's metrics and its app's, for a process that
// serves them together with others of its own (`memstore up`: the
// worker's too).
func (s *Server) Metrics() prometheus.Gatherer {
	return s.metrics.reg
}

// MetricsHandler serves the server's metrics in Prometheus's text format.
// It carries no credential check: serve it on a listener of its own
// (`serve --metrics-addr`) that only the monitoring system reaches.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.Metrics(), promhttp.HandlerOpts{})
}

// observe counts a finished request under its route pattern.
func (m *metrics) observe(route string, status int, took time.Duration) {
	if route == "" {
		route = "unrouted" // refused before routing (the in-flight limits)
	}
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends a 200
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(route).Observe(took.Seconds())
}

// queueDepthTimeout bounds the database read of one scrape.
const queueDepthTimeout = 5 * time.Second

// queueDepth reads every environment's queue from the database at scrape
// time, in one query, so the figure is the database's (every replica's),
// not what this process happened to see.
type queueDepth struct{ store storage.QueueGauges }

var (
	queueDepthDesc = prometheus.NewDesc("memstore_work_queue_depth",
		"Work items queued in an environment (the work stats' depth), read from the database at scrape time.", []string{"environment_id"}, nil)
	queuePendingDesc = prometheus.NewDesc("memstore_work_queue_pending",
		"Work items of an environment claimed but not yet acknowledged (the work stats' pending), read from the database at scrape time.", []string{"environment_id"}, nil)
)

func (q queueDepth) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queuePendingDesc
}

// Collect reports the open environments' queues. A failed read leaves the
// series out of this scrape (Prometheus then shows the gap) rather than
// reporting a zero that would read as an empty queue.
func (q queueDepth) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), queueDepthTimeout)
	defer cancel()
	queues, err := q.store.QueueDepths(ctx)
	if err != nil {
		return
	}
	for _, e := range queues {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(e.Depth), e.EnvironmentID)
		ch <- prometheus.MustNewConstMetric(queuePendingDesc, prometheus.GaugeValue, float64(e.Pending), e.EnvironmentID)
	}
}
