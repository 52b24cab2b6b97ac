package client

import (
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// fakeTimer is the idle watcher's clock and timer, moved by the test: the
// timer fires only when the test says so.
type fakeTimer struct {
	mu    sync.Mutex
	now   time.Time
	armed []time.Duration // every delay the watcher armed the timer with
	fire  func()
}

func (f *fakeTimer) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTimer) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
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

func TestIdleBodyEndsASilentStreamOnly(t *testing.T) {
	clk := &fakeTimer{now: time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)}
	pr, pw := io.Pipe()
	b := watchIdle(pr, 45*time.Second, clk.Now, clk.after)
	if clk.lastArmed() != 45*time.Second {
		t.Fatalf("first timer %v, want the whole limit", clk.lastArmed())
	}
	read := func() (string, error) {
		buf := make([]byte, 64)
		n, err := b.Read(buf)
		return string(buf[:n]), err
	}

	// A keep-alive 30 s in: when the timer fires at 45 s, the stream has
	// been silent for 15 s only, so the timer is re-armed for the rest.
	clk.advance(30 * time.Second)
	go pw.Write([]byte(": keepalive\n\n"))
	if got, err := read(); got != ": keepalive\n\n" || err != nil {
		t.Fatalf("read %q, %v", got, err)
	}
	clk.advance(15 * time.Second)
	clk.fireTimer()
	if clk.lastArmed() != 30*time.Second {
		t.Fatalf("re-armed for %v, want the 30 s left since the keep-alive", clk.lastArmed())
	}

	// Then silence for the whole limit: the body is closed under a
	// pending read, which fails with ErrStreamIdle, and so does every
	// read after it.
	done := make(chan error, 1)
	go func() { _, err := read(); done <- err }()
	clk.advance(30 * time.Second)
	clk.fireTimer()
	if err := <-done; !errors.Is(err, ErrStreamIdle) {
		t.Fatalf("pending read after the limit = %v, want ErrStreamIdle", err)
	}
	if _, err := read(); !errors.Is(err, ErrStreamIdle) {
		t.Fatalf("later read = %v, want ErrStreamIdle", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

func TestIdleBodyClosedByTheCallerStaysQuiet(t *testing.T) {
	clk := &fakeTimer{now: time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)}
	pr, _ := io.Pipe()
	b := watchIdle(pr, time.Second, clk.Now, clk.after)
	b.Close()
	armed := len(clk.armed)
	clk.advance(time.Hour)
	clk.fireTimer() // a timer that fires as Close stops it
	if len(clk.armed) != armed || b.expired {
		t.Fatalf("a closed stream's timer re-armed (%v) or expired (%v)", clk.armed, b.expired)
	}
}
