package worker

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/memsync"
)

// metrics are the worker's Prometheus series. Without Config.Metrics they
// are kept but registered nowhere, so the code that counts never asks
// whether anyone listens.
type metrics struct {
	items           *prometheus.CounterVec
	itemsActive     prometheus.Gauge
	itemsLimit      prometheus.Gauge
	toolCalls       *prometheus.CounterVec
	syncs           *prometheus.CounterVec
	syncDuration    *prometheus.HistogramVec
	syncChanges     *prometheus.CounterVec
	syncConflicts   prometheus.Counter
	syncBytes       *prometheus.CounterVec
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	mountDuration   prometheus.Histogram
	leftovers       leftoverMetrics
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_items_total",
			Help: "Work items served to the end, by result (ok, or failed: the worker's log says why).",
		}, []string{"result"}),
		itemsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memstore_worker_items_active",
			Help: "Work items (sessions) being served now.",
		}),
		itemsLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memstore_worker_items_limit",
			Help: "Work items (sessions) the worker serves at once at most (--max-sessions); claims pause while items_active is at it.",
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_tool_calls_total",
			Help: "Tool calls run for agents, by tool and whether the result was an error.",
		}, []string{"tool", "is_error"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_syncs_total",
			Help: "Memory store sync steps run, by step (mount, sync, write, final, flush); one per store.",
		}, []string{"step"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memstore_worker_sync_duration_seconds",
			Help:    "Time one sync step took for one store, by step.",
			Buckets: prometheus.DefBuckets,
		}, []string{"step"}),
		syncChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_sync_changes_total",
			Help: "Changes the syncs made (files written or removed, memories created, updated or deleted), by result: done or failed (each failure is logged; the next sync retries).",
		}, []string{"result"}),
		syncConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memstore_worker_sync_conflicts_total",
			Help: "Local edits the server won because another writer changed the memory too: the server's version is written to the folder and the edit kept aside (see the worker's log).",
		}),
		syncBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_sync_bytes_total",
			Help: "Memory content moved by the syncs, by direction (up: uploaded, down: written into the folders).",
		}, []string{"direction"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_worker_requests_total",
			Help: "HTTP requests the worker sent to the API (polls, heartbeats, streams, tool results, syncs), by method and status code.",
		}, []string{"method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memstore_worker_request_duration_seconds",
			Help:    "Time to the response headers of the worker's API requests, by method (polls wait up to a second by design).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method"}),
		mountDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memstore_worker_mount_duration_seconds",
			Help:    "Time to mount a session's memory stores (all of them, downloads included) before its agent runs.",
			Buckets: prometheus.DefBuckets,
		}),
		leftovers: newLeftoverMetrics(),
	}
	if reg != nil {
		reg.MustRegister(m.items, m.itemsActive, m.itemsLimit, m.toolCalls, m.syncs, m.syncDuration, m.syncChanges, m.syncConflicts,
			m.syncBytes, m.requests, m.requestDuration, m.mountDuration, m.leftovers.folders, m.leftovers.files,
			m.leftovers.recovered, m.leftovers.recoveredFiles)
	}
	return m
}

// instrument returns c with its requests counted and timed.
func (m *metrics) instrument(c *client.Client) *client.Client {
	hc := *c.HTTPClient()
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = promhttp.InstrumentRoundTripperCounter(m.requests, promhttp.InstrumentRoundTripperDuration(m.requestDuration, base))
	return c.With(client.WithHTTPClient(&hc))
}

// synced counts one memsync step (memsync.SessionConfig.OnSync).
func (m *metrics) synced(r memsync.SyncReport) {
	m.syncs.WithLabelValues(r.Step).Inc()
	m.syncDuration.WithLabelValues(r.Step).Observe(r.Duration.Seconds())
	m.syncChanges.WithLabelValues("done").Add(float64(r.Changes))
	m.syncChanges.WithLabelValues("failed").Add(float64(r.Failed))
	m.syncConflicts.Add(float64(r.Conflicts))
	m.syncBytes.WithLabelValues("up").Add(float64(r.BytesUploaded))
	m.syncBytes.WithLabelValues("down").Add(float64(r.BytesDownloaded))
}

// toolCalled counts one tool call. A name the toolset does not know (the
// agent's to choose) counts as "other", so it cannot grow the series.
func (m *metrics) toolCalled(name string, isError bool) {
	if !api.IsAgentTool(name) {
		name = "other"
	}
	m.toolCalls.WithLabelValues(name, strconv.FormatBool(isError)).Inc()
}

// itemDone counts an item served to the end.
func (m *metrics) itemDone(err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.items.WithLabelValues(result).Inc()
}
