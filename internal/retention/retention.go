// Package retention is the version retention policy of a memory store:
// which of a memory's versions the background pruner may delete. It is its
// own package because the same policy is written on a serve flag, stored on
// a store, shown on the wire and in the console, and applied by storage;
// one parser and one wording keep those four in step.
package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Policy says which versions of each memory are kept. The zero value keeps
// every version (memstore's default, as before retention existed). Whatever
// the policy, the pruner never deletes a memory's newest version (it holds
// the memory's content, or records its deletion) nor a redacted version (the
// record of who redacted what).
type Policy struct {
	// KeepLast, when above 0, keeps the newest KeepLast versions of each
	// memory (redaction records not counted).
	KeepLast int
	// MaxAge, when above 0, keeps the versions younger than MaxAge.
	MaxAge time.Duration
}

// Bounds of a policy: a keep-last above MaxKeepLast is keep-all in practice,
// and an age below MinMaxAge would race the writer that made the version.
const (
	MaxKeepLast = 1_000_000
	MinMaxAge   = time.Second
	MaxMaxAge   = 100 * 365 * 24 * time.Hour
)

// Kinds of policy, as the wire and the flag name them.
const (
	KindKeepAll  = "keep_all"
	KindKeepLast = "keep_last"
	KindMaxAge   = "max_age"
)

// KeepsAll reports whether the policy never prunes.
func (p Policy) KeepsAll() bool { return p.KeepLast == 0 && p.MaxAge == 0 }

// Kind is KindKeepAll, KindKeepLast or KindMaxAge.
func (p Policy) Kind() string {
	switch {
	case p.KeepLast > 0:
		return KindKeepLast
	case p.MaxAge > 0:
		return KindMaxAge
	default:
		return KindKeepAll
	}
}

// String is the policy in the form Parse reads: keep_all, keep_last=N or
// max_age=DURATION.
func (p Policy) String() string {
	switch p.Kind() {
	case KindKeepLast:
		return KindKeepLast + "=" + strconv.Itoa(p.KeepLast)
	case KindMaxAge:
		return KindMaxAge + "=" + p.MaxAge.String()
	default:
		return KindKeepAll
	}
}

// Describe says what the policy keeps, for people (the console, logs).
func (p Policy) Describe() string {
	switch p.Kind() {
	case KindKeepLast:
		if p.KeepLast == 1 {
			return "the newest version of each memory"
		}
		return fmt.Sprintf("the newest %d versions of each memory", p.KeepLast)
	case KindMaxAge:
		return "versions younger than " + p.MaxAge.String() + " (and each memory's newest)"
	default:
		return "every version"
	}
}

// Check refuses a policy out of bounds, saying what to send instead.
func (p Policy) Check() error {
	switch {
	case p.KeepLast != 0 && p.MaxAge != 0:
		return fmt.Errorf("give either a number of versions to keep or an age, not both")
	case p.KeepLast < 0 || p.KeepLast > MaxKeepLast:
		return fmt.Errorf("keep_last %d: keep 1 to %d versions of each memory (or keep all)", p.KeepLast, MaxKeepLast)
	case p.MaxAge < 0 || (p.MaxAge > 0 && p.MaxAge < MinMaxAge) || p.MaxAge > MaxMaxAge:
		return fmt.Errorf("max_age %s: give an age from %s to %s (or keep all)", p.MaxAge, MinMaxAge, MaxMaxAge)
	}
	return nil
}

// Parse reads keep_all, keep_last=N or max_age=DURATION (a Go duration such
// as 720h; the form of String). The error says which forms there are.
func Parse(s string) (Policy, error) {
	const forms = "use keep_all, keep_last=N (the newest N versions of each memory) or max_age=DURATION (e.g. max_age=720h)"
	kind, value, _ := strings.Cut(strings.TrimSpace(s), "=")
	var p Policy
	switch kind {
	case KindKeepAll:
		if value != "" {
			return p, fmt.Errorf("%q: keep_all takes no value; %s", s, forms)
		}
		return p, nil
	case KindKeepLast:
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return p, fmt.Errorf("%q: keep_last needs a whole number of versions from 1 to %d; %s", s, MaxKeepLast, forms)
		}
		p.KeepLast = n
	case KindMaxAge:
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return p, fmt.Errorf("%q: max_age needs a duration such as 720h or 90m; %s", s, forms)
		}
		p.MaxAge = d
	default:
		return p, fmt.Errorf("%q: %s", s, forms)
	}
	if err := p.Check(); err != nil {
		return Policy{}, fmt.Errorf("%q: %w", s, err)
	}
	return p, nil
}
