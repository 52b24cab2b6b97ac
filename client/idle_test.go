package client

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/testclock"
)

// fakeTimer is the idle watcher's clock and timer, moved by the test: the
// timer fires only when the test says so.
type fakeTimer struct {
	*testclock.Clock
	mu    sync.Mutex
	armed []time.Duration // every delay the watcher armed the timer with
	fire  func()
}

func (f *fakeTimer) after(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, d)
	f.fire = fn
	return func() bool { return true }
}

// fireTimer runs the armed callback, as the real timer would when its
// delay is over.
func (f *fakeTimer) fireTimer() {
	f.mu.Lock()
	fn := f.fire
	f.mu.Unlock()
	fn()
}

func (f *fakeTimer) lastArmed() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.armed[len(f.armed)-1]
}

// reading starts a Read of b in the background and returns once it waits
// for data, with a channel for its outcome.
func reading(t *testing.T, b *idleBody) <-chan readResult {
	t.Helper()
	out := make(chan readResult, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := b.Read(buf)
		out <- readResult{string(buf[:n]), err}
	}()
	for {
		b.mu.Lock()
		started := !b.waiting.IsZero()
		b.mu.Unlock()
		if started {
			return out
		}
		runtime.Gosched()
	}
}

type readResult struct {
	data string
	err  error
}

func TestIdleBodyEndsAStreamThatKeepsAReaderWaiting(t *testing.T) {
	clk := &fakeTimer{Clock: testclock.New(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC))}
	pr, pw := io.Pipe()
	b := watchIdle(pr, 45*time.Second, clk.Now, clk.after)
	if clk.lastArmed() != 45*time.Second {
		t.Fatalf("first timer %v, want the whole limit", clk.lastArmed())
	}

	// A keep-alive after 30 s of waiting; the next read waits 15 s when
	// the timer fires: re-armed for the 30 s left.
	got := reading(t, b)
	clk.Advance(30 * time.Second)
	pw.Write([]byte(": keepalive\n\n"))
	if r := <-got; r.data != ": keepalive\n\n" || r.err != nil {
		t.Fatalf("read %q, %v", r.data, r.err)
	}
	got = reading(t, b)
	clk.Advance(15 * time.Second)
	clk.fireTimer()
	if clk.lastArmed() != 30*time.Second {
		t.Fatalf("re-armed for %v, want the 30 s left of the limit", clk.lastArmed())
	}

	// Then nothing for the whole limit: the body is closed under the
	// waiting read, which fails with ErrStreamIdle, as does every read
	// after it.
	clk.Advance(30 * time.Second)
	clk.fireTimer()
	if r := <-got; !errors.Is(r.err, ErrStreamIdle) {
		t.Fatalf("waiting read after the limit = %v, want ErrStreamIdle", r.err)
	}
	if _, err := b.Read(make([]byte, 8)); !errors.Is(err, ErrStreamIdle) {
		t.Fatalf("later read = %v, want ErrStreamIdle", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

func TestIdleBodyDoesNotCountTimeNobodyReads(t *testing.T) {
	// The caller is busy elsewhere for two whole limits (a worker lists a
	// long history before it reads the stream): no timeout; what arrived
	// meanwhile is there to read.
	clk := &fakeTimer{Clock: testclock.New(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC))}
	pr, pw := io.Pipe()
	b := watchIdle(pr, 45*time.Second, clk.Now, clk.after)
	for range 2 {
		clk.Advance(45 * time.Second)
		clk.fireTimer()
	}
	if clk.lastArmed() != 45*time.Second || b.expired {
		t.Fatalf("with no reader waiting: re-armed for %v, expired %v; want the whole limit again, not expired", clk.lastArmed(), b.expired)
	}
	got := reading(t, b)
	pw.Write([]byte("data: x\n\n"))
	if r := <-got; r.data != "data: x\n\n" || r.err != nil {
		t.Fatalf("read %q, %v", r.data, r.err)
	}
}

func TestIdleBodyClosedByTheCallerStaysQuiet(t *testing.T) {
	clk := &fakeTimer{Clock: testclock.New(time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC))}
	pr, _ := io.Pipe()
	b := watchIdle(pr, time.Second, clk.Now, clk.after)
	b.Close()
	armed := len(clk.armed)
	clk.Advance(time.Hour)
	clk.fireTimer() // a timer that fires as Close stops it
	if len(clk.armed) != armed || b.expired {
		t.Fatalf("a closed stream's timer re-armed (%v) or expired (%v)", clk.armed, b.expired)
	}
}
