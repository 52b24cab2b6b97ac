package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// Why an item's run was cut short. They are the causes of the item's
// context, so the tool call that was running reports them to the agent
// ("[cancelled (the worker is shutting down): …]") and the runner knows
// whether a result may still be posted.
var (
	errShutdown      = errors.New("the worker is shutting down")
	errStopRequested = errors.New("the work item was asked to stop")
	errLeaseLost     = errors.New("the worker lost the work item's lease")
	errLeaseRefused  = errors.New("the server refused the work item's heartbeat")
)

// Heartbeat timing. Before the server has said how long a lease lasts the
// worker assumes 30 s; afterwards it beats every half TTL, between 1 s and
// 30 s, so that one lost beat never costs the lease.
const (
	assumedLeaseTTL      = 30 * time.Second
	minHeartbeatInterval = time.Second
	maxHeartbeatInterval = 30 * time.Second
)

// leaseEnd is why heartbeating stopped.
type leaseEnd int

const (
	leaseHeld    leaseEnd = iota // the item finished first; the worker still holds the lease
	leaseStopped                 // the server stopped the item (state stopped, or the lease was not extended)
	leaseLost                    // 412, or no beat succeeded for a whole TTL: someone else may hold it now
	leaseRefused                 // another 4xx: the server will not renew it, but nobody else holds it
)

// beatInterval is the heartbeat period for a lease of ttl: half of it, so
// that one lost beat never costs the lease, kept between 1 s (a server
// granting very short leases is not hammered) and 30 s.
func beatInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/2, minHeartbeatInterval), maxHeartbeatInterval)
}

// lease keeps one work item's lease alive while the item runs, and tells
// the item when to wind down: on a graceful stop (state stopping), a forced
// one (stopped), or a lost lease. It runs in its own goroutine from the very
// first moment of the item, before the session is even fetched, because
// every second without a heartbeat after the ack is a second in which the
// server may hand the item to another worker.
type lease struct {
	c        *client.Client // the item's credential
	env      string
	work     string
	expected string        // expected_last_heartbeat of the next beat
	every    time.Duration // Config.HeartbeatInterval; 0 derives it from the TTL
	// desiredTTL is Config.LeaseTTL in whole seconds; 0 asks for none.
	desiredTTL int64
	clock      clock
	log        *slog.Logger

	// ttl is the last TTL the server granted, in nanoseconds; the runner
	// reads it as the window in which a tool result is worth retrying.
	ttl atomic.Int64
}

func newLease(c *client.Client, work api.Work, expected string, every time.Duration, clk clock, log *slog.Logger) *lease {
	if expected == "" {
		expected = api.NoHeartbeat
	}
	l := &lease{c: c, env: work.EnvironmentID, work: work.ID, expected: expected, every: every, clock: clk, log: log}
	l.ttl.Store(int64(assumedLeaseTTL))
	return l
}

// TTL is the lease's current time to live.
func (l *lease) TTL() time.Duration { return time.Duration(l.ttl.Load()) }

// run beats until ctx ends or the lease does, and calls stop (at most once
// per distinct reason) when the item must wind down. The item's final sync
// and flush happen after its tools stop, so ctx is not the item's run
// context: heartbeats go on through them, and a graceful stop keeps the
// lease until the item has flushed its memory.
func (l *lease) run(ctx context.Context, stop func(cause error)) leaseEnd {
	interval := beatInterval(assumedLeaseTTL)
	lastOK := l.clock.Now()
	// lastSentOK is when the last beat that landed was sent: the server
	// extended the lease at some moment after it, so the lease cannot have
	// lapsed before lastSentOK plus the TTL.
	lastSentOK := lastOK
	stopping := false
	failures := 0 // transient failures since the last beat that landed
	for {
		sent := l.clock.Now()
		beatCtx, cancel := context.WithTimeout(ctx, max(interval, minHeartbeatInterval))
		hb, err := l.c.HeartbeatWork(beatCtx, l.env, l.work, api.WorkHeartbeatParams{ExpectedLastHeartbeat: l.expected, DesiredTTLSeconds: l.desiredTTL})
		cancel()
		if ctx.Err() != nil {
			return leaseHeld
		}
		state, stale := client.StaleHeartbeat(err)
		if stale && failures > 0 && l.ownLostBeat(state, lastSentOK) {
			// A beat whose answer never came (a timeout, a cut
			// connection) had landed: the server holds its heartbeat,
			// not the one this beat expected. Nobody else can hold the
			// lease, since it has not lapsed; go on from the server's.
			l.log.Info("a heartbeat whose answer was lost had reached the server; going on from the heartbeat it holds",
				"last_heartbeat", *state.LastHeartbeat)
			l.expected = *state.LastHeartbeat
			continue
		}
		if stale {
			attrs := []any{"err", err}
			if state != nil {
				attrs = append(attrs, "server_state", state.State, "server_ttl_seconds", state.TTLSeconds)
			}
			l.log.Warn("lease lost: the server gave the work item to another claim; stopping its tools and leaving it alone (not stopping it)", attrs...)
			stop(errLeaseLost)
			return leaseLost
		}
		switch {
		case err == nil:
			failures = 0
			l.expected = hb.LastHeartbeat
			lastOK, lastSentOK = l.clock.Now(), sent
			if hb.TTLSeconds > 0 {
				ttl := max(time.Duration(hb.TTLSeconds)*time.Second, time.Second)
				l.ttl.Store(int64(ttl))
				interval = beatInterval(ttl)
			}
			switch {
			case hb.State == api.WorkStopped || !hb.LeaseExtended:
				l.log.Info("the work item was stopped on the server; shutting the session down", "state", hb.State)
				stop(errStopRequested)
				return leaseStopped
			case hb.State == api.WorkStopping && !stopping:
				stopping = true
				l.log.Info("the work item was asked to stop; shutting the session down after its memory is flushed")
				stop(errStopRequested)
			}
		case permanent(err):
			l.log.Error("heartbeat refused; shutting the session down", "err", err)
			stop(errLeaseRefused)
			return leaseRefused
		default:
			ttl := l.TTL()
			if since := l.clock.Now().Sub(lastOK); since > ttl {
				l.log.Error("no heartbeat succeeded for a whole lease TTL; the lease has lapsed, so the session is shut down and the item left to the queue",
					"since_last_heartbeat", since.Round(time.Second), "ttl", ttl, "err", err)
				stop(errLeaseLost)
				return leaseLost
			}
			failures++
		}
		if l.every > 0 {
			interval = l.every
		}
		wait := interval
		if failures > 0 {
			// This loop owns the beat's retries (its client makes none):
			// a failed beat is tried again soon, backing off from 1 s up
			// to the beat interval, one warning each.
			wait = backoff(failures, minHeartbeatInterval, interval)
			l.log.Warn("heartbeat failed; retrying", "attempt", failures, "retry_in", wait.Round(time.Millisecond), "err", err)
		}
		if !sleep(ctx, l.clock, wait) {
			return leaseHeld
		}
	}
}

// ownLostBeat reports whether a 412 after beats whose answers were lost
// can only be one of those beats having landed: the item is still live on
// the server with a heartbeat, and too little time has passed since the
// last beat that landed was sent for the lease to have lapsed and the item
// to have gone to another claim.
func (l *lease) ownLostBeat(state *api.WorkLeaseState, lastSentOK time.Time) bool {
	if state == nil || state.LastHeartbeat == nil || *state.LastHeartbeat == l.expected {
		return false
	}
	if state.State != api.WorkActive && state.State != api.WorkStopping {
		return false
	}
	return l.clock.Now().Sub(lastSentOK) < l.TTL()
}
