package worker

import "time"

// clock is where the worker's own timing reads the time and waits: the poll
// loop's pacing and backoff, the heartbeat period and the lease's lapse
// check, the stream's reconnect backoff, the result post's retries and the
// idle countdown. It is the real clock outside tests; a test swaps in one
// it moves by hand (Config.clock), so that a 5 s lease or a 2 s backoff
// costs no wall time and the test decides exactly when each wait ends.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is time itself.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
