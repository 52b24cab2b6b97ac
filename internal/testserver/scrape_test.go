package testserver

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Scrape reads the text format with Prometheus's own parser: a label
// value holding commas, quotes, braces, spaces, a backslash or a newline
// comes back whole, and every kind of sample has its series.
func TestScrapeReadsEveryLabelValueWhole(t *testing.T) {
	reg := prometheus.NewRegistry()
	routes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "h"}, []string{"code", "route"})
	odd := `GET /v1/a, "b" {c} d\e` + "\nf"
	routes.WithLabelValues("200", odd).Add(3)
	routes.WithLabelValues("404", "plain").Inc()
	depth := prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth", Help: "h"})
	depth.Set(2.5)
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency_seconds", Help: "h", Buckets: []float64{0.1, 1}})
	latency.Observe(0.05)
	latency.Observe(5)
	reg.MustRegister(routes, depth, latency)

	got := Scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	want := map[string]float64{
		`requests_total{code="200",route="GET /v1/a, \"b\" {c} d\\e\nf"}`: 3,
		`requests_total{code="404",route="plain"}`:                        1,
		`depth`:                             2.5,
		`latency_seconds_bucket{le="0.1"}`:  1,
		`latency_seconds_bucket{le="1"}`:    1,
		`latency_seconds_bucket{le="+Inf"}`: 2,
		`latency_seconds_sum`:               5.05,
		`latency_seconds_count`:             2,
	}
	if !maps.Equal(got, want) {
		t.Errorf("Scrape =\n%v\nwant\n%v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
	}
}

// A sample written with a timestamp (which other exporters add) is read
// by its value, not its timestamp.
func TestScrapeReadsASampleWithATimestamp(t *testing.T) {
	text := "# HELP up whether it is up, \"really\"\n# TYPE up gauge\nup{job=\"a b\"} 1 1700000000000\n"
	got := Scrape(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, text) }))
	if want := map[string]float64{`up{job="a b"}`: 1}; !maps.Equal(got, want) {
		t.Errorf("Scrape = %v, want %v", got, want)
	}
}
