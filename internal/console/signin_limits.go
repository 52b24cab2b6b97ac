package console

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// Sign-in limits. Each password check costs the server an Argon2id hash,
// and each one is a guess, so they are rationed three ways:
//
//   - per client address: a burst of 10, then one every 6 s (10 a minute),
//     whatever names it tries, so junk names cannot buy an address more
//     guesses;
//   - per address and name: a burst of 5, then one every 30 s, so one
//     address guessing one password gets 2 a minute;
//   - per name: a burst of 20 failed checks, then one a minute, shared by
//     every address — but it holds back only addresses that have already
//     failed on that name, so an attack spread over many addresses cannot
//     lock the real user, signing in from a clean address, out.
//
// Only attempts that reach the password check are counted: a refused
// attempt costs nothing, so it cannot be used to drain someone else's
// budget either.
const (
	addressBurst = 10
	addressEvery = 6 * time.Second
	pairBurst    = 5
	pairEvery    = 30 * time.Second
	nameBurst    = 20
	nameEvery    = time.Minute
)

// maxSignInEntries bounds the limits' memory (about 250 bytes an entry).
// When full, the entry seen least recently is forgotten: an attacker's own
// address, which every one of its attempts touches, is the last to go, so
// filling the table with junk names cannot hand it a fresh burst.
const maxSignInEntries = 32_768

// refusalLogEvery is how often a line sums up the refused sign-ins; one
// line per refusal let an attack write 110,925 lines in 40 s.
const refusalLogEvery = time.Minute

// signInLimits holds the sign-in budgets of recently seen addresses and
// names.
type signInLimits struct {
	log     *slog.Logger
	mu      sync.Mutex
	entries *simplelru.LRU[string, *signInEntry]
	refused refusalSummary
}

// signInEntry is one budget. failed marks an address-and-name entry whose
// last check failed: the per-name limit holds such an address back.
type signInEntry struct {
	budget *rate.Limiter
	failed bool
}

func newSignInLimits(log *slog.Logger) *signInLimits {
	// NewLRU fails only for a size below 1.
	entries, _ := simplelru.NewLRU[string, *signInEntry](maxSignInEntries, nil)
	return &signInLimits{log: log, entries: entries}
}

// signInRefusal says which limit refused an attempt, as the person reads
// it.
type signInRefusal string

const (
	refusedAddress signInRefusal = "Too many sign-in attempts from your address. Wait a minute, then try again."
	refusedName    signInRefusal = "Too many failed sign-ins for this name. Wait a few minutes, then try again."
)

// keys are the three entries of an attempt. Names are hashed so that a
// long name costs no more memory than a short one; IPv6 clients are
// counted by their /64, which one subscriber usually holds whole.
func signInKeys(name, addr string) (address, pair, perName string) {
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		addr = netip.PrefixFrom(a, 64).Masked().String()
	}
	h := sha256.Sum256([]byte(name))
	n := string(h[:16])
	return "a\x00" + addr, "p\x00" + addr + "\x00" + n, "n\x00" + n
}

// allow reports whether an attempt to sign in as name from addr may go to
// the password check, counting it when it may; "" means allowed.
func (l *signInLimits) allow(ctx context.Context, now time.Time, name, addr string) signInRefusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	ak, pk, nk := signInKeys(name, addr)
	address := l.entry(ak, addressEvery, addressBurst)
	refusal := signInRefusal("")
	if address.budget.TokensAt(now) < 1 {
		refusal = refusedAddress
	} else {
		// Created only for an address with budget left: refused attempts
		// add nothing to the table.
		pair := l.entry(pk, pairEvery, pairBurst)
		switch {
		case pair.budget.TokensAt(now) < 1:
			refusal = refusedName
		case pair.failed && l.nameExhausted(nk, now):
			refusal = refusedName
		default:
			address.budget.AllowN(now, 1)
			pair.budget.AllowN(now, 1)
		}
	}
	if refusal != "" {
		l.refused.add(ctx, l.log, now, name, addr)
	}
	return refusal
}

// nameExhausted reports whether name has no failures left to spend.
func (l *signInLimits) nameExhausted(key string, now time.Time) bool {
	e, ok := l.entries.Get(key)
	return ok && e.budget.TokensAt(now) < 1
}

// checked records the outcome of a password check allow let through.
func (l *signInLimits) checked(now time.Time, name, addr string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, pk, nk := signInKeys(name, addr)
	pair := l.entry(pk, pairEvery, pairBurst)
	pair.failed = !ok
	if !ok {
		l.entry(nk, nameEvery, nameBurst).budget.AllowN(now, 1)
	}
}

// entry returns the entry of key, made with a full budget if it is not
// held, and marks it seen.
func (l *signInLimits) entry(key string, every time.Duration, burst int) *signInEntry {
	if e, ok := l.entries.Get(key); ok {
		return e
	}
	e := &signInEntry{budget: rate.NewLimiter(rate.Every(every), burst)}
	l.entries.Add(key, e)
	return e
}

// refusalSummary counts refused sign-ins between log lines.
type refusalSummary struct {
	// last is when the last line was written; zero before the first.
	last time.Time
	// count, addrs and top describe the refusals since that line.
	count           int
	addrs           map[string]int
	topAddr, topFor string
}

// maxSummaryAddrs bounds the addresses one summary counts separately.
const maxSummaryAddrs = 1024

// add counts a refusal and writes a line when none was written in the
// last refusalLogEvery: the first refusal of a quiet period is logged at
// once, the rest are summed up in the next line.
func (s *refusalSummary) add(ctx context.Context, log *slog.Logger, now time.Time, name, addr string) {
	if s.addrs == nil {
		s.addrs = map[string]int{}
	}
	s.count++
	if _, ok := s.addrs[addr]; ok || len(s.addrs) < maxSummaryAddrs {
		s.addrs[addr]++
		if s.addrs[addr] > s.addrs[s.topAddr] {
			s.topAddr, s.topFor = addr, name
		}
	}
	if !s.last.IsZero() && now.Sub(s.last) < refusalLogEvery {
		return
	}
	attrs := []any{"refused", s.count, "addresses", len(s.addrs), "remote_addr", s.topAddr, "remote_addr_refused", s.addrs[s.topAddr], "user", s.topFor}
	if !s.last.IsZero() {
		attrs = append(attrs, "since", s.last)
	}
	// remote_addr and user are those refused most since the last line.
	log.WarnContext(ctx, "console sign-in refused: too many attempts", attrs...)
	*s = refusalSummary{last: now}
}
