package client_test

// Protocol mechanics (headers, error envelope, retries, accounting, URL
// escaping, paging) against small httptest handlers: these are properties of
// the client alone, and a scripted handler can produce the failures (503s,
// dropped connections, retry-after) that a healthy server never does. The
// API behaviour itself is tested against the real server in
// integration_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// seen is one request as the handler received it.
type seen struct {
	method, rawPath, rawQuery string
	header                    http.Header
	body                      string
}

// recorder serves a scripted sequence of responses and records requests.
type recorder struct {
	mu    sync.Mutex
	reqs  []seen
	steps []http.HandlerFunc // step i answers request i; the last repeats
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(b)})
	i := min(len(rec.reqs)-1, len(rec.steps)-1)
	rec.mu.Unlock()
	rec.steps[i](w, r)
}

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// dropConnection closes the connection without answering: a transport error
// after the request was sent.
func dropConnection(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func envelope(t api.ErrorType, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, t, msg)
}

// sleeps records the backoff delays instead of waiting them out.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

const storeJSON = `{"id":"memstore_1","type":"memory_store","name":"n","description":"","metadata":{},"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","archived_at":null}`

const memoryJSON = `{"id":"mem_1","type":"memory","memory_store_id":"memstore_1","path":"/a.md","content":"hi","content_sha256":"8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4","content_size_bytes":2,"memory_version_id":"memver_1","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`

// fixture starts a recorder server and a client with recorded sleeps.
func fixture(t *testing.T, steps ...http.HandlerFunc) (*recorder, *client.Client, *sleeps) {
	t.Helper()
	rec := &recorder{steps: steps}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	sl := &sleeps{}
	policy := client.DefaultRetryPolicy
	policy.Sleep = sl.sleep
	c, err := client.New(srv.URL, client.WithAPIKey("sk-test"), client.WithRetryPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	return rec, c, sl
}

func TestNewRefusesBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "http://h/?x=1", "://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted a base URL that cannot address the API", u)
		}
	}
}

func TestHeaders(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, storeJSON))
	ctx := context.Background()
	if _, err := c.GetMemoryStore(ctx, "memstore_1"); err != nil {
		t.Fatal(err)
	}
	worker := c.With(client.WithBearerToken("env-key"), client.WithWorkerID("w-1"), client.WithUserAgent("memstore-worker/1"),
		client.WithHeader("anthropic-version", "2099-01-01"))
	if _, err := worker.ListMemoryStores(ctx, client.ListMemoryStoresParams{}); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	h := reqs[0].header
	for k, want := range map[string]string{
		"X-Api-Key":         "sk-test",
		"Authorization":     "",
		"Anthropic-Version": client.APIVersion,
		"Anthropic-Beta":    "managed-agents-2026-04-01,agent-memory-2026-07-22",
		"User-Agent":        client.DefaultUserAgent,
		"Accept":            "application/json",
		"Content-Type":      "", // a GET has no body
	} {
		if got := h.Get(k); got != want {
			t.Errorf("API-key request: %s = %q, want %q", k, got, want)
		}
	}
	h = reqs[1].header
	for k, want := range map[string]string{
		"X-Api-Key":           "",
		"Authorization":       "Bearer env-key",
		"Anthropic-Worker-Id": "w-1",
		"User-Agent":          "memstore-worker/1",
		"Anthropic-Version":   "2099-01-01",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("derived client: %s = %q, want %q", k, got, want)
		}
	}
	if got := c.Stats().Requests; got != 2 {
		t.Errorf("parent Stats().Requests = %d, want 2: a derived client must share the counters", got)
	}
	// The parent is unchanged by With.
	if _, err := c.GetMemoryStore(ctx, "memstore_1"); err != nil {
		t.Fatal(err)
	}
	if h := rec.requests()[2].header; h.Get("X-Api-Key") != "sk-test" || h.Get("Anthropic-Worker-Id") != "" || h.Get("Anthropic-Version") != client.APIVersion {
		t.Errorf("With changed its parent: %v", h)
	}
}

func TestPostSendsJSONBody(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, memoryJSON))
	m, err := c.CreateMemory(context.Background(), "memstore_1", api.CreateMemoryRequest{Path: "/a.md", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "mem_1" || m.Content == nil || *m.Content != "hi" {
		t.Errorf("decoded memory = %+v", m)
	}
	r := rec.requests()[0]
	if r.method != http.MethodPost || r.rawPath != "/v1/memory_stores/memstore_1/memories" {
		t.Errorf("request = %s %s", r.method, r.rawPath)
	}
	if r.header.Get("Content-Type") != "application/json" || r.body != `{"path":"/a.md","content":"hi"}` {
		t.Errorf("body = %q (%s)", r.body, r.header.Get("Content-Type"))
	}
}

func TestErrorEnvelope(t *testing.T) {
	body := `{"type":"error","error":{"type":"memory_path_conflict_error","message":"path taken","conflicting_memory_id":"mem_9","conflicting_path":"/a.md"}}`
	_, c, sl := fixture(t, reply(409, body, "request-id", "req_42", "x-should-retry", "false"))
	_, err := c.CreateMemory(context.Background(), "memstore_1", api.CreateMemoryRequest{Path: "/a.md"})
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *api.Error", err, err)
	}
	if ae.Type != api.MemoryPathConflict || ae.StatusCode != 409 || ae.RequestID != "req_42" || ae.ConflictingMemoryID != "mem_9" || ae.ConflictingPath != "/a.md" || ae.Message != "path taken" {
		t.Errorf("api.Error = %+v", ae)
	}
	if !client.IsStatus(err, 409) || client.IsStatus(err, 404) || !client.IsType(err, api.MemoryPathConflict) || client.IsType(err, api.Conflict) {
		t.Errorf("IsStatus/IsType disagree with %v", err)
	}
	if !strings.Contains(err.Error(), "req_42") {
		t.Errorf("error text %q lacks the request id an operator needs", err)
	}
	if len(sl.delays()) != 0 {
		t.Errorf("a 409 was retried")
	}
}

func TestErrorWithoutEnvelope(t *testing.T) {
	policy := client.RetryPolicy{} // no retries: the 502 must surface at once
	for _, tc := range []struct {
		status int
		body   string
		typ    api.ErrorType
		want   string
	}{
		{502, "<html>bad gateway</html>", api.Internal, "<html>bad gateway</html>"},
		{404, "", api.NotFound, "no error body"},
		{429, `{"unexpected":true}`, api.RateLimit, "unexpected"},
		{529, "", api.Overloaded, "529"},
	} {
		_, c, _ := fixture(t, reply(tc.status, tc.body))
		c = c.With(client.WithRetryPolicy(policy))
		_, err := c.GetMemoryStore(context.Background(), "memstore_1")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Type != tc.typ || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("status %d body %q: err = %#v", tc.status, tc.body, err)
		}
	}
}

func TestEmptySuccessBodyIsAnError(t *testing.T) {
	_, c, _ := fixture(t, reply(200, ""))
	if _, err := c.GetMemoryStore(context.Background(), "memstore_1"); err == nil || !strings.Contains(err.Error(), "empty body") {
		t.Errorf("err = %v, want a clear error about the empty body", err)
	}
}

func TestRetryGETOn5xxThenSuccess(t *testing.T) {
	rec, c, sl := fixture(t,
		reply(503, envelope(api.Internal, "down")),
		reply(529, envelope(api.Overloaded, "busy")),
		reply(200, storeJSON))
	s, err := c.GetMemoryStore(context.Background(), "memstore_1")
	if err != nil || s.ID != "memstore_1" {
		t.Fatalf("GetMemoryStore = %+v, %v", s, err)
	}
	if n := len(rec.requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	d := sl.delays()
	if len(d) != 2 {
		t.Fatalf("delays = %v, want 2", d)
	}
	// Jittered exponential: attempt 0 in [250ms, 500ms], attempt 1 in [500ms, 1s].
	if d[0] < 250*time.Millisecond || d[0] > 500*time.Millisecond || d[1] < 500*time.Millisecond || d[1] > time.Second {
		t.Errorf("delays = %v, want jittered 0.5s then 1s", d)
	}
	st := c.Stats()
	if st.Requests != 3 || st.Retries != 2 {
		t.Errorf("stats = %+v, want 3 requests of which 2 retries", st)
	}
}

func TestRetryGivesUpAfterMaxRetries(t *testing.T) {
	rec, c, sl := fixture(t, reply(500, envelope(api.Internal, "boom"), "request-id", "req_last"))
	_, err := c.GetMemoryStore(context.Background(), "memstore_1")
	if !client.IsStatus(err, 500) {
		t.Fatalf("err = %v, want the last 500", err)
	}
	if n := len(rec.requests()); n != client.DefaultRetryPolicy.MaxRetries+1 {
		t.Errorf("requests = %d, want %d", n, client.DefaultRetryPolicy.MaxRetries+1)
	}
	// Backoff doubles and is capped by MaxDelay.
	for i, d := range sl.delays() {
		hi := min(client.DefaultRetryPolicy.BaseDelay<<i, client.DefaultRetryPolicy.MaxDelay)
		if d < hi/2 || d > hi {
			t.Errorf("delay %d = %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}
}

func TestBackoffCappedByMaxDelay(t *testing.T) {
	_, c, sl := fixture(t, reply(503, ""))
	policy := client.RetryPolicy{MaxRetries: 6, BaseDelay: time.Second, MaxDelay: 3 * time.Second, Sleep: sl.sleep}
	c.With(client.WithRetryPolicy(policy)).GetMemoryStore(context.Background(), "memstore_1")
	d := sl.delays()
	if len(d) != 6 {
		t.Fatalf("delays = %v", d)
	}
	for _, x := range d[2:] {
		if x < 1500*time.Millisecond || x > 3*time.Second {
			t.Errorf("delay %v escapes the 3s cap (all: %v)", x, d)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		headers []string
		want    time.Duration
	}{
		{"seconds", []string{"retry-after", "2"}, 2 * time.Second},
		{"fractional seconds", []string{"retry-after", "0.25"}, 250 * time.Millisecond},
		{"milliseconds win", []string{"retry-after-ms", "1500", "retry-after", "9"}, 1500 * time.Millisecond},
		{"http date", []string{"retry-after", now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"date in the past", []string{"retry-after", now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, sl := fixture(t, reply(429, envelope(api.RateLimit, "slow down"), tc.headers...), reply(200, storeJSON))
			policy := client.DefaultRetryPolicy
			policy.Sleep, policy.Now = sl.sleep, func() time.Time { return now }
			if _, err := c.With(client.WithRetryPolicy(policy)).GetMemoryStore(context.Background(), "memstore_1"); err != nil {
				t.Fatal(err)
			}
			if d := sl.delays(); len(d) != 1 || d[0] != tc.want {
				t.Errorf("delays = %v, want [%v]", d, tc.want)
			}
		})
	}
}

func TestRetryAfterBeyondLimitReturnsError(t *testing.T) {
	rec, c, sl := fixture(t, reply(503, envelope(api.Overloaded, "later"), "retry-after", "3600"))
	_, err := c.GetMemoryStore(context.Background(), "memstore_1")
	if !client.IsStatus(err, 503) || len(rec.requests()) != 1 || len(sl.delays()) != 0 {
		t.Errorf("err = %v, %d requests, delays %v: a one-hour retry-after must be handed back, not slept", err, len(rec.requests()), sl.delays())
	}
}

func TestShouldRetryHeader(t *testing.T) {
	t.Run("false vetoes a retryable GET", func(t *testing.T) {
		rec, c, _ := fixture(t, reply(503, envelope(api.Internal, "no"), "x-should-retry", "false"), reply(200, storeJSON))
		if _, err := c.GetMemoryStore(context.Background(), "memstore_1"); !client.IsStatus(err, 503) || len(rec.requests()) != 1 {
			t.Errorf("err = %v after %d requests, want the 503 unrepeated", err, len(rec.requests()))
		}
	})
	t.Run("true allows repeating a POST", func(t *testing.T) {
		rec, c, _ := fixture(t, reply(503, envelope(api.Overloaded, "busy"), "x-should-retry", "true"), reply(200, memoryJSON))
		if _, err := c.CreateMemory(context.Background(), "memstore_1", api.CreateMemoryRequest{Path: "/a.md", Content: "hi"}); err != nil {
			t.Fatal(err)
		}
		reqs := rec.requests()
		if len(reqs) != 2 || reqs[0].body != reqs[1].body {
			t.Errorf("requests = %+v, want the same body sent twice", reqs)
		}
	})
	t.Run("true never repeats a conflict", func(t *testing.T) {
		rec, c, _ := fixture(t, reply(409, envelope(api.Conflict, "taken"), "x-should-retry", "true"), reply(200, storeJSON))
		if _, err := c.GetMemoryStore(context.Background(), "memstore_1"); !client.IsStatus(err, 409) || len(rec.requests()) != 1 {
			t.Errorf("err = %v after %d requests, want the 409 unrepeated", err, len(rec.requests()))
		}
	})
}

func TestNonIdempotentPostIsNotRetried(t *testing.T) {
	for name, step := range map[string]http.HandlerFunc{
		"5xx":               reply(500, envelope(api.Internal, "boom")),
		"429":               reply(429, envelope(api.RateLimit, "slow")),
		"dropped response":  dropConnection,
		"update, no guard":  reply(503, ""),
		"delete with guard": reply(503, ""),
	} {
		t.Run(name, func(t *testing.T) {
			rec, c, _ := fixture(t, step, reply(200, memoryJSON))
			ctx := context.Background()
			var err error
			switch name {
			case "update, no guard":
				content := "x"
				_, err = c.UpdateMemory(ctx, "memstore_1", "mem_1", api.UpdateMemoryRequest{Content: &content})
			case "delete with guard":
				_, err = c.DeleteMemory(ctx, "memstore_1", "mem_1", client.DeleteMemoryParams{ExpectedContentSHA256: "ab"})
			default:
				_, err = c.CreateMemory(ctx, "memstore_1", api.CreateMemoryRequest{Path: "/a.md"})
			}
			if err == nil || len(rec.requests()) != 1 {
				t.Errorf("err = %v after %d requests: a request that may have landed was repeated", err, len(rec.requests()))
			}
		})
	}
}

func TestPreconditionUpdateIsRetried(t *testing.T) {
	rec, c, _ := fixture(t, dropConnection, reply(500, ""), reply(200, memoryJSON))
	content := "hi"
	m, err := c.UpdateMemory(context.Background(), "memstore_1", "mem_1", api.UpdateMemoryRequest{
		Content:      &content,
		Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: "00"},
	})
	if err != nil || m.ID != "mem_1" {
		t.Fatalf("UpdateMemory = %v, %v", m, err)
	}
	reqs := rec.requests()
	if len(reqs) != 3 || reqs[0].body != reqs[2].body || !strings.Contains(reqs[2].body, `"precondition"`) {
		t.Errorf("requests = %+v, want the guarded body sent three times", reqs)
	}
}

func TestTransportErrorOnGETIsRetriedAndWrapped(t *testing.T) {
	rec, c, _ := fixture(t, dropConnection)
	_, err := c.GetMemoryStore(context.Background(), "memstore_1")
	var ae *api.Error
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("err = %v, want a transport error", err)
	}
	var ue interface{ Timeout() bool } // *url.Error, wrapped with %w
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "GET /v1/memory_stores/memstore_1") {
		t.Errorf("err = %v, want the transport error wrapped with the request named", err)
	}
	if n := len(rec.requests()); n != client.DefaultRetryPolicy.MaxRetries+1 {
		t.Errorf("requests = %d, want every retry used", n)
	}
}

func TestDialErrorIsRetriedForAnyMethod(t *testing.T) {
	// A port nobody listens on: the request never leaves, so even a create
	// is safe to repeat.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sl := &sleeps{}
	c, err := client.New("http://"+addr, client.WithRetryPolicy(client.RetryPolicy{MaxRetries: 2, Sleep: sl.sleep}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateMemory(context.Background(), "memstore_1", api.CreateMemoryRequest{Path: "/a.md"})
	if err == nil || len(sl.delays()) != 2 || c.Stats().Requests != 3 {
		t.Errorf("err = %v, delays %v, stats %+v: want two retries of an undelivered POST", err, sl.delays(), c.Stats())
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	rec, c, _ := fixture(t, reply(503, ""))
	ctx, cancel := context.WithCancel(context.Background())
	policy := client.DefaultRetryPolicy
	policy.Sleep = func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}
	_, err := c.With(client.WithRetryPolicy(policy)).GetMemoryStore(ctx, "memstore_1")
	if !client.IsStatus(err, 503) || len(rec.requests()) != 1 {
		t.Errorf("err = %v after %d requests, want the 503 once the context ended", err, len(rec.requests()))
	}
}

func TestStatsCountBytes(t *testing.T) {
	errBody := envelope(api.Internal, "down")
	_, c, _ := fixture(t, reply(503, errBody), reply(200, memoryJSON))
	content := "hello"
	req := api.UpdateMemoryRequest{Content: &content, Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: "ab"}}
	if _, err := c.UpdateMemory(context.Background(), "memstore_1", "mem_1", req); err != nil {
		t.Fatal(err)
	}
	const sentBody = `{"content":"hello","precondition":{"type":"content_sha256","content_sha256":"ab"}}`
	want := client.Stats{Requests: 2, Retries: 1, BytesSent: 2 * int64(len(sentBody)), BytesReceived: int64(len(errBody) + len(memoryJSON))}
	if got := c.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, memoryJSON))
	ctx := context.Background()
	if _, err := c.GetMemory(ctx, "store/../x", "m?e m%", client.GetMemoryParams{View: api.ViewBasic}); err != nil {
		t.Fatal(err)
	}
	r := rec.requests()[0]
	if r.rawPath != "/v1/memory_stores/store%2F..%2Fx/memories/m%3Fe%20m%25" || r.rawQuery != "view=basic" {
		t.Errorf("sent %s?%s", r.rawPath, r.rawQuery)
	}
	for _, bad := range [][2]string{{"", "mem_1"}, {"memstore_1", ""}, {"..", "mem_1"}, {"memstore_1", "."}} {
		if _, err := c.GetMemory(ctx, bad[0], bad[1], client.GetMemoryParams{}); err == nil {
			t.Errorf("GetMemory(%q, %q) was sent", bad[0], bad[1])
		}
	}
	if n := len(rec.requests()); n != 1 {
		t.Errorf("%d requests sent for invalid ids, want none", n-1)
	}
}

func TestBaseURLPrefixIsKept(t *testing.T) {
	rec := &recorder{steps: []http.HandlerFunc{reply(200, storeJSON)}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c, err := client.New(srv.URL+"/memstore/", client.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMemoryStore(context.Background(), "memstore_1"); err != nil {
		t.Fatal(err)
	}
	if p := rec.requests()[0].rawPath; p != "/memstore/v1/memory_stores/memstore_1" {
		t.Errorf("path = %s", p)
	}
}

func TestQueryParameters(t *testing.T) {
	rec, c, _ := fixture(t, reply(200, `{"data":[],"next_page":null}`))
	ctx := context.Background()
	gte := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	c.ListMemoryStores(ctx, client.ListMemoryStoresParams{Limit: 5, Page: "p 1", IncludeArchived: true, CreatedAtGTE: gte})
	c.ListMemories(ctx, "memstore_1", client.ListMemoriesParams{PathPrefix: "/a b/", Depth: 1, View: api.ViewFull, Limit: 20})
	c.ListMemoryVersions(ctx, "memstore_1", client.ListMemoryVersionsParams{MemoryID: "mem_1", Operation: api.OperationDeleted, SessionID: "sesn_1", APIKeyID: "key_1", CreatedAtLTE: gte})
	c.DeleteMemory(ctx, "memstore_1", "mem_1", client.DeleteMemoryParams{ExpectedContentSHA256: "abc"})
	c.ListMemories(ctx, "memstore_1", client.ListMemoriesParams{})
	want := []string{
		"created_at%5Bgte%5D=2026-01-02T02%3A04%3A05Z&include_archived=true&limit=5&page=p+1",
		"depth=1&limit=20&path_prefix=%2Fa+b%2F&view=full",
		"api_key_id=key_1&created_at%5Blte%5D=2026-01-02T02%3A04%3A05Z&memory_id=mem_1&operation=deleted&session_id=sesn_1",
		"expected_content_sha256=abc",
		"",
	}
	for i, r := range rec.requests() {
		if r.rawQuery != want[i] {
			t.Errorf("request %d query = %q, want %q", i, r.rawQuery, want[i])
		}
	}
}

// pages serves a listing of n items, size per page, with cursors "c<offset>".
func pages(n, size int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		off := 0
		fmt.Sscanf(r.URL.Query().Get("page"), "c%d", &off)
		var items []string
		for i := off; i < min(off+size, n); i++ {
			items = append(items, fmt.Sprintf(`{"type":"memory","id":"mem_%d","path":"/m%03d"}`, i, i))
		}
		next := "null"
		if off+size < n {
			next = fmt.Sprintf(`"c%d"`, off+size)
		}
		fmt.Fprintf(w, `{"data":[%s],"next_page":%s}`, strings.Join(items, ","), next)
	}
}

func TestListAllMemoriesPagesToTheEnd(t *testing.T) {
	rec, c, _ := fixture(t, pages(7, 3))
	var got []string
	for it, err := range c.ListAllMemories(context.Background(), "memstore_1", client.ListMemoriesParams{Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, it.Memory.Path)
	}
	if len(got) != 7 || got[0] != "/m000" || got[6] != "/m006" {
		t.Errorf("items = %v", got)
	}
	reqs := rec.requests()
	if len(reqs) != 3 || reqs[2].rawQuery != "limit=3&page=c6" {
		t.Errorf("requests = %+v", reqs)
	}

	// Breaking out early fetches no further page.
	for range c.ListAllMemories(context.Background(), "memstore_1", client.ListMemoriesParams{Limit: 3}) {
		break
	}
	if n := len(rec.requests()); n != 4 {
		t.Errorf("requests after an early break = %d, want 4", n)
	}
}

func TestListAllStopsAtError(t *testing.T) {
	_, c, _ := fixture(t, pages(10, 2), reply(404, envelope(api.NotFound, "gone"), "x-should-retry", "false"))
	var n int
	var last error
	for _, err := range c.ListAllMemories(context.Background(), "memstore_1", client.ListMemoriesParams{}) {
		if err != nil {
			last = err
			continue
		}
		n++
	}
	if n != 2 || !client.IsStatus(last, 404) {
		t.Errorf("got %d items then %v, want 2 items then the 404", n, last)
	}
}

func TestListAllStopsOnStuckCursor(t *testing.T) {
	_, c, _ := fixture(t, reply(200, `{"data":[{"type":"memory_prefix","path":"/a/"}],"next_page":"same"}`))
	var n int
	var last error
	for _, err := range c.ListAllMemories(context.Background(), "memstore_1", client.ListMemoriesParams{}) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 2 || last == nil || !strings.Contains(last.Error(), "same next_page") {
		t.Errorf("got %d items then %v, want the loop broken by a clear error", n, last)
	}
}

// truncated promises a body and drops the connection part-way through it.
func truncated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "1000")
	w.WriteHeader(200)
	io.WriteString(w, `{"id":"mem`)
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

func TestTruncatedBody(t *testing.T) {
	t.Run("GET is retried", func(t *testing.T) {
		rec, c, _ := fixture(t, truncated, reply(200, storeJSON))
		s, err := c.GetMemoryStore(context.Background(), "memstore_1")
		if err != nil || s.ID != "memstore_1" || len(rec.requests()) != 2 {
			t.Errorf("GetMemoryStore = %+v, %v after %d requests; want the cut body retried", s, err, len(rec.requests()))
		}
	})
	t.Run("POST is not", func(t *testing.T) {
		rec, c, _ := fixture(t, truncated, reply(200, memoryJSON))
		_, err := c.CreateMemory(context.Background(), "memstore_1", api.CreateMemoryRequest{Path: "/a.md"})
		var ae *api.Error
		if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "reading response") || len(rec.requests()) != 1 {
			t.Errorf("err = %v after %d requests; want the read error, unrepeated", err, len(rec.requests()))
		}
	})
}

func TestRetryIsLoggedWithoutSecrets(t *testing.T) {
	// The log line is written before the retry, on the caller's goroutine.
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	_, c, _ := fixture(t, reply(503, envelope(api.Overloaded, "busy"), "request-id", "req_7"), reply(200, storeJSON))
	if _, err := c.With(client.WithLogger(logger)).GetMemoryStore(context.Background(), "memstore_1"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "retrying request") || !strings.Contains(out, "request_id=req_7") || !strings.Contains(out, "path=/v1/memory_stores/memstore_1") {
		t.Errorf("retry log = %q, want the request and its request id", out)
	}
	if strings.Contains(out, "sk-test") {
		t.Errorf("retry log leaks the API key: %q", out)
	}
}
