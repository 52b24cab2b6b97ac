// Package testserver starts memstore's real server for the tests of the
// packages that talk to it (client, memsync, worker): the real handler on
// httptest, a real SQLite file in the test's temporary folder, and an
// admin API key bootstrapped as an operator's would be. It is a package of
// its own, not a copy in each test harness, so that a change to how a
// server is assembled reaches every such test at once.
package testserver

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"go.opentelemetry.io/otel/trace"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/console"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// DefaultAdminKey is the admin API key of a server started without one.
const DefaultAdminKey = "sk-memstore-test-admin"

// Options configure Start. The zero value is a server on the real clock
// that mounts sessions' stores under /mnt/memory.
type Options struct {
	// Now is the clock of the server and of its database; nil is time.Now.
	Now func() time.Time
	// MountPrefix is the server's --mount-prefix; "" is /mnt/memory.
	MountPrefix string
	// StreamKeepalive is how often an idle event stream sends a comment;
	// 0 is the server's default.
	StreamKeepalive time.Duration
	// AdminKey is the admin API key; "" is DefaultAdminKey.
	AdminKey string
	// Model is the upstream of agents with a real model (internal/modeltest
	// serves one); the zero value has no key.
	Model agent.ClaudeConfig
	// Console serves the web console at /console/, as serve and up do.
	Console bool
	// Webhooks, when set, configures webhook delivery and runs the
	// dispatcher for the whole test, as serve does.
	Webhooks *app.WebhooksConfig
	// WebhookInterval is how often that dispatcher looks for due
	// deliveries besides when a change stores some; 0 is 50 ms.
	WebhookInterval time.Duration
	// Configure, when set, changes the app's configuration before the
	// server starts: a limit, or a layer around the store to watch what is
	// asked of it (the API and the console both use it).
	Configure func(*app.Config)
	// TracerProvider, when set, records the server's request spans.
	TracerProvider trace.TracerProvider
	// PruneInterval, when set, runs the version pruner that often for the
	// whole test, as serve does every --prune-interval.
	PruneInterval time.Duration
}

// Server is a running memstore server, closed when the test ends.
type Server struct {
	// URL is the base URL, also the api_base_url of its work secrets.
	URL      string
	AdminKey string
	// Store is the server's database, for tests that set up what has no
	// API (console users).
	Store storage.Store
	// Metrics is the server's /metrics handler (serve --metrics-addr).
	Metrics http.Handler
	wrap    atomic.Pointer[func(http.Handler) http.Handler]
}

// Start starts a server for t.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{Now: o.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{AdminKey: o.AdminKey, Store: db}
	if s.AdminKey == "" {
		s.AdminKey = DefaultAdminKey
	}
	var h http.Handler
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap := s.wrap.Load(); wrap != nil {
			(*wrap)(h).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = "http://" + hs.Listener.Addr().String()
	cfg := app.Config{Store: db, Logger: slog.New(slog.DiscardHandler), Now: o.Now, Model: o.Model}
	if o.Webhooks != nil {
		cfg.Webhooks = *o.Webhooks
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	a := app.New(cfg)
	srv := server.New(server.Config{App: a, PublicBaseURL: s.URL, MountPrefix: o.MountPrefix, StreamKeepalive: o.StreamKeepalive, TracerProvider: o.TracerProvider})
	stopPruner := func() {}
	if o.PruneInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			a.RunRetention(ctx, o.PruneInterval)
			close(done)
		}()
		stopPruner = func() { cancel(); <-done }
	}
	stopWebhooks := func() {}
	if o.Webhooks != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			a.RunWebhooks(ctx, cmp.Or(o.WebhookInterval, 50*time.Millisecond))
			close(done)
		}()
		stopWebhooks = func() { cancel(); <-done }
	}
	var con http.Handler
	if o.Console {
		c, err := console.New(console.Config{App: a, Now: o.Now, Closing: srv.Closing(), MountPrefix: o.MountPrefix})
		if err != nil {
			t.Fatal(err)
		}
		con = c.Handler()
	}
	h = srv.HandlerWithConsole(con)
	s.Metrics = srv.MetricsHandler()
	if _, _, err := a.Credentials.BootstrapAdminKey(ctx, s.AdminKey); err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		stopWebhooks()
		stopPruner()
		a.Close()
		db.Close()
	})
	return s
}

// Wrap puts mw in front of the real handler for the requests that follow,
// to cut streams or lose responses on purpose; nil takes it away.
func (s *Server) Wrap(mw func(http.Handler) http.Handler) {
	if mw == nil {
		s.wrap.Store(nil)
		return
	}
	s.wrap.Store(&mw)
}

// Client is a client of s with opts (no credential unless opts give one)
// whose retries do not sleep, so that a test of a retried failure does not
// wait out real backoffs.
func (s *Server) Client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	policy := client.DefaultRetryPolicy
	policy.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	c, err := client.New(s.URL, append([]client.Option{client.WithRetryPolicy(policy)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Admin is a client of s with its admin API key.
func (s *Server) Admin(t testing.TB) *client.Client {
	t.Helper()
	return s.Client(t, client.WithAPIKey(s.AdminKey))
}

// WithoutExtensions is middleware (for Wrap) that makes the server look
// like Anthropic's API: memstore's own endpoints (SPEC §8: the change
// feed and the snapshot; the recoveries) answer 404 as unknown routes do there, and
// no response advertises them, so a worker must fall back to the hosted
// API's protocol.
func WithoutExtensions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/memory_stores/") && (strings.HasSuffix(r.URL.Path, "/changes") || strings.HasSuffix(r.URL.Path, "/snapshot")) ||
			strings.HasPrefix(r.URL.Path, "/v1/environments/") && strings.HasSuffix(r.URL.Path, "/recoveries") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`))
			return
		}
		h.ServeHTTP(hideExtensions{w}, r)
	})
}

// hideExtensions drops the extensions header from a response.
type hideExtensions struct{ http.ResponseWriter }

func (w hideExtensions) WriteHeader(code int) {
	w.Header().Del(api.ExtensionsHeader)
	w.ResponseWriter.WriteHeader(code)
}

func (w hideExtensions) Write(b []byte) (int, error) {
	w.Header().Del(api.ExtensionsHeader)
	return w.ResponseWriter.Write(b)
}

func (w hideExtensions) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Scrape GETs /metrics from h over a real HTTP server, reads it with the
// Prometheus text parser, and returns each sample by its series, written
// as the format writes it: name{label="value",...}, and for a histogram
// name_bucket{...,le="..."}, name_sum and name_count (a summary's
// quantiles likewise). Label values come back whole whatever they hold
// (commas, quotes, spaces, braces), escaped as the format escapes them.
func Scrape(t testing.TB, h http.Handler) map[string]float64 {
	t.Helper()
	hs := httptest.NewServer(h)
	defer hs.Close()
	res, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("GET /metrics is not the Prometheus text format: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := m.GetLabel()
			switch {
			case m.Counter != nil:
				out[series(name, labels)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[series(name, labels)] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				out[series(name, labels)] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				hg := m.GetHistogram()
				for _, b := range hg.GetBucket() {
					out[series(name+"_bucket", labels, "le", sampleFloat(b.GetUpperBound()))] = float64(b.GetCumulativeCount())
				}
				out[series(name+"_sum", labels)] = hg.GetSampleSum()
				out[series(name+"_count", labels)] = float64(hg.GetSampleCount())
			case m.Summary != nil:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					out[series(name, labels, "quantile", sampleFloat(q.GetQuantile()))] = q.GetValue()
				}
				out[series(name+"_sum", labels)] = sm.GetSampleSum()
				out[series(name+"_count", labels)] = float64(sm.GetSampleCount())
			}
		}
	}
	return out
}

// labelEscaper escapes a label value as the text format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// series writes a sample's series as the text format does: the name, then
// the labels in their order, then extra (a name and a value: le, quantile).
func series(name string, labels []*dto.LabelPair, extra ...string) string {
	var pairs []string
	for _, l := range labels {
		pairs = append(pairs, l.GetName()+`="`+labelEscaper.Replace(l.GetValue())+`"`)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		pairs = append(pairs, extra[i]+`="`+extra[i+1]+`"`)
	}
	if len(pairs) == 0 {
		return name
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// sampleFloat writes a bucket bound or a quantile as the format does.
func sampleFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Workers is what a worker needs on a server: an environment, a key for
// it, and an agent for its sessions.
type Workers struct {
	Env   *api.Environment
	Key   string
	Agent *api.Agent
}

// ScriptedAgent asks for an agent that runs the script each user.message
// carries (api.ScriptedModel): no model, no network.
func ScriptedAgent() api.CreateAgentRequest {
	return api.CreateAgentRequest{Name: "scripted", Model: api.ModelConfig{ID: api.ScriptedModel}}
}

// NewWorkers creates, through admin, an environment with a key and the
// agent agent asks for.
func NewWorkers(t testing.TB, admin *client.Client, agent api.CreateAgentRequest) Workers {
	t.Helper()
	ctx := context.Background()
	env, err := admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "test worker"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := admin.CreateAgent(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	return Workers{Env: env, Key: key.Key, Agent: a}
}
