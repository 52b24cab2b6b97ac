// Package client is the typed HTTP client for memstore's API: memory stores
// and memories, and the control plane a worker drives (environments, the
// work queue, agents, sessions and their events).
//
// The wire format is that of Anthropic's Claude Managed Agents API, so the
// same client talks to a memstore server and to Anthropic's own API: it
// sends the headers the official SDKs send (anthropic-version,
// anthropic-beta) and either credential form, and it decodes the shared
// error envelope into *api.Error.
//
// A Client is safe for concurrent use. Every method takes a context first;
// cancelling it aborts the request and any retry wait.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/memstore/memstore/api"
)

// Protocol constants sent on every request. APIVersion is the one the
// official Go SDK (v2.15.0), the reference client of this API, sends, so
// Anthropic's servers treat this client's requests as they treat the SDK's.
// The beta names select the Managed Agents API surface there; memstore
// accepts and ignores both headers.
const (
	APIVersion        = "2026-10-21"
	BetaManagedAgents = "managed-agents-2026-04-01"
	BetaAgentMemory   = "agent-memory-2026-07-22"
)

// DefaultUserAgent identifies this client in server logs unless WithUserAgent
// replaces it.
var DefaultUserAgent = "memstore-go-client (" + runtime.Version() + ")"

// Client calls one API server with one credential. Derive variants (another
// credential, another worker id) with With; they share the traffic counters.
type Client struct {
	baseURL   string // scheme://host[/prefix], no trailing slash
	http      *http.Client
	log       *slog.Logger
	retry     RetryPolicy
	apiKey    string
	bearer    string
	workerID  string
	userAgent string
	header    http.Header
	stats     *counters
}

// Option configures a Client in New or With.
type Option func(*Client)

// WithAPIKey authenticates with a workspace API key, sent as x-api-key. It
// replaces any bearer token set before.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey, c.bearer = key, "" }
}

// WithBearerToken authenticates with an environment key or a sessions token,
// sent as Authorization: Bearer. It replaces any API key set before, because
// a request carrying both would be authorised by whichever the server reads
// first, which differs between servers.
func WithBearerToken(token string) Option {
	return func(c *Client) { c.apiKey, c.bearer = "", token }
}

// WithHTTPClient sets the *http.Client used for every request (timeouts,
// proxies, TLS). The default is http.DefaultClient; long polls and event
// streams are bounded by the context, so a client-wide Timeout shorter than
// a poll's block_ms or a stream's life would cut them.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithLogger sets where retries and dropped connections are reported. The
// default discards, so embedding the client never writes to a program's log
// uninvited. Credentials are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) { c.log = l }
}

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) { c.retry = p }
}

// WithWorkerID sends Anthropic-Worker-ID on every request, so the server can
// count the workers polling an environment and attribute their calls.
func WithWorkerID(id string) Option {
	return func(c *Client) { c.workerID = id }
}

// WithUserAgent replaces DefaultUserAgent, e.g. with a worker's name and
// version so an operator can tell its requests apart.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithHeader sets an extra header on every request, or overrides one the
// client sets (anthropic-version, for instance, when a server needs a newer
// one). Headers set this way win over the client's own.
func WithHeader(key, value string) Option {
	return func(c *Client) {
		c.header = c.header.Clone()
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Set(key, value)
	}
}

// New returns a client for the API at baseURL (for example
// "http://127.0.0.1:8080" or "https://api.anthropic.com"; a path prefix is
// kept). It fails only on a base URL that is not an absolute http(s) URL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be an absolute http:// or https:// URL, e.g. http://127.0.0.1:8080", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q must not carry a query or fragment", baseURL)
	}
	c := &Client{
		baseURL:   strings.TrimRight(u.String(), "/"),
		http:      http.DefaultClient,
		log:       slog.New(slog.DiscardHandler),
		retry:     DefaultRetryPolicy,
		userAgent: DefaultUserAgent,
		stats:     new(counters),
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// With returns a copy of c with opts applied on top. The copy shares c's
// traffic counters: a worker that polls with its environment key and syncs
// with each session's token still reports one total.
func (c *Client) With(opts ...Option) *Client {
	d := *c
	for _, o := range opts {
		o(&d)
	}
	return &d
}

// BaseURL is the server address the client was built with.
func (c *Client) BaseURL() string { return c.baseURL }

// HTTPClient is the *http.Client requests go through, for a caller that
// derives one wrapping its transport (to count requests, say) and passes
// it back with WithHTTPClient.
func (c *Client) HTTPClient() *http.Client { return c.http }

// Stats is a snapshot of a client's traffic. Every attempt counts, retries
// included, because that is what crossed the network.
type Stats struct {
	Requests      int64 // HTTP requests sent
	Retries       int64 // of which repeats of a failed attempt
	BytesSent     int64 // request body bytes
	BytesReceived int64 // response body bytes read
}

type counters struct {
	requests, retries, sent, received atomic.Int64
}

// Stats returns the traffic so far of c and of every client derived from it
// with With.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:      c.stats.requests.Load(),
		Retries:       c.stats.retries.Load(),
		BytesSent:     c.stats.sent.Load(),
		BytesReceived: c.stats.received.Load(),
	}
}

// request is one API call before it is sent.
type request struct {
	method string
	path   string // escaped, from route
	query  url.Values
	body   any // JSON-encoded when non-nil
	// raw, when non-nil, is sent as it is with Content-Type rawType (a
	// multipart upload), in place of body.
	raw     []byte
	rawType string
	// memory adds the agent-memory beta, which Anthropic's API requires on
	// the memory endpoints.
	memory bool
	// idempotent marks a non-GET request whose repetition cannot change the
	// outcome, so transport failures and 5xx may be retried.
	idempotent bool
	// emptyOK accepts a 2xx with no body (204, or "null") and leaves out
	// untouched; otherwise an empty success body is an error.
	emptyOK bool
	header  http.Header
}

// do sends r, retrying as the policy allows, and decodes a 2xx body into out
// (when out is non-nil). Any other status becomes an *api.Error.
func (c *Client) do(ctx context.Context, r request, out any) error {
	res, body, err := c.send(ctx, r, true)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		if r.emptyOK || out == nil {
			return nil
		}
		return fmt.Errorf("client: %s %s: server answered %d with an empty body where a JSON object was expected", r.method, r.path, res.StatusCode)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("client: %s %s: decoding %d response: %w", r.method, r.path, res.StatusCode, err)
	}
	return nil
}

// send performs r with retries until a 2xx arrives. With buffered, it reads
// the whole body (a body cut short counts as a transport error, retried
// like one) and closes the response; without, it hands over the response
// with its body unread, for streams, and the caller must close it.
// Non-2xx responses are turned into *api.Error here.
func (c *Client) send(ctx context.Context, r request, buffered bool) (*http.Response, []byte, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return nil, nil, fmt.Errorf("client: %s %s: encoding request body: %w", r.method, r.path, err)
		}
	}
	if r.raw != nil {
		payload = r.raw
	}
	target := c.baseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	safe := r.method == http.MethodGet || r.idempotent
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, r, target, payload)
		if err != nil {
			return nil, nil, err
		}
		if attempt > 0 {
			c.stats.retries.Add(1)
		}
		c.stats.requests.Add(1)
		c.stats.sent.Add(int64(len(payload)))
		res, err := c.http.Do(req)
		var failure error
		switch {
		case err != nil:
			failure = fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
		case res.StatusCode < 200 || res.StatusCode > 299:
			failure = c.decodeError(res)
		case !buffered:
			res.Body = &countingBody{ReadCloser: res.Body, n: &c.stats.received}
			return res, nil, nil
		default:
			body, readErr := io.ReadAll(&countingBody{ReadCloser: res.Body, n: &c.stats.received})
			res.Body.Close()
			if readErr == nil {
				return res, body, nil
			}
			err = readErr
			res = nil // judged as the transport error it is, whatever the status
			failure = fmt.Errorf("client: %s %s: reading response: %w", r.method, r.path, err)
		}
		if ctx.Err() != nil {
			return nil, nil, failure
		}
		delay, retry := c.retry.decide(attempt, safe, res, err)
		if !retry {
			return nil, nil, failure
		}
		attrs := []any{"method", r.method, "path", r.path, "attempt", attempt + 1, "delay", delay, "err", failure}
		if ae := (*api.Error)(nil); errors.As(failure, &ae) {
			attrs = append(attrs, "request_id", ae.RequestID)
		}
		c.log.WarnContext(ctx, "retrying request", attrs...)
		if err := c.retry.sleep(ctx, delay); err != nil {
			return nil, nil, failure
		}
	}
}

func (c *Client) newRequest(ctx context.Context, r request, target string, payload []byte) (*http.Request, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	h := req.Header
	switch {
	case r.raw != nil:
		h.Set("Content-Type", r.rawType)
	case payload != nil:
		h.Set("Content-Type", "application/json")
	}
	h.Set("Accept", "application/json")
	h.Set("anthropic-version", APIVersion)
	if r.memory {
		h.Set("anthropic-beta", BetaManagedAgents+","+BetaAgentMemory)
	} else {
		h.Set("anthropic-beta", BetaManagedAgents)
	}
	h.Set("User-Agent", c.userAgent)
	switch {
	case c.apiKey != "":
		h.Set("x-api-key", c.apiKey)
	case c.bearer != "":
		h.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.workerID != "" {
		h.Set("Anthropic-Worker-ID", c.workerID)
	}
	for k, vs := range r.header {
		h[k] = vs
	}
	for k, vs := range c.header {
		h[k] = vs
	}
	return req, nil
}

// countingBody adds the bytes read from a response body to a counter.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// route fills the {name} placeholders of pattern, in order, with args
// escaped as single path segments. An empty or dot-only argument is refused
// before anything is sent: it would address another resource (the list
// endpoint, or a parent after path cleaning) instead of failing.
func route(pattern string, args ...string) (string, error) {
	var b strings.Builder
	rest := pattern
	for _, arg := range args {
		open := strings.IndexByte(rest, '{')
		end := strings.IndexByte(rest, '}')
		if open < 0 || end < open {
			panic("client: route " + pattern + " has fewer placeholders than arguments")
		}
		name := rest[open+1 : end]
		switch arg {
		case "":
			return "", fmt.Errorf("client: %s is empty; pass the id of an existing object", name)
		case ".", "..":
			return "", fmt.Errorf("client: %s %q is not a valid id", name, arg)
		}
		b.WriteString(rest[:open])
		b.WriteString(url.PathEscape(arg))
		rest = rest[end+1:]
	}
	if strings.IndexByte(rest, '{') >= 0 {
		panic("client: route " + pattern + " has more placeholders than arguments")
	}
	b.WriteString(rest)
	return b.String(), nil
}
