package loadgen

import (
	"context"
	"errors"
	"math"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
)

// Report is what a run measured: one line per operation, in the order of
// the names in Operations, plus the totals. It is what `memstore bench
// --output json` prints, so its field names are a contract with scripts.
type Report struct {
	BaseURL     string  `json:"base_url"`
	Concurrency int     `json:"concurrency"`
	TargetRate  float64 `json:"target_rate"` // requests per second asked for; 0 is flat out
	// Elapsed is the measured phase only (not the seed, not the cleanup).
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Requests       int64   `json:"requests"`
	Errors         int64   `json:"errors"`
	// StoppedBy says which bound ended the run: "duration", "requests" or
	// "interrupted".
	StoppedBy  string      `json:"stopped_by"`
	Seed       *Shape      `json:"seed,omitempty"`
	StoreIDs   []string    `json:"memory_store_ids"`
	Operations []Operation `json:"operations"`
}

// Operation is one operation's line of the report. Latencies are of the
// successful requests; failures count only in ErrorsByStatus.
type Operation struct {
	Name      string  `json:"operation"`
	Count     int64   `json:"count"`
	Errors    int64   `json:"errors"`
	PerSecond float64 `json:"per_second"`
	P50MS     float64 `json:"p50_ms"`
	P95MS     float64 `json:"p95_ms"`
	P99MS     float64 `json:"p99_ms"`
	MaxMS     float64 `json:"max_ms"`
	// ErrorsByStatus counts the failures by HTTP status ("409"), or by
	// "transport" when no answer came back.
	ErrorsByStatus map[string]int64 `json:"errors_by_status,omitempty"`
}

// recorder collects one goroutine's samples, so that recording takes no
// lock; the run merges them when it ends.
type recorder struct {
	ok   map[string][]time.Duration
	errs map[string]map[string]int64
}

func newRecorder() *recorder {
	return &recorder{ok: map[string][]time.Duration{}, errs: map[string]map[string]int64{}}
}

func (r *recorder) record(op string, d time.Duration, err error) {
	if err == nil {
		r.ok[op] = append(r.ok[op], d)
		return
	}
	m := r.errs[op]
	if m == nil {
		m = map[string]int64{}
		r.errs[op] = m
	}
	m[statusOf(err)]++
}

// statusOf names a failure for the errors-by-status column.
func statusOf(err error) string {
	var ae *api.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ae) && ae.StatusCode != 0:
		return strconv.Itoa(ae.StatusCode)
	case errors.Is(err, errNoWork):
		return "no_work"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ue):
		return "transport"
	}
	return "other"
}

// merge folds the recorders into the report's operation lines, for the
// names in order; an operation with no request at all still gets its line,
// so a reader sees that it was asked for and never ran.
func merge(names []string, recs []*recorder, elapsed time.Duration) []Operation {
	out := make([]Operation, 0, len(names))
	for _, name := range names {
		var all []time.Duration
		byStatus := map[string]int64{}
		var errs int64
		for _, r := range recs {
			all = append(all, r.ok[name]...)
			for s, n := range r.errs[name] {
				byStatus[s] += n
				errs += n
			}
		}
		slices.Sort(all)
		op := Operation{Name: name, Count: int64(len(all)), Errors: errs,
			P50MS: quantileMS(all, 0.50), P95MS: quantileMS(all, 0.95), P99MS: quantileMS(all, 0.99)}
		if len(all) > 0 {
			op.MaxMS = ms(all[len(all)-1])
		}
		if elapsed > 0 {
			op.PerSecond = round(float64(op.Count)/elapsed.Seconds(), 1)
		}
		if errs > 0 {
			op.ErrorsByStatus = byStatus
		}
		out = append(out, op)
	}
	return out
}

// quantileMS is the nearest-rank quantile q of sorted, in milliseconds.
func quantileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return ms(sorted[max(i, 0)])
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}
