package egress

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every form issue 25 found accepted, and the ones refused before, are
// refused; global addresses in every notation pass.
func TestOnlyGlobalUnicastAddressesPass(t *testing.T) {
	ctx := context.Background()
	strict := Policy{Override: "--dev-flag"}
	open := Policy{AllowPrivate: true}
	for _, c := range []struct {
		url  string
		want string // "" accepted, else part of the refusal
	}{
		{"https://93.184.215.14/hook", ""},
		{"https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hook", ""},
		{"https://[::ffff:93.184.215.14]/hook", ""},
		{"https://[64:ff9b::5db8:d70e]/hook", ""}, // NAT64 of 93.184.215.14
		{"https://[2002:5db8:d70e::1]/hook", ""},  // 6to4 of 93.184.215.14
		{"https://192.0.0.9/hook", ""},            // PCP anycast: global per IANA
		{"https://[2001:4:112::1]/hook", ""},      // AS112-v6: global per IANA

		{"https://100.64.0.1/hook", "100.64.0.0/10, shared address space"},
		{"https://100.100.100.200/latest/meta-data", "100.64.0.0/10"},
		{"https://198.18.0.1/hook", "198.18.0.0/15, benchmarking"},
		{"https://198.19.255.254/hook", "198.18.0.0/15"},
		{"https://0.0.0.1/hook", `0.0.0.0/8, "this network"`},
		{"https://0.0.0.0/hook", "0.0.0.0/8"},
		{"https://255.255.255.255/hook", "limited broadcast"},
		{"https://[::127.0.0.1]/hook", "IPv4-compatible"},
		{"https://[::8.8.8.8]/hook", "IPv4-compatible"},
		{"https://[64:ff9b::7f00:1]/hook", "NAT64 64:ff9b::/96 of 127.0.0.0/8, loopback"},
		{"https://[64:ff9b::a9fe:a9fe]/hook", "NAT64 64:ff9b::/96 of 169.254.0.0/16"},
		{"https://[64:ff9b:1::5db8:d70e]/hook", "64:ff9b:1::/48, local-use"},
		{"https://[2002:7f00:1::1]/hook", "6to4 2002::/16 of 127.0.0.0/8, loopback"},
		{"https://[2002:a00:1::1]/hook", "6to4 2002::/16 of 10.0.0.0/8, private"},
		{"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook", "Teredo"},
		{"https://[::ffff:127.0.0.1]/hook", "IPv4-mapped 127.0.0.0/8, loopback"},
		{"https://127.0.0.1:8443/hook", "127.0.0.0/8, loopback"},
		{"https://[::1]/hook", "::1/128, loopback"},
		{"https://[::]/hook", "::/128, unspecified"},
		{"https://169.254.169.254/latest/meta-data", "169.254.0.0/16, link-local"},
		{"https://[fe80::1%25eth0]/hook", "fe80::/10, link-local"},
		{"https://192.168.1.10/hook", "192.168.0.0/16, private"},
		{"https://172.16.0.1/hook", "172.16.0.0/12, private"},
		{"https://10.1.2.3/hook", "10.0.0.0/8, private"},
		{"https://[fd00::1]/hook", "fc00::/7, unique local"},
		{"https://192.0.0.1/hook", "192.0.0.0/24"},
		{"https://192.0.2.1/hook", "TEST-NET-1"},
		{"https://224.0.0.1/hook", "multicast"},
		{"https://[ff02::1]/hook", "multicast"},
		{"https://240.0.0.1/hook", "240.0.0.0/4, reserved"},
		{"https://[2001:db8::1]/hook", "2001:db8::/32, documentation"},
		{"https://[100::1]/hook", "discard-only"},
		{"https://localhost/hook", "loopback"},
		{"http://93.184.215.14/hook", "plain HTTP; only HTTPS is allowed (for development, the operator may allow HTTP with --dev-flag)"},
	} {
		err := strict.CheckURL(ctx, "url", c.url)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckURL(%s) = %v; want %q", c.url, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "plain HTTP") && !strings.Contains(err.Error(), "the operator may allow it with --dev-flag") {
			t.Errorf("CheckURL(%s) = %v; the refusal does not name the override", c.url, err)
		}
		if err := open.CheckURL(ctx, "url", c.url); err != nil {
			t.Errorf("with AllowPrivate, CheckURL(%s) = %v; want accepted", c.url, err)
		}
	}
}

func TestMalformedURLsAreRefusedEvenInDevelopment(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"ftp://93.184.215.14/hook", "not an absolute http(s) URL"},
		{"/relative", "not an absolute http(s) URL"},
		{"https://user:pw@93.184.215.14/hook", "must not carry credentials"},
	} {
		for _, p := range []Policy{{}, {AllowPrivate: true}} {
			if err := p.CheckURL(context.Background(), "mcp_servers[0].url", c.url); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "mcp_servers[0].url") {
				t.Errorf("%+v CheckURL(%s) = %v; want a refusal of mcp_servers[0].url saying %q", p, c.url, err, c.want)
			}
		}
	}
}

// A name that passed when the URL was stored may resolve to a private
// address later: the dialer checks the address it actually connects to.
func TestTheDialerRefusesWhatTheNameResolvesToNow(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer srv.Close()
	for _, p := range []Policy{{}, {AllowPrivate: true}} {
		client := &http.Client{Transport: &http.Transport{DialContext: p.Dialer(0).DialContext}}
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		res, err := client.Get("http://localhost:" + port + "/")
		if p.AllowPrivate {
			if err != nil {
				t.Fatalf("with AllowPrivate: %v", err)
			}
			res.Body.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("strict dial of localhost = %v; want a loopback refusal", err)
		}
		if hits != 0 {
			t.Fatal("the strict dialer reached the loopback server")
		}
	}
	if hits != 1 {
		t.Fatalf("hits = %d; want 1 (the AllowPrivate request)", hits)
	}
}
