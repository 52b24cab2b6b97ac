package dispatcher

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Egress is the rule for where deliveries may go. A webhook URL is chosen
// by an API caller and fetched by the server, so by default it may not
// reach the server's own network (loopback, link-local, private and
// unspecified addresses) nor use plain HTTP: otherwise a webhook would be a
// way to make the server send requests to what only it can reach. The
// operator lifts both for development and tests
// (memstore serve --webhooks-allow-private).
type Egress struct {
	AllowPrivate bool
	// Resolver looks host names up; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// lookupTimeout bounds the name lookup of a check, which a request waits
// for.
const lookupTimeout = 5 * time.Second

// CheckURL refuses a URL deliveries may not go to, saying why and what to
// do. Names are resolved now; the dialer checks the address again at each
// delivery, since a name may resolve elsewhere later.
func (g Egress) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("url %q is not an absolute http(s) URL; give the HTTPS URL deliveries should be sent to", raw)
	}
	if u.User != nil {
		return fmt.Errorf("url must not carry credentials; authenticate deliveries with the signing secret")
	}
	if g.AllowPrivate {
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("url %q uses plain HTTP; webhooks are sent over HTTPS only (the operator may allow HTTP with memstore serve --webhooks-allow-private)", raw)
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		addrs, err = r.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil {
			return fmt.Errorf("url host %q does not resolve (%v); give a host the server can reach", host, err)
		}
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("url host %q: %w", host, err)
		}
	}
	return nil
}

// checkAddr refuses an address of the server's own networks.
func checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%s is a loopback, link-local or private address, refused so that webhooks cannot reach the server's own network (the operator may allow it with memstore serve --webhooks-allow-private)", a)
	}
	return nil
}

// control is a net.Dialer Control that applies the rule to the address
// actually dialled.
func (g Egress) control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook dial %s: %w", address, err)
	}
	return checkAddr(ap.Addr())
}
