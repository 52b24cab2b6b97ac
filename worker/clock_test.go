package worker

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand, as a worker's Config.clock
// (its timers) or Config.Now (memory syncs). Advance fires the waits that
// come due, each in its own goroutine as time.AfterFunc does; waitPending
// tells the test when the worker has parked on its next waits.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{}
	changed chan struct{} // closed and replaced whenever timers changes
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{
		now:     time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		timers:  map[*fakeTimer]struct{}{},
		changed: make(chan struct{}),
	}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		go f()
		return func() bool { return false }
	}
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers[t] = struct{}{}
	c.changedLocked()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.timers[t]; !ok {
			return false
		}
		delete(c.timers, t)
		c.changedLocked()
		return true
	}
}

// Advance moves the clock on by d and fires every timer that comes due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			go t.f()
		}
	}
	c.changedLocked()
}

func (c *fakeClock) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitPending waits until exactly n timers are pending, that is until the
// worker has parked on its next n waits, and returns how long each has
// left, soonest first. It fails the test after 30 s.
func (c *fakeClock) waitPending(t *testing.T, n int) []time.Duration {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		if len(c.timers) == n {
			left := make([]time.Duration, 0, n)
			for tm := range c.timers {
				left = append(left, tm.at.Sub(c.now))
			}
			c.mu.Unlock()
			slices.Sort(left)
			return left
		}
		changed, have := c.changed, len(c.timers)
		c.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %d pending timers; %d are pending", n, have)
		}
	}
}
