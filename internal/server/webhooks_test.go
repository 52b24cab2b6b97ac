package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/server"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlite"
	"github.com/memstore/memstore/internal/testclock"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/webhooks/dispatcher"
)

// hookEnv is a real server (SQLite file, httptest) with the official SDK
// pointed at it, and a receiver that records every delivery and answers
// with status.
type hookEnv struct {
	t      *testing.T
	app    *app.App
	srv    *server.Server
	db     *sqlite.DB
	url    string
	apiKey string
	sdk    anthropic.Client
	// clock starts at the real time: the SDK's Unwrap checks a
	// delivery's timestamp against the real clock.
	clock *testclock.Clock

	recv     *httptest.Server
	mu       sync.Mutex
	status   int
	received []*http.Request
	bodies   [][]byte
	answered []int
}

// newHookEnv starts a hookEnv; wrap, when given, is put around the store
// the server uses, to watch what it is asked.
func newHookEnv(t *testing.T, allowPrivate bool, policy webhooks.Policy, wrap ...func(storage.Store) storage.Store) *hookEnv {
	t.Helper()
	e := &hookEnv{t: t, clock: testclock.New(time.Now().UTC()), status: http.StatusNoContent}
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memstore.db"), sqlite.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	var store storage.Store = db
	for _, w := range wrap {
		store = w(store)
	}
	e.app = app.New(app.Config{Store: store, Logger: slog.New(slog.DiscardHandler), Now: e.clock.Now,
		Webhooks: app.WebhooksConfig{AllowPrivate: allowPrivate, Policy: policy}})
	e.srv = server.New(server.Config{App: e.app})
	hs := httptest.NewServer(e.srv.Handler())
	e.recv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.received = append(e.received, r)
		e.bodies = append(e.bodies, body)
		e.answered = append(e.answered, e.status)
		w.WriteHeader(e.status)
		io.WriteString(w, "receiver says hello")
	}))
	t.Cleanup(func() {
		e.recv.Close()
		hs.Close()
		e.app.Close()
		db.Close()
	})
	key, _, err := e.app.Credentials.BootstrapAdminKey(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	e.url, e.apiKey = hs.URL, key
	e.sdk = anthropic.NewClient(option.WithBaseURL(hs.URL), option.WithAPIKey(key), option.WithMaxRetries(0))
	return e
}

func (e *hookEnv) setStatus(code int) { e.mu.Lock(); e.status = code; e.mu.Unlock() }

// deliver runs the dispatcher once, as its loop would.
func (e *hookEnv) deliver() int {
	e.t.Helper()
	n, err := e.app.DeliverWebhooks(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// raw sends one request with the admin key and returns status and body.
func (e *hookEnv) raw(method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("x-api-key", e.apiKey)
	req.Header.Set("content-type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (e *hookEnv) createEndpoint(types ...string) *anthropic.BetaNewOrganizationWebhookEndpoint {
	e.t.Helper()
	ep, err := e.sdk.Beta.Organization.Webhooks.New(context.Background(), anthropic.BetaOrganizationWebhookNewParams{
		URL: e.recv.URL + "/hook", EnabledEvents: types, Name: anthropic.String("test receiver")})
	if err != nil {
		e.t.Fatal(err)
	}
	return ep
}

func (e *hookEnv) environment(name string) string {
	e.t.Helper()
	env, err := e.sdk.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return env.ID
}

func TestWebhookEndpointsThroughTheSDK(t *testing.T) {
	e := newHookEnv(t, true, webhooks.Policy{})
	ctx := context.Background()
	hooks := e.sdk.Beta.Organization.Webhooks
	made := e.createEndpoint(webhooks.SessionStatusRunStarted)
	if !strings.HasPrefix(made.SigningSecret, "whsec_") || made.State != "enabled" || made.Name != "test receiver" {
		t.Fatalf("created = %+v", made)
	}
	got, err := hooks.Get(ctx, made.ID, anthropic.BetaOrganizationWebhookGetParams{})
	if err != nil || got.URL != made.URL || strings.Contains(got.RawJSON(), "signing_secret") {
		t.Fatalf("get = %s, %v (the secret is shown only when made)", got.RawJSON(), err)
	}
	up, err := hooks.Update(ctx, made.ID, anthropic.BetaOrganizationWebhookUpdateParams{
		State: anthropic.BetaOrganizationWebhookUpdateParamsStateDisabled, EnabledEvents: []string{webhooks.SessionCreated, webhooks.SessionDeleted}})
	if err != nil || up.State != "disabled" || !slices.Equal(up.EnabledEvents, []string{webhooks.SessionCreated, webhooks.SessionDeleted}) {
		t.Fatalf("update = %+v, %v", up, err)
	}
	second := e.createEndpoint(webhooks.AgentCreated)
	page, err := hooks.List(ctx, anthropic.BetaOrganizationWebhookListParams{Limit: anthropic.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != second.ID || !page.HasMore {
		t.Fatalf("list = %s, %v", page.RawJSON(), err)
	}
	next, err := page.GetNextPage()
	if err != nil || next == nil || len(next.Data) != 1 || next.Data[0].ID != made.ID {
		t.Fatalf("next page = %+v, %v", next, err)
	}
	sec, err := hooks.RegenerateSigningSecret(ctx, made.ID, anthropic.BetaOrganizationWebhookRegenerateSigningSecretParams{})
	if err != nil || !strings.HasPrefix(sec.SigningSecret, "whsec_") || sec.SigningSecret == made.SigningSecret {
		t.Fatalf("regenerate = %+v, %v", sec, err)
	}
	del, err := hooks.Delete(ctx, made.ID, anthropic.BetaOrganizationWebhookDeleteParams{})
	if err != nil || del.ID != made.ID || string(del.Type) != "webhook_endpoint_deleted" {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	if _, err := hooks.Get(ctx, made.ID, anthropic.BetaOrganizationWebhookGetParams{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get deleted = %v", err)
	}
}

// TestWebhookDeliveryPassesSDKUnwrap: a delivery verifies with the
// endpoint's secret in the official SDK's Unwrap; a tampered body, an old
// timestamp and a wrong secret do not.
func TestWebhookDeliveryPassesSDKUnwrap(t *testing.T) {
	e := newHookEnv(t, true, webhooks.Policy{})
	ep := e.createEndpoint(webhooks.EnvironmentCreated)
	envID := e.environment("hooked")
	if n := e.deliver(); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	req, body := e.received[0], e.bodies[0]
	unwrap := e.sdk.Beta.Webhooks.Unwrap
	ev, err := unwrap(body, req.Header, option.WithWebhookKey(ep.SigningSecret))
	if err != nil {
		t.Fatalf("Unwrap refused memstore's delivery: %v", err)
	}
	if ev.Data.Type != webhooks.EnvironmentCreated || ev.Data.ID != envID || ev.ID != req.Header.Get("webhook-id") || string(ev.Type) != "event" {
		t.Fatalf("event = %s", ev.RawJSON())
	}
	if _, ok := ev.Data.AsAny().(anthropic.BetaWebhookEnvironmentCreatedEventData); !ok {
		t.Fatalf("the SDK does not see an environment.created: %T", ev.Data.AsAny())
	}
	tampered := bytes.Replace(body, []byte(envID), []byte("env_someoneelse"), 1)
	if _, err := unwrap(tampered, req.Header, option.WithWebhookKey(ep.SigningSecret)); err == nil {
		t.Fatal("a tampered body passed Unwrap")
	}
	other := dispatcher.NewSecret()
	if _, err := unwrap(body, req.Header, option.WithWebhookKey(other)); err == nil {
		t.Fatal("a wrong secret passed Unwrap")
	}
	old, err := dispatcher.Sign(context.Background(), e.recv.URL, ep.SigningSecret, ev.ID, time.Now().Add(-10*time.Minute), body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unwrap(body, old.Header, option.WithWebhookKey(ep.SigningSecret)); err == nil {
		t.Fatal("a delivery signed ten minutes ago passed Unwrap")
	}
}

// TestWebhookRefusalsStoreNothing: each refused endpoint leaves no endpoint
// behind.
func TestWebhookRefusalsStoreNothing(t *testing.T) {
	e := newHookEnv(t, false, webhooks.Policy{})
	for _, c := range []struct{ url, events, want string }{
		{e.recv.URL, webhooks.SessionCreated, "plain HTTP"},
		{"https://127.0.0.1:8443/hook", webhooks.SessionCreated, "loopback"},
		{"https://[::1]/hook", webhooks.SessionCreated, "loopback"},
		{"https://169.254.169.254/latest", webhooks.SessionCreated, "link-local"},
		{"https://10.1.2.3/hook", webhooks.SessionCreated, "private"},
		{"https://localhost/hook", webhooks.SessionCreated, "loopback"},
		{"https://93.184.215.14/hook", "vault.created", "valid types: agent.archived"},
		{"https://93.184.215.14/hook", "", "valid types: agent.archived"},
	} {
		events := []string{c.events}
		if c.events == "" {
			events = []string{}
		}
		status, body := e.raw("POST", "/v1/organizations/webhooks", map[string]any{"url": c.url, "enabled_events": events})
		if status != 400 || !strings.Contains(string(body), "invalid_request_error") || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %v: %d %s; want 400 invalid_request_error saying %q", c.url, events, status, body, c.want)
		}
	}
	list, err := e.db.ListWebhookEndpoints(context.Background(), storage.ListQuery{})
	if err != nil || len(list) != 0 {
		t.Fatalf("refusals stored endpoints: %+v, %v", list, err)
	}
	// The operator's flag accepts the loopback receiver over plain HTTP.
	allowed := newHookEnv(t, true, webhooks.Policy{})
	allowed.createEndpoint(webhooks.SessionCreated)

	// A refused update changes nothing.
	made, err := e.db.ListWebhookEndpoints(context.Background(), storage.ListQuery{})
	if err != nil || len(made) != 0 {
		t.Fatal(made, err)
	}
	status, body := e.raw("POST", "/v1/organizations/webhooks", map[string]any{"url": "https://93.184.215.14/hook", "enabled_events": []string{webhooks.SessionCreated}})
	var ep api.NewWebhookEndpoint
	if status != 200 || json.Unmarshal(body, &ep) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	for _, patch := range []map[string]any{
		{"url": "https://10.0.0.1/hook", "name": "renamed"},
		{"enabled_events": []string{"nope"}, "name": "renamed"},
		{"state": "paused", "name": "renamed"},
	} {
		if status, body := e.raw("POST", "/v1/organizations/webhooks/"+ep.ID, patch); status != 400 || !strings.Contains(string(body), "invalid_request_error") {
			t.Errorf("update %v: %d %s", patch, status, body)
		}
	}
	got, err := e.db.GetWebhookEndpoint(context.Background(), ep.ID)
	if err != nil || got.Name != "" || got.URL != "https://93.184.215.14/hook" || !slices.Equal(got.EnabledEvents, []string{webhooks.SessionCreated}) || got.State != "enabled" || got.Secret != ep.SigningSecret {
		t.Fatalf("after refused updates: %+v, %v", got, err)
	}
}

// Issue 25's webhook URLs, accepted by the old deny-list: each is refused
// with a 400 that names the block and the development flag, and nothing is
// stored.
func TestWebhookURLsOutsideTheGlobalInternetAreRefused(t *testing.T) {
	e := newHookEnv(t, false, webhooks.Policy{})
	for _, c := range []struct{ url, want string }{
		{"https://100.64.0.1/hook", "100.64.0.0/10"},
		{"https://100.100.100.200/latest/meta-data", "100.64.0.0/10"},
		{"https://198.18.0.1/hook", "198.18.0.0/15"},
		{"https://0.0.0.1/hook", "0.0.0.0/8"},
		{"https://255.255.255.255/hook", "broadcast"},
		{"https://[::127.0.0.1]/hook", "IPv4-compatible"},
		{"https://[64:ff9b::7f00:1]/hook", "NAT64 64:ff9b::/96 of 127.0.0.0/8, loopback"},
		{"https://[2002:7f00:1::1]/hook", "6to4 2002::/16 of 127.0.0.0/8, loopback"},
	} {
		status, body := e.raw("POST", "/v1/organizations/webhooks", map[string]any{"url": c.url, "enabled_events": []string{webhooks.SessionCreated}})
		if status != 400 || !strings.Contains(string(body), "invalid_request_error") || !strings.Contains(string(body), c.want) ||
			!strings.Contains(string(body), "--webhooks-allow-private") {
			t.Errorf("%s: %d %s; want 400 invalid_request_error naming %q and the development flag", c.url, status, body, c.want)
		}
	}
	list, err := e.db.ListWebhookEndpoints(context.Background(), storage.ListQuery{})
	if err != nil || len(list) != 0 {
		t.Fatalf("refusals stored endpoints: %+v, %v", list, err)
	}
}

// TestWebhookReceiverDownGetsEveryEventInOrder: while the receiver fails,
// deliveries back off and hold back later ones of the same session; when it
// returns it gets every event once, each session's in order. The clock is
// injected: minutes pass without waiting.
func TestWebhookReceiverDownGetsEveryEventInOrder(t *testing.T) {
	e := newHookEnv(t, true, webhooks.Policy{FirstBackoff: time.Second, MaxBackoff: 20 * time.Second, RetryFor: time.Hour})
	e.createEndpoint(webhooks.SessionCreated, webhooks.SessionStatusRunStarted, webhooks.SessionStatusIdled, webhooks.SessionStatusTerminated)
	ctx := context.Background()
	envID := e.environment("hooked")
	agent, err := e.sdk.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: api.ScriptedModel}})
	if err != nil {
		t.Fatal(err)
	}
	e.setStatus(http.StatusServiceUnavailable)
	want := map[string][]string{}
	for range 2 {
		sess, err := e.sdk.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}})
		if err != nil {
			t.Fatal(err)
		}
		// The statuses a runtime stores, through the same append path.
		for _, typ := range []string{api.EventSessionStatusRunning, api.EventSessionStatusIdle, api.EventSessionStatusRunning, api.EventSessionStatusTerminated} {
			if _, err := e.db.AppendEvents(ctx, sess.ID, []api.Event{{Type: typ, StopReason: &api.StopReason{Type: api.StopEndTurn}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		want[sess.ID] = []string{webhooks.SessionCreated, webhooks.SessionStatusRunStarted, webhooks.SessionStatusIdled, webhooks.SessionStatusRunStarted, webhooks.SessionStatusTerminated}
	}
	// A minute of failures.
	for range 12 {
		e.deliver()
		e.clock.Advance(5 * time.Second)
	}
	e.setStatus(http.StatusOK)
	for range 50 {
		e.clock.Advance(20 * time.Second)
		if e.deliver() == 0 {
			break
		}
	}
	got := map[string][]string{}
	accepted := map[string]bool{}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, r := range e.received {
		var env webhooks.Envelope
		if err := json.Unmarshal(e.bodies[i], &env); err != nil {
			t.Fatal(err)
		}
		if env.ID != r.Header.Get("webhook-id") {
			t.Fatalf("webhook-id %s for event %s", r.Header.Get("webhook-id"), env.ID)
		}
		if e.answered[i] != http.StatusOK {
			continue
		}
		if accepted[env.ID] {
			t.Fatalf("event %s delivered again after it was accepted", env.ID)
		}
		accepted[env.ID] = true
		got[env.Data.ID] = append(got[env.Data.ID], env.Data.Type)
	}
	if !slices.Contains(e.answered, http.StatusServiceUnavailable) {
		t.Fatal("the receiver was never down")
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("session %s received %q, want %q", id, got[id], w)
		}
	}
}

// claimWatch is a real store that reports each claim the dispatcher makes.
type claimWatch struct {
	storage.Store
	claims chan struct{}
}

func (c claimWatch) ClaimDeliveries(ctx context.Context, now time.Time, limit int, token string, p webhooks.Policy) ([]webhooks.Delivery, error) {
	c.claims <- struct{}{}
	return c.Store.ClaimDeliveries(ctx, now, limit, token, p)
}

// The dispatcher looks for deliveries when a change stored some, and only
// then: memory writes (which emit nothing) and a change nobody subscribed
// to cost no claim, while a subscribed change is sent at once although
// the dispatcher's interval is an hour.
func TestTheDispatcherWakesExactlyWhenDeliveriesAreStored(t *testing.T) {
	watch := claimWatch{claims: make(chan struct{}, 100)}
	e := newHookEnv(t, true, webhooks.Policy{}, func(s storage.Store) storage.Store { watch.Store = s; return watch })
	e.createEndpoint(webhooks.EnvironmentCreated)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.app.RunWebhooks(ctx, time.Hour); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-watch.claims // the first round, at start

	var st api.MemoryStore
	if code, body := e.raw("POST", "/v1/memory_stores", map[string]string{"name": "notes"}); code != 200 || json.Unmarshal(body, &st) != nil {
		t.Fatalf("create store: %d %s", code, body)
	}
	for i := range 5 {
		if code, body := e.raw("POST", "/v1/memory_stores/"+st.ID+"/memories", map[string]string{"path": "/m" + strconv.Itoa(i), "content": "x"}); code != 200 {
			t.Fatalf("create memory: %d %s", code, body)
		}
	}
	envID := e.environment("hooked")
	// Woken by the environment's delivery only; the receiver is then
	// waited for under a safety bound, not a timing.
	<-watch.claims
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.mu.Lock()
		n := len(e.bodies)
		e.mu.Unlock()
		if n > 0 || time.Now().After(bound) {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.bodies) != 1 || !strings.Contains(string(e.bodies[0]), envID) {
		t.Fatalf("received %q; want the environment.created of %s", e.bodies, envID)
	}
	if n := len(watch.claims); n != 0 {
		t.Fatalf("%d more claims than the start's and the environment's", n)
	}
}

// TestWebhookEndpointFailingForLongIsDisabled: past the retry window the
// delivery fails and the endpoint is disabled with a reason; every attempt
// is listed with its status, latency and response excerpt.
func TestWebhookEndpointFailingForLongIsDisabled(t *testing.T) {
	e := newHookEnv(t, true, webhooks.Policy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Second, RetryFor: time.Minute})
	ep := e.createEndpoint(webhooks.EnvironmentCreated)
	e.setStatus(http.StatusInternalServerError)
	e.environment("hooked")
	for range 12 {
		e.deliver()
		e.clock.Advance(10 * time.Second)
	}
	got, err := e.sdk.Beta.Organization.Webhooks.Get(context.Background(), ep.ID, anthropic.BetaOrganizationWebhookGetParams{})
	if err != nil || got.State != "disabled" || !strings.Contains(got.DisabledReason, "HTTP 500") {
		t.Fatalf("endpoint = %s, %v; want disabled with the reason", got.RawJSON(), err)
	}
	status, body := e.raw("GET", "/v1/organizations/webhooks/"+ep.ID+"/deliveries", nil)
	var page api.Page[api.WebhookDelivery]
	if err := json.Unmarshal(body, &page); status != 200 || err != nil || len(page.Data) != 1 {
		t.Fatalf("deliveries: %d %s", status, body)
	}
	d := page.Data[0]
	if d.State != webhooks.Failed || len(d.Attempts) < 3 || d.Attempts[0].StatusCode != 500 || d.Attempts[0].ResponseExcerpt != "receiver says hello" {
		t.Fatalf("delivery = %+v", d)
	}
	scrape := httptest.NewRecorder()
	e.srv.MetricsHandler().ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(scrape.Body.String(), `memstore_webhook_attempts_total{result="refused"} `+strconv.Itoa(len(d.Attempts))) {
		t.Errorf("metrics do not count the %d refused attempts:\n%s", len(d.Attempts), scrape.Body)
	}
	before := len(e.received)
	e.environment("after")
	e.clock.Advance(time.Hour)
	if e.deliver(); len(e.received) != before {
		t.Fatal("a disabled endpoint was sent an event")
	}
}
