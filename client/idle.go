package client

import (
	"errors"
	"io"
	"sync"
	"time"
)

// DefaultStreamIdleTimeout is how long an event stream may stay silent
// before the client gives up on its connection. memstore's server sends a
// keep-alive comment every 15 s on an idle stream, so 45 s of silence is
// three missed keep-alives: the connection is dead (a host that vanished, a
// proxy that dropped it) even though TCP has not said so, and may not for
// many minutes.
const DefaultStreamIdleTimeout = 45 * time.Second

// ErrStreamIdle ends an event stream that received nothing, not even a
// keep-alive, for longer than its idle timeout. It is transient: reconnect.
var ErrStreamIdle = errors.New("no data from the server, not even a keep-alive, for longer than the stream's idle timeout, so the connection is presumed dead; reconnect")

// idleBody ends a response body on which a reader has been waiting for
// longer than limit without a byte: it closes the body, which unblocks the
// pending Read, and every Read from then on fails with ErrStreamIdle. Any
// byte counts as life, keep-alive comments included, which the SSE reader
// then drops. Only time spent waiting in Read counts: a caller busy
// elsewhere (a worker listing a long history right after connecting) finds
// what arrived meanwhile in the socket's buffer, not a timeout.
type idleBody struct {
	rc    io.ReadCloser
	limit time.Duration
	// now and after are the clock and the timer (time.Now and
	// time.AfterFunc's Stop); tests drive both.
	now   func() time.Time
	after func(d time.Duration, f func()) (stop func() bool)

	mu      sync.Mutex
	waiting time.Time // when the pending Read started waiting; zero when none is
	stop    func() bool
	expired bool
	closed  bool
}

func realAfter(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

func watchIdle(rc io.ReadCloser, limit time.Duration, now func() time.Time, after func(time.Duration, func()) func() bool) *idleBody {
	b := &idleBody{rc: rc, limit: limit, now: now, after: after}
	b.mu.Lock()
	b.stop = after(limit, b.check)
	b.mu.Unlock()
	return b
}

// check runs when the timer fires. Reads do not touch the timer, they only
// note when they start waiting, so a busy stream costs no timer work; the
// timer is re-armed for whatever is left of the limit.
func (b *idleBody) check() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	idle := time.Duration(0)
	if !b.waiting.IsZero() {
		idle = b.now().Sub(b.waiting)
	}
	if idle < b.limit {
		b.stop = b.after(b.limit-idle, b.check)
		b.mu.Unlock()
		return
	}
	b.expired = true
	b.mu.Unlock()
	_ = b.rc.Close()
}

// Read is called by one goroutine at a time, as bufio.Scanner does.
func (b *idleBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.expired {
		b.mu.Unlock()
		return 0, ErrStreamIdle
	}
	b.waiting = b.now()
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting = time.Time{}
	if b.expired {
		return n, ErrStreamIdle
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.stop()
	b.mu.Unlock()
	return b.rc.Close()
}
