// Package dispatcher sends the webhook deliveries the backends stored in
// their outbox: it leases what package webhooks says is due, signs each
// body the Standard Webhooks way (webhook-id, webhook-timestamp,
// webhook-signature, as the official SDK's Unwrap verifies), posts it, and
// records the attempt, from which the retry policy decides what becomes of
// the delivery.
package dispatcher

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// Config configures a Dispatcher. Zero values take the defaults.
type Config struct {
	Store  storage.Webhooks
	Logger *slog.Logger
	// Now is the clock of due times, leases and signatures; nil is time.Now.
	Now    func() time.Time
	Policy webhooks.Policy
	// Egress is where deliveries may connect; the zero value allows only
	// globally reachable addresses over HTTPS.
	Egress egress.Policy
	// Timeout bounds one attempt (default 10 s); a receiver that takes
	// longer has failed it.
	Timeout time.Duration
	// Batch is how many deliveries one round sends at once (default 16).
	Batch int
	// Metrics, when set, is where the dispatcher registers its Prometheus
	// series (memstore_webhook_attempts_total, …_attempt_duration_seconds).
	Metrics prometheus.Registerer
}

// Dispatcher sends due deliveries. Several may run against one database:
// the store's claim keeps them from sending a delivery twice.
type Dispatcher struct {
	cfg    Config
	client *http.Client
	// attempts counts attempts by result; latency times them.
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
}

// New builds a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 16
	}
	cfg.Policy = cfg.Policy.WithDefaults()
	dialer := cfg.Egress.Dialer(cfg.Timeout)
	transport := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: cfg.Timeout, MaxIdleConnsPerHost: 4}
	d := &Dispatcher{
		cfg: cfg,
		// Redirects are not followed: the signed request goes to the URL
		// the endpoint names, nowhere else.
		client: &http.Client{Transport: transport, Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memstore_webhook_attempts_total",
			Help: "Webhook delivery attempts, by result: accepted (2xx), refused (any other status) or unreachable (no answer; the log says why).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memstore_webhook_attempt_duration_seconds",
			Help:    "Time from sending a webhook delivery to its receiver's answer.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(d.attempts, d.latency)
	}
	return d
}

// pruneEvery is how often Run prunes the settled deliveries past
// Policy.KeepFor.
const pruneEvery = time.Hour

// Run sends deliveries until ctx ends, looking for due ones every interval
// and as soon as a change made through its store stores some, and prunes
// old settled ones every hour.
func (d *Dispatcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var pruned time.Time
	for {
		// Asked before the round: deliveries stored while it runs wake
		// the next one.
		stored := d.cfg.Store.DeliveriesStored()
		if now := d.cfg.Now(); now.Sub(pruned) >= pruneEvery {
			pruned = now
			n, err := d.cfg.Store.PruneWebhookDeliveries(ctx, now.Add(-d.cfg.Policy.KeepFor))
			switch {
			case err != nil && ctx.Err() == nil:
				d.cfg.Logger.Warn("webhook dispatcher: pruning old deliveries failed; retrying in an hour", "err", err)
			case n > 0:
				d.cfg.Logger.Info("webhook dispatcher: pruned settled deliveries", "deliveries", n, "older_than", d.cfg.Policy.KeepFor)
			}
		}
		for {
			n, err := d.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("webhook dispatcher: claiming deliveries failed; retrying at the next tick", "err", err)
			}
			if n < d.cfg.Batch || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-stored:
		}
	}
}

// RunOnce claims the deliveries due now and sends them, returning how many
// it attempted. Each delivery is handled on its own: one whose endpoint
// cannot be read is given back unattempted, due again at the next round,
// while the others go out.
func (d *Dispatcher) RunOnce(ctx context.Context) (int, error) {
	token := newToken()
	ds, err := d.cfg.Store.ClaimDeliveries(ctx, d.cfg.Now().UTC(), d.cfg.Batch, token, d.cfg.Policy)
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	endpoints := map[string]*webhooks.Endpoint{}
	for _, del := range ds {
		if _, ok := endpoints[del.EndpointID]; ok {
			continue
		}
		e, err := d.cfg.Store.GetWebhookEndpoint(ctx, del.EndpointID)
		if err != nil {
			if !errors.Is(err, storage.ErrNotFound) { // deleted, with its deliveries
				d.cfg.Logger.Warn("webhook dispatcher: reading an endpoint failed; its deliveries are given back and tried again at the next round",
					"webhook_endpoint_id", del.EndpointID, "err", err)
			}
			endpoints[del.EndpointID] = nil
			continue
		}
		endpoints[del.EndpointID] = &e
	}
	results := make([]webhooks.Result, len(ds))
	attempted := 0
	var wg sync.WaitGroup
	for i, del := range ds {
		results[i].Seq = del.Seq
		e := endpoints[del.EndpointID]
		if e == nil {
			continue
		}
		attempted++
		wg.Go(func() {
			a := d.send(ctx, *e, del)
			if !a.Accepted() {
				d.cfg.Logger.Warn("webhook delivery failed; it will be retried with backoff", "webhook_endpoint_id", del.EndpointID, "webhook_id", del.EventID,
					"event_type", del.EventType, "attempt", del.Attempts+1, "outcome", webhooks.Outcome(a), "url", e.URL)
			}
			results[i].Attempt = &a
			d.observe(a)
		})
	}
	wg.Wait()
	// One transaction records the round: one commit, not one per delivery.
	if err := d.cfg.Store.FinishDeliveries(context.WithoutCancel(ctx), token, results, d.cfg.Policy); err != nil {
		return attempted, fmt.Errorf("record the attempts of %d webhook deliveries (they are sent again when their leases lapse): %w", len(ds), err)
	}
	return attempted, nil
}

// observe counts an attempt.
func (d *Dispatcher) observe(a webhooks.Attempt) {
	switch {
	case a.Accepted():
		d.attempts.WithLabelValues("accepted").Inc()
	case a.StatusCode != 0:
		d.attempts.WithLabelValues("refused").Inc()
	default:
		d.attempts.WithLabelValues("unreachable").Inc()
		return
	}
	d.latency.Observe(float64(a.LatencyMS) / 1000)
}

// excerptBytes bounds the response body kept with an attempt.
const excerptBytes = 512

// send makes one attempt of del to e.
func (d *Dispatcher) send(ctx context.Context, e webhooks.Endpoint, del webhooks.Delivery) webhooks.Attempt {
	now := d.cfg.Now().UTC()
	a := webhooks.Attempt{AttemptedAt: now}
	req, err := Sign(ctx, e.URL, e.Secret, del.EventID, now, del.Payload)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	a.LatencyMS = time.Since(start).Milliseconds()
	if err != nil {
		a.Error = err.Error()
		return a
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
	for !utf8.Valid(body) && len(body) > 0 {
		body = body[:len(body)-1]
	}
	a.StatusCode, a.ResponseExcerpt = resp.StatusCode, string(body)
	return a
}

// Sign builds the POST of payload to url, signed with secret (whsec_…) the
// Standard Webhooks way for message msgID at t.
func Sign(ctx context.Context, url, secret, msgID string, t time.Time, payload []byte) (*http.Request, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("signing secret unusable: %w", err)
	}
	sig, err := wh.Sign(msgID, t, payload)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", "memstore-webhooks")
	req.Header.Set(standardwebhooks.HeaderWebhookID, msgID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(t.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return req, nil
}

// NewSecret makes a signing secret: whsec_ and 32 random bytes in base64.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func newToken() string {
	b := make([]byte, 12)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
