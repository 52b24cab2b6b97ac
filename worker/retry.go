package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/memstore/memstore/api"
)

// permanent reports whether err is an answer that repeating the request will
// not change: a 4xx other than 408 (timeout), 409 (the official SDK retries
// conflicts, and servers use them for races) and 429 (rate limit). Transport
// failures and 5xx are transient. The poll loop, the heartbeat, the event
// stream and the tool-result post all sort their failures with it, so an
// operator sees one rule: a wrong key or a missing environment ends the
// loop at once, a flaky network never does.
func permanent(err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch s := ae.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests:
		return false
	default:
		return s >= 400 && s < 500
	}
}

// backoff is the wait before retry number n (1-based): base doubled n-1
// times, capped at max, then jittered down into [d/2, d) so that workers
// that failed together do not come back in step.
func backoff(n int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d on clk or until ctx ends; it reports whether the wait
// completed.
func sleep(ctx context.Context, clk clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	elapsed := make(chan struct{})
	stop := clk.AfterFunc(d, func() { close(elapsed) })
	defer stop()
	select {
	case <-elapsed:
		return true
	case <-ctx.Done():
		return false
	}
}
