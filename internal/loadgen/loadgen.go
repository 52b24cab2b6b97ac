// Package loadgen drives a memstore server with a timed, bounded mix of its
// real operations and measures them, as pgbench does a PostgreSQL server:
// it is the engine of `memstore bench`. It talks to the server only through
// package client, so what it measures is what any user of the API meets,
// on any deployment an operator points it at.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/memstore/memstore/client"
)

// The operations a run mixes, by the names the report and --mix use.
const (
	OpMemoryCreate = "memory.create"
	OpMemoryUpdate = "memory.update"
	OpMemoryGet    = "memory.get"
	OpMemoryList   = "memory.list"
	OpVersionList  = "version.list"
	OpChangesPoll  = "changes.poll"
	OpSnapshot     = "snapshot"
	OpEventAppend  = "event.append"
	OpWorkClaim    = "work.claim"
	// OpEventFanout is not drawn from the mix: it is the delay from an
	// event.append's send to its arrival at each SSE follower.
	OpEventFanout = "event.fanout"
)

// DefaultMix weighs the operations as an agent fleet's traffic does: mostly
// reads, a steady share of writes, and the rarer feed, snapshot and claim.
var DefaultMix = Mix{
	{OpMemoryGet, 30}, {OpMemoryList, 10}, {OpMemoryCreate, 10}, {OpMemoryUpdate, 20},
	{OpVersionList, 10}, {OpChangesPoll, 5}, {OpSnapshot, 2}, {OpEventAppend, 10}, {OpWorkClaim, 3},
}

// Weight is one operation's share of a Mix.
type Weight struct {
	Op     string
	Weight int
}

// Mix is the operations a run draws from, each in proportion to its weight.
type Mix []Weight

// ParseMix reads a mix written "memory.get=30,memory.update=20"; the names
// are those of the Op constants (without OpEventFanout).
func ParseMix(s string) (Mix, error) {
	var m Mix
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(w)
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("%q: write each operation as name=weight, such as memory.get=30", part)
		case !slices.ContainsFunc(DefaultMix, func(d Weight) bool { return d.Op == name }):
			return nil, fmt.Errorf("%q is not an operation; use %s", name, strings.Join(DefaultMix.names(), ", "))
		case err != nil || n < 0:
			return nil, fmt.Errorf("%s=%s: the weight must be a whole number, 0 or more", name, w)
		case slices.ContainsFunc(m, func(d Weight) bool { return d.Op == name }):
			return nil, fmt.Errorf("%s is given twice", name)
		}
		m = append(m, Weight{name, n})
	}
	if m.total() == 0 {
		return nil, errors.New("every weight is 0; give at least one operation a weight above 0")
	}
	return m, nil
}

func (m Mix) names() []string {
	var out []string
	for _, w := range m {
		out = append(out, w.Op)
	}
	return out
}

func (m Mix) total() int {
	n := 0
	for _, w := range m {
		n += w.Weight
	}
	return n
}

func (m Mix) weight(op string) int {
	for _, w := range m {
		if w.Op == op {
			return w.Weight
		}
	}
	return 0
}

// pick draws an operation by weight.
func (m Mix) pick(r *rand.Rand) string {
	n := r.IntN(m.total())
	for _, w := range m {
		if n < w.Weight {
			return w.Op
		}
		n -= w.Weight
	}
	return m[len(m)-1].Op
}

// Shape is a data set to build before the measured phase: Stores stores of
// Memories memories, each written Versions times, with ContentBytes of
// content per write.
type Shape struct {
	Stores       int `json:"stores"`
	Memories     int `json:"memories_per_store"`
	Versions     int `json:"versions_per_memory"`
	ContentBytes int `json:"content_bytes"`
}

// ParseShape reads a shape written STORESxMEMORIESxVERSIONS ("10x1000x5").
func ParseShape(s string, contentBytes int) (Shape, error) {
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return Shape{}, fmt.Errorf("%q: write the shape as STORESxMEMORIESxVERSIONS, such as 10x1000x5", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			return Shape{}, fmt.Errorf("%q: %q is not a whole number of 1 or more (STORESxMEMORIESxVERSIONS, such as 10x1000x5)", s, p)
		}
		n[i] = v
	}
	return Shape{Stores: n[0], Memories: n[1], Versions: n[2], ContentBytes: contentBytes}, nil
}

// Config is one run.
type Config struct {
	// Client is an admin client of the server: the run creates stores, an
	// agent, environments and sessions. Give it no retries, or a retried
	// failure is measured as one slow success.
	Client *client.Client
	// Duration and Requests bound the measured phase; it ends at whichever
	// comes first. Both must be above 0.
	Duration time.Duration
	Requests int64
	// Rate is the target of requests per second over all workers; 0 is
	// flat out.
	Rate float64
	// Concurrency is how many requests are in flight at most.
	Concurrency int
	// Followers is how many SSE followers watch the sessions event.append
	// writes to.
	Followers int
	Mix       Mix
	// Seed, when set, builds that data set first and keeps it afterwards;
	// nil makes one small store that the run deletes when it ends.
	Seed *Shape
	// ReuseSeed, when above 0, measures on up to that many stores an
	// earlier seed left (named SeedPrefix…) instead of making any: seed a
	// large data set once, measure it many times. Their memories are
	// listed at set-up.
	ReuseSeed int
	// ContentBytes is the size of what memory.create and memory.update
	// write.
	ContentBytes int
	// Progress, when set, is called about four times a second with the
	// run so far; Phase says what it is doing.
	Progress func(Progress)
}

// Progress is the run so far, for a live progress line.
type Progress struct {
	Phase    string // "seed", "run" or "cleanup"
	Elapsed  time.Duration
	Done     int64 // requests finished (seed writes during the seed)
	Total    int64 // requests the phase will make at most
	Errors   int64
	Deadline time.Duration // the run's Duration, during "run"
}

// check refuses a config that would not stop or could not run.
func (c Config) check() error {
	switch {
	case c.Client == nil:
		return errors.New("loadgen: no client")
	case c.Duration <= 0:
		return fmt.Errorf("duration %v: give a positive duration, such as 30s", c.Duration)
	case c.Requests <= 0:
		return fmt.Errorf("requests %d: give a positive number of requests", c.Requests)
	case c.Rate < 0:
		return fmt.Errorf("rate %v: give 0 (flat out) or a positive number of requests per second", c.Rate)
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency %d: give 1 or more", c.Concurrency)
	case c.Followers < 0:
		return fmt.Errorf("followers %d: give 0 or more", c.Followers)
	case c.ContentBytes < 1 || c.ContentBytes > maxContentBytes:
		return fmt.Errorf("content size %d: give between 1 and %d bytes (the API's limit per memory)", c.ContentBytes, maxContentBytes)
	case c.ReuseSeed < 0:
		return fmt.Errorf("reuse-seed %d: give 0 (make stores) or how many seeded stores to use", c.ReuseSeed)
	case c.ReuseSeed > 0 && c.Seed != nil:
		return errors.New("seed and reuse-seed: give one, a new data set or one an earlier seed left")
	case c.Mix.total() == 0:
		return errors.New("the mix has no operation with a weight above 0")
	}
	return nil
}

// Run builds the data set, runs the measured phase until a bound is met
// (or ctx ends), removes what it made for itself, and reports. A failed
// setup is an error; failed requests during the run are measured, not
// returned.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	fx, err := setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rep, runErr := run(ctx, cfg, fx)
	cleanupErr := fx.tearDown(cfg)
	if runErr != nil {
		return nil, runErr
	}
	if cleanupErr != nil {
		return rep, cleanupErr
	}
	return rep, nil
}

// run is the measured phase.
func run(ctx context.Context, cfg Config, fx *fixture) (*Report, error) {
	var limiter *rate.Limiter
	if cfg.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.Rate), 1)
	}
	var tickets, done, errs atomic.Int64

	// Followers watch until the measured phase ends, then a moment more
	// for the last appends' fan-out. The measured phase starts once every
	// follower's stream is open (or followersReady passed): with a
	// thousand followers, their connecting would otherwise be measured as
	// the server's latency.
	followCtx, stopFollowing := context.WithCancel(context.WithoutCancel(ctx))
	followers := make([]*recorder, cfg.Followers)
	var fwg, ready sync.WaitGroup
	if cfg.Mix.weight(OpEventAppend) > 0 {
		for i := range followers {
			followers[i] = newRecorder()
			fwg.Add(1)
			ready.Add(1)
			go func() {
				defer fwg.Done()
				fx.follow(followCtx, fx.eventSessions[i%len(fx.eventSessions)], followers[i], sync.OnceFunc(ready.Done))
			}()
		}
	}
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	select {
	case <-allReady:
	case <-time.After(followersReady):
	case <-ctx.Done():
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()

	stopProgress := StartProgress(cfg.Progress, func() Progress {
		return Progress{Phase: "run", Elapsed: time.Since(start), Done: done.Load(), Total: cfg.Requests, Errors: errs.Load(), Deadline: cfg.Duration}
	})

	recs := make([]*recorder, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = newRecorder()
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{fx: fx, rec: recs[i], id: i, rnd: rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(i))), content: cfg.ContentBytes}
			for runCtx.Err() == nil {
				if limiter != nil && limiter.Wait(runCtx) != nil {
					return
				}
				if tickets.Add(1) > cfg.Requests {
					return
				}
				err := w.do(runCtx, cfg.Mix.pick(w.rnd))
				if runCtx.Err() != nil {
					return // cut by the deadline: not measured
				}
				if err != nil {
					errs.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// A worker also stops when the rate limiter's next slot lies past the
	// deadline, before the deadline itself: only used-up tickets mean the
	// request bound ended the run.
	stoppedBy := "duration"
	switch {
	case ctx.Err() != nil:
		stoppedBy = "interrupted"
	case tickets.Load() > cfg.Requests:
		stoppedBy = "requests"
	}
	time.AfterFunc(fanoutGrace, stopFollowing)
	fwg.Wait()
	stopFollowing()
	stopProgress()

	names := slices.Clone(cfg.Mix.names())
	if cfg.Followers > 0 && cfg.Mix.weight(OpEventAppend) > 0 {
		names = append(names, OpEventFanout)
	}
	all := append(recs, followers...)
	ops := merge(names, all, elapsed)
	rep := &Report{BaseURL: cfg.Client.BaseURL(), Concurrency: cfg.Concurrency, TargetRate: cfg.Rate,
		ElapsedSeconds: round(elapsed.Seconds(), 2), Requests: done.Load(), Errors: errs.Load(), StoppedBy: stoppedBy,
		Seed: cfg.Seed, StoreIDs: fx.storeIDs(), Operations: ops}
	return rep, nil
}

// followersReady bounds the wait for the followers' streams to open before
// the measured phase; a follower that could not connect by then is
// measured as it retries.
const followersReady = time.Minute

// fanoutGrace is how long followers keep reading after the last request,
// so that the final appends' deliveries are measured too.
const fanoutGrace = 500 * time.Millisecond

// StartProgress calls report with snapshot() about four times a second
// until the returned stop is called (which reports a last time).
func StartProgress(report func(Progress), snapshot func() Progress) (stop func()) {
	if report == nil {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				report(snapshot())
				return
			case <-t.C:
				report(snapshot())
			}
		}
	}()
	return func() { close(quit); <-finished }
}
