package webhooks

import (
	"fmt"
	"time"
)

// Delivery states.
const (
	// Pending: not yet accepted by the receiver; retried when due.
	Pending = "pending"
	// Delivered: the receiver answered 2xx.
	Delivered = "delivered"
	// Failed: retried for the whole retry window without success.
	Failed = "failed"
)

// Delivery is one event's delivery to one endpoint, as stored. Seq orders
// the deliveries (the outbox order).
type Delivery struct {
	Seq        int64
	EventID    string
	EventType  string
	EndpointID string
	OrderKey   string
	Payload    []byte
	State      string
	Attempts   int
	CreatedAt  time.Time
	// NextAttemptAt is when the delivery is due.
	NextAttemptAt time.Time
	// LeaseUntil and LeaseToken name the dispatcher sending it now; the
	// lease lapses so that a dispatcher that died mid-send is replaced.
	LeaseUntil *time.Time
	LeaseToken string
}

// Attempt is one try of a delivery, as recorded.
type Attempt struct {
	AttemptedAt time.Time
	// StatusCode is the receiver's answer; 0 when none came (Error says
	// why).
	StatusCode      int
	LatencyMS       int64
	ResponseExcerpt string
	Error           string
}

// Accepted says whether the receiver took the delivery (a 2xx answer).
func (a Attempt) Accepted() bool { return a.StatusCode >= 200 && a.StatusCode <= 299 }

// Result is what became of the delivery Seq in a dispatcher's round: the
// attempt made of it, or nil when none was (its endpoint could not be
// read), in which case the dispatcher gives the delivery back.
type Result struct {
	Seq     int64
	Attempt *Attempt
}

// Policy bounds retries. Zero fields take the defaults.
type Policy struct {
	// FirstBackoff is the wait after the first failure; each failure
	// doubles it, up to MaxBackoff.
	FirstBackoff time.Duration
	MaxBackoff   time.Duration
	// RetryFor is how long after it was created a delivery keeps being
	// retried; then it fails and its endpoint is disabled.
	RetryFor time.Duration
	// Lease is how long a claimed delivery stays with its dispatcher.
	Lease time.Duration
	// KeepFor is how long settled deliveries and their attempts stay
	// listable before they are pruned.
	KeepFor time.Duration
}

// Default policy values.
const (
	DefaultFirstBackoff = 5 * time.Second
	DefaultMaxBackoff   = time.Hour
	DefaultRetryFor     = 24 * time.Hour
	DefaultLease        = time.Minute
	DefaultKeepFor      = 30 * 24 * time.Hour
)

// WithDefaults fills p's zero fields.
func (p Policy) WithDefaults() Policy {
	if p.FirstBackoff <= 0 {
		p.FirstBackoff = DefaultFirstBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.RetryFor <= 0 {
		p.RetryFor = DefaultRetryFor
	}
	if p.Lease <= 0 {
		p.Lease = DefaultLease
	}
	if p.KeepFor <= 0 {
		p.KeepFor = DefaultKeepFor
	}
	return p
}

// Backoff is the wait after the n-th failed attempt (n ≥ 1).
func (p Policy) Backoff(n int) time.Duration {
	d := p.FirstBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Pick chooses, from pending deliveries in Seq order, those a dispatcher
// may send at now, at most limit: per endpoint and order key only the
// oldest pending one (so that a session's events arrive in order and a
// retried one holds back those after it), and only when it is due and no
// live lease holds it.
func Pick(pending []Delivery, now time.Time, limit int) []Delivery {
	type group struct{ endpoint, key string }
	seen := map[group]bool{}
	var out []Delivery
	for _, d := range pending {
		g := group{d.EndpointID, d.OrderKey}
		if seen[g] {
			continue
		}
		seen[g] = true
		if d.NextAttemptAt.After(now) || (d.LeaseUntil != nil && d.LeaseUntil.After(now)) {
			continue
		}
		out = append(out, d)
		if len(out) == limit {
			break
		}
	}
	return out
}

// Claim marks d as claimed by token until now+p.Lease.
func (p Policy) Claim(d Delivery, token string, now time.Time) Delivery {
	until := now.Add(p.Lease)
	d.LeaseUntil, d.LeaseToken = &until, token
	return d
}

// AfterAttempt folds an attempt's outcome into d: delivered on 2xx; otherwise
// due again after the backoff, or failed once the retry window is over,
// in which case disable is the reason to disable the endpoint with.
func (p Policy) AfterAttempt(d Delivery, a Attempt) (next Delivery, disable string) {
	d.Attempts++
	d.LeaseUntil, d.LeaseToken = nil, ""
	if a.Accepted() {
		d.State = Delivered
		return d, ""
	}
	due := a.AttemptedAt.Add(p.Backoff(d.Attempts))
	if due.Sub(d.CreatedAt) > p.RetryFor {
		d.State = Failed
		return d, fmt.Sprintf("delivery of event %s failed for %s (%d attempts, last: %s); fix the receiver, then set state to enabled",
			d.EventID, p.RetryFor, d.Attempts, Outcome(a))
	}
	d.NextAttemptAt = due
	return d, ""
}

// Finish is what recording r changes of d, the delivery as stored now,
// claimed under token. Only the holder of the lease records an outcome:
// when the lease lapsed and another dispatcher took over (or the delivery
// settled meanwhile), save is false and the attempt only goes on record.
// A delivery given back (r.Attempt nil) is due again at once, nothing
// counted. disable, when not "", is the reason to disable the endpoint
// with (see Endpoint.Disable).
func (p Policy) Finish(d Delivery, token string, r Result) (next Delivery, save bool, disable string) {
	if d.State != Pending || d.LeaseToken != token {
		return d, false, ""
	}
	if r.Attempt == nil {
		d.LeaseUntil, d.LeaseToken = nil, ""
		return d, true, ""
	}
	next, disable = p.AfterAttempt(d, *r.Attempt)
	return next, true, disable
}

// Outcome says in a few words how an attempt ended.
func Outcome(a Attempt) string {
	if a.StatusCode == 0 {
		return "no answer: " + a.Error
	}
	return fmt.Sprintf("HTTP %d", a.StatusCode)
}
