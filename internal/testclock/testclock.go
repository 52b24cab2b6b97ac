// Package testclock is the settable clock tests inject where code takes
// the time from a func() time.Time: it stands still until the test moves
// it, so an expiry or a lapsed lease is reached by Advance, not by
// sleeping. It is safe for concurrent use: the server under test reads it
// from its handlers while the test moves it.
package testclock

import (
	"sync"
	"time"
)

// Clock is a stopped clock that moves only when told.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock stopped at t.
func New(t time.Time) *Clock {
	return &Clock{t: t}
}

// Now is the clock's time; pass the method value where a now func is
// asked for.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
