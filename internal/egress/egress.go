// Package egress is the one rule for where memstore opens connections to a
// URL someone else chose: webhook receivers today, MCP servers and skill
// downloads as they arrive. Such a URL is picked by an API caller but
// fetched by the server (or a worker), so without a rule it is a way to
// make memstore call what only memstore can reach: its loopback, the
// cloud's metadata service, the private network, a carrier-grade NAT's
// neighbours.
//
// The rule is an allowlist, not a deny-list: an address is accepted only
// when IANA's IPv4 and IPv6 special-purpose address registries call it
// globally reachable, and an IPv6 address that carries an IPv4 one
// (IPv4-mapped, IPv4-compatible, NAT64, 6to4) is judged by the IPv4 address
// it leads to. A new kind of special address is then refused until it is
// known to be global, where a deny-list accepted every form nobody thought
// of (issue 25: 100.64.0.0/10, [::127.0.0.1], [64:ff9b::7f00:1], …).
//
// Names are checked twice: when the URL is stored (so the caller hears at
// once) and on every connection (Policy.Control), since a name may resolve
// somewhere else later (DNS rebinding).
package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Policy is the egress rule of one kind of destination. The zero value is
// the strict rule.
type Policy struct {
	// AllowPrivate lifts the rule, and the HTTPS requirement, for
	// development and tests, where receivers run on the same machine.
	AllowPrivate bool
	// Override names how the operator sets AllowPrivate (a flag), so that
	// a refusal can say it.
	Override string
	// Resolver looks host names up; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// lookupTimeout bounds the name lookup of CheckURL, which a request waits
// for.
const lookupTimeout = 5 * time.Second

// CheckURL refuses a URL connections may not go to, saying why and what to
// do. what names the URL in messages ("url", "mcp_servers[0].url").
func (p Policy) CheckURL(ctx context.Context, what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%s %q is not an absolute http(s) URL; give the HTTPS URL to connect to", what, raw)
	}
	if u.User != nil {
		return fmt.Errorf("%s must not carry credentials (user:password@); send them another way", what)
	}
	if p.AllowPrivate {
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%s %q uses plain HTTP; only HTTPS is allowed%s", what, raw, p.hint("HTTP"))
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := p.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		addrs, err = r.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil {
			return fmt.Errorf("%s host %q does not resolve (%v); give a host the server can reach", what, host, err)
		}
	}
	for _, a := range addrs {
		if err := p.checkAddr(a); err != nil {
			return fmt.Errorf("%s host %q: %w", what, host, err)
		}
	}
	return nil
}

// Control is a net.Dialer Control: it applies the rule to the address
// actually dialled, after the name was resolved, so a name that resolved
// to a global address when the URL was stored and to a private one now is
// still refused.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	if p.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return p.checkAddr(ap.Addr())
}

// Dialer is a net.Dialer that connects only where the policy allows.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: p.Control}
}

func (p Policy) checkAddr(a netip.Addr) error {
	if why := Refusal(a); why != "" {
		return fmt.Errorf("%s is not a globally reachable unicast address (%s), refused so that memstore cannot be made to call its own network%s", a, why, p.hint("it"))
	}
	return nil
}

func (p Policy) hint(what string) string {
	if p.Override == "" {
		return ""
	}
	return fmt.Sprintf(" (for development, the operator may allow %s with %s)", what, p.Override)
}

// Refusal says why a is not a destination ("" when it is one): the
// special-purpose block it falls in.
func Refusal(a netip.Addr) string {
	a = a.WithZone("")
	if a.Is4In6() {
		return refusal4(a.Unmap(), "IPv4-mapped ")
	}
	if a.Is4() {
		return refusal4(a, "")
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return refusal4(netip.AddrFrom4([4]byte(b[12:16])), "NAT64 64:ff9b::/96 of ")
	case sixToFour.Contains(a):
		return refusal4(netip.AddrFrom4([4]byte(b[2:6])), "6to4 2002::/16 of ")
	}
	for _, g := range global6 {
		if g.Contains(a) {
			return ""
		}
	}
	for _, s := range special6 {
		if s.prefix.Contains(a) {
			return s.prefix.String() + ", " + s.name
		}
	}
	if !globalUnicast6.Contains(a) {
		return "outside 2000::/3, the IPv6 global unicast space"
	}
	return ""
}

// refusal4 is Refusal for an IPv4 address; via names the IPv6 form that
// carried it.
func refusal4(a netip.Addr, via string) string {
	for _, g := range global4 {
		if g == a {
			return ""
		}
	}
	for _, s := range special4 {
		if s.prefix.Contains(a) {
			return via + s.prefix.String() + ", " + s.name
		}
	}
	return ""
}

type block struct {
	prefix netip.Prefix
	name   string
}

func blk(prefix, name string) block { return block{netip.MustParsePrefix(prefix), name} }

// special4 is every block of IANA's IPv4 special-purpose address registry
// that is not globally reachable, with multicast and the broadcast address.
// Blocks the registry marks global (AS112, AMT, 192.31.196.0/24,
// 192.175.48.0/24) are not listed, so they pass.
var special4 = []block{
	blk("0.0.0.0/8", `"this network"`),
	blk("10.0.0.0/8", "private"),
	blk("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
	blk("127.0.0.0/8", "loopback"),
	blk("169.254.0.0/16", "link-local"),
	blk("172.16.0.0/12", "private"),
	blk("192.0.0.0/24", "IETF protocol assignments"),
	blk("192.0.2.0/24", "documentation (TEST-NET-1)"),
	blk("192.88.99.0/24", "deprecated 6to4 relay anycast"),
	blk("192.168.0.0/16", "private"),
	blk("198.18.0.0/15", "benchmarking"),
	blk("198.51.100.0/24", "documentation (TEST-NET-2)"),
	blk("203.0.113.0/24", "documentation (TEST-NET-3)"),
	blk("224.0.0.0/4", "multicast"),
	blk("255.255.255.255/32", "limited broadcast"),
	blk("240.0.0.0/4", "reserved"),
}

// global4 are the addresses inside a refused block that the registry calls
// globally reachable (PCP and TURN anycast in 192.0.0.0/24).
var global4 = []netip.Addr{netip.MustParseAddr("192.0.0.9"), netip.MustParseAddr("192.0.0.10")}

// IPv6 forms that carry an IPv4 address and are judged by it. The rest of
// ::/96 (IPv4-compatible, deprecated), 64:ff9b:1::/48 (local-use NAT64)
// and Teredo (2001::/32, inside 2001::/23) are refused outright.
var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// special6 is every block of IANA's IPv6 special-purpose address registry
// that is not globally reachable; anything outside 2000::/3 (loopback,
// unspecified, IPv4-compatible, unique local, link-local, multicast, …) is
// refused as well.
var special6 = []block{
	blk("::1/128", "loopback"),
	blk("::/128", "unspecified"),
	blk("::/96", "IPv4-compatible, deprecated"),
	blk("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
	blk("100::/64", "discard-only"),
	blk("2001::/32", "Teredo"),
	blk("2001:2::/48", "benchmarking"),
	blk("2001:db8::/32", "documentation"),
	blk("2001::/23", "IETF protocol assignments"),
	blk("3fff::/20", "documentation"),
	blk("5f00::/16", "SRv6 segment identifiers"),
	blk("fc00::/7", "unique local (private)"),
	blk("fe80::/10", "link-local"),
	blk("fec0::/10", "site-local, deprecated"),
	blk("ff00::/8", "multicast"),
}

// global6 are the blocks inside 2001::/23 the registry calls globally
// reachable.
var global6 = []netip.Prefix{
	netip.MustParsePrefix("2001:1::1/128"),
	netip.MustParsePrefix("2001:1::2/128"),
	netip.MustParsePrefix("2001:1::3/128"),
	netip.MustParsePrefix("2001:3::/32"),
	netip.MustParsePrefix("2001:4:112::/48"),
	netip.MustParsePrefix("2001:20::/28"),
	netip.MustParsePrefix("2001:30::/28"),
}
