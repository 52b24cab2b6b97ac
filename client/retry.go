package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy bounds how a failed request is repeated.
//
// What is retried: transport errors, 408, 429 and 5xx (529 included), and
// only for requests that are safe to repeat — GETs and calls the client
// knows to be idempotent (an update guarded by a content precondition). A
// request that never reached the server (the connection could not be
// dialled) is safe whatever its method. Other 4xx answers, conflicts above
// all, are the server's decision and are never repeated. The server has the
// last word through x-should-retry: "false" forbids a retry, "true" allows
// one even for a non-idempotent request (the server vouches that it did
// nothing), though never for a 4xx other than 408 and 429.
//
// How long to wait: retry-after-ms or retry-after (seconds or an HTTP date)
// when the response has one, else a jittered exponential backoff from
// BaseDelay doubling up to MaxDelay. A server that asks for a longer wait
// than MaxRetryAfter gets its error returned instead, so a caller with its
// own schedule (a worker's heartbeat) is not stalled.
type RetryPolicy struct {
	// MaxRetries is the number of repeats after the first attempt; 0
	// disables retries.
	MaxRetries int
	// BaseDelay, MaxDelay and MaxRetryAfter: zero takes the value of
	// DefaultRetryPolicy.
	BaseDelay     time.Duration
	MaxDelay      time.Duration
	MaxRetryAfter time.Duration
	// Sleep waits d, or returns ctx.Err() when ctx ends first. Nil uses a
	// timer. Tests inject one that records d and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now reads the clock for retry-after dates; nil is time.Now.
	Now func() time.Time
}

// DefaultRetryPolicy is what New uses: up to 3 repeats, 0.5 s doubling to
// 8 s, and retry-after honoured up to a minute.
var DefaultRetryPolicy = RetryPolicy{
	MaxRetries:    3,
	BaseDelay:     500 * time.Millisecond,
	MaxDelay:      8 * time.Second,
	MaxRetryAfter: time.Minute,
}

// decide says whether attempt (0-based) may be followed by another, and
// after how long. res is the failed response (nil on a transport error, in
// which case err is set); safe says the request may be repeated.
func (p RetryPolicy) decide(attempt int, safe bool, res *http.Response, err error) (time.Duration, bool) {
	if attempt >= p.MaxRetries {
		return 0, false
	}
	if err != nil {
		if !safe && !neverSent(err) {
			return 0, false
		}
		return p.backoff(attempt), true
	}
	status := res.StatusCode
	vouched := false
	switch strings.ToLower(res.Header.Get("x-should-retry")) {
	case "false":
		return 0, false
	case "true":
		vouched = true
	}
	retryableStatus := status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
	if !retryableStatus || !(safe || vouched) {
		return 0, false
	}
	if d, ok := p.retryAfter(res); ok {
		if d > p.or(p.MaxRetryAfter, DefaultRetryPolicy.MaxRetryAfter) {
			return 0, false
		}
		return d, true
	}
	return p.backoff(attempt), true
}

// backoff is BaseDelay·2^attempt capped at MaxDelay, then jittered down into
// [d/2, d] so that many workers failing together do not retry in step.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	base := p.or(p.BaseDelay, DefaultRetryPolicy.BaseDelay)
	limit := p.or(p.MaxDelay, DefaultRetryPolicy.MaxDelay)
	d := base
	for i := 0; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

func (p RetryPolicy) or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// retryAfter reads the server's requested wait: retry-after-ms first (finer,
// sent by Anthropic's API), then retry-after as seconds or an HTTP date.
func (p RetryPolicy) retryAfter(res *http.Response) (time.Duration, bool) {
	if v := res.Header.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := res.Header.Get("retry-after")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		now := time.Now
		if p.Now != nil {
			now = p.Now
		}
		return max(0, t.Sub(now())), true
	}
	return 0, false
}

func (p RetryPolicy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// neverSent reports a transport error that happened before the request left
// (the connection could not be opened), which makes any request safe to
// repeat.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
