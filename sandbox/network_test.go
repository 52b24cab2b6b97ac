package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/testenv"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/sandbox"
)

// reach is a bash command that prints "reached" when a TCP connection to
// host:port opens within 0.3 s and "unreachable" otherwise (a
// connection to the host's loopback, were it open, takes microseconds;
// one to an address nobody answers would hang, hence the bound).
func reach(hostPort string) string { return reachWithin(hostPort, "0.3") }

// reachWithin is reach with another bound, in seconds: the internet may
// take longer than the host.
func reachWithin(hostPort, seconds string) string {
	host, port, _ := net.SplitHostPort(hostPort)
	return `if timeout ` + seconds + ` bash -c 'exec 3<>/dev/tcp/` + host + `/` + port + `' 2>/dev/null; then echo reached; else echo unreachable; fi`
}

// api is a listener on addr standing for the memstore API (or the worker's
// metrics listener); "" when addr cannot be listened on here.
func api(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return ""
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String()
}

// hostAddress is the host's first global IPv4 address, or "".
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// defaultGateway reads the gateway of the default route from a routing
// table in /proc/net/route's format; "" when there is none.
func defaultGateway(table string) string {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] != "lo" && f[1] == "00000000" {
			gw, err := strconv.ParseUint(f[2], 16, 32)
			if err != nil {
				return ""
			}
			return net.IPv4(byte(gw), byte(gw>>8), byte(gw>>16), byte(gw>>24)).String()
		}
	}
	return ""
}

// pastaChildren are the pasta processes this test process started.
func pastaChildren(t *testing.T) []int {
	t.Helper()
	var kids []int
	for _, pid := range hostPids(t, "pasta") {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			kids = append(kids, pid)
		}
	}
	return kids
}

// With --sandbox-network on the shell has a network of its own, connected
// through pasta: an interface besides the loopback with a default route
// (and the internet, where this machine has it), but the API on the
// host's loopback cannot be reached, neither at 127.0.0.1 (the sandbox's
// own loopback) nor through the gateway's address (which pasta would
// otherwise map to the host); the host's own address leads back into the
// sandbox. pasta is stopped with the shell. (With the host's network the
// same probe reaches the API: TestNetworkHostReachesTheHostsLoopback.)
func TestNetworkOnReachesOutButNotTheHostsLoopback(t *testing.T) {
	testenv.Pasta(t)
	if os.Geteuid() != 0 {
		t.Skip("pasta attaches to bubblewrap's namespace only for a root worker here; an unprivileged one falls back to the host's network (TestNetworkOnWithoutPastaSharesTheHostsAfterAWarning)")
	}
	// The internet, where this machine has it: what the host reaches, the
	// sandbox must reach. Asked meanwhile, as it may take its second; only
	// in the long run, as a connection out may take more than a second.
	const outside = "1.1.1.1:443"
	hostReachesOutside := make(chan error, 1)
	go func() {
		if !testenv.IsLong() {
			hostReachesOutside <- fmt.Errorf("not tried outside the long run (%s=1)", testenv.LongVar)
			return
		}
		c, err := net.DialTimeout("tcp", outside, time.Second)
		if err == nil {
			c.Close()
		}
		hostReachesOutside <- err
	}()
	apiAddr := api(t, "127.0.0.1:0")
	h := newHost(t)
	var logs testlog.Buffer
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Network: sandbox.On}, logs.Text())
	if err != nil {
		t.Skipf("bubblewrap cannot run here, so the sandbox is not tested: %v", err)
	}
	if strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "network") {
		t.Fatalf("pasta is installed but on fell back to the host's network: %s", logs.String())
	}
	if got := networkAttr(l.LogAttrs(h.view)); !strings.HasPrefix(got, "on (pasta") {
		t.Errorf("the session's log line says network=%q, want on (pasta…)", got)
	}
	ts := h.tools(t, l)

	table, err := os.ReadFile("/proc/net/route")
	if err != nil {
		t.Fatal(err)
	}
	gw := defaultGateway(string(table))
	if gw == "" {
		t.Skipf("the host has no default route, so neither can the sandbox:\n%s", table)
	}
	_, port, _ := net.SplitHostPort(apiAddr)
	probes := map[string]string{
		"the API at 127.0.0.1":             apiAddr,
		"the API through the gateway":      net.JoinHostPort(gw, port),
		"a listener on the host's address": "",
	}
	if a := hostAddress(); a != "" {
		probes["a listener on the host's address"] = api(t, net.JoinHostPort(a, "0"))
	}
	// The probes run side by side: each that is refused by hanging costs
	// its 0.3 s once.
	out := func(addr string) string { return "out." + strings.NewReplacer(".", "_", ":", "_").Replace(addr) }
	var script []string
	for _, addr := range probes {
		if addr != "" {
			script = append(script, "("+reach(addr)+") > "+out(addr)+" &")
		}
	}
	hostOutside := <-hostReachesOutside
	if hostOutside == nil {
		script = append(script, "("+reachWithin(outside, "3")+") > "+out(outside)+" &")
	}
	script = append(script, "wait", "cat /proc/net/route")
	if inside := bash(t, ts, strings.Join(script, "\n")).Content; defaultGateway(inside) != gw {
		t.Errorf("the sandbox's routes:\n%s\nwant a default route through an interface of its own, by the host's gateway %s", inside, gw)
	}
	for what, addr := range probes {
		if addr == "" {
			continue
		}
		if got, _ := os.ReadFile(filepath.Join(h.work, out(addr))); string(got) != "unreachable\n" {
			t.Errorf("%s (%s) from inside the sandbox: %q, want unreachable", what, addr, got)
		}
	}
	if hostOutside != nil {
		t.Logf("the internet: %v; only the sandbox's own interface and default route are checked", hostOutside)
	} else if got, _ := os.ReadFile(filepath.Join(h.work, out(outside))); string(got) != "reached\n" {
		t.Errorf("%s, which the host reaches, from inside the sandbox: %q, want reached", outside, got)
	}

	kids := pastaChildren(t)
	if len(kids) != 1 {
		t.Errorf("pasta processes of this test while a shell runs: %v, want one", kids)
	}
	ts.Close()
	waitGone(t, kids)
}

// networkAttr is the network a session's log line reports.
func networkAttr(attrs []any) string {
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i] == "network" {
			s, _ := attrs[i+1].(string)
			return s
		}
	}
	return ""
}

// With --sandbox-network host the API on the host's loopback is reached,
// without a warning: the choice was made on purpose.
func TestNetworkHostReachesTheHostsLoopback(t *testing.T) {
	var logs testlog.Buffer
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Network: sandbox.Host}, logs.Text())
	if err != nil {
		t.Skipf("bubblewrap cannot run here, so the sandbox is not tested: %v", err)
	}
	if strings.Contains(logs.String(), "network") {
		t.Errorf("host logged %q", logs.String())
	}
	h := newHost(t)
	if got := networkAttr(l.LogAttrs(h.view)); got != "host" {
		t.Errorf("the session's log line says network=%q, want host", got)
	}
	wantOut(t, bash(t, h.tools(t, l), reach(api(t, "127.0.0.1:0"))), "reached\n")
}

// Without pasta, on falls back to the host's network after one warning
// that says so and how to install it; the session's log line says so too,
// and the API on the host's loopback is then reached.
func TestNetworkOnWithoutPastaSharesTheHostsAfterAWarning(t *testing.T) {
	var logs testlog.Buffer
	l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Pasta: "/no/such/pasta"}, logs.Text())
	if err != nil {
		t.Skipf("bubblewrap cannot run here, so the sandbox is not tested: %v", err)
	}
	line := logs.String()
	if strings.Count(line, "level=WARN") != 1 || !strings.Contains(line, "shares the host's network") || !strings.Contains(line, "/no/such/pasta") || !strings.Contains(line, "apt-get install passt") {
		t.Errorf("the warning = %q; want one that says the host's network is shared, why, and how to install pasta", line)
	}
	h := newHost(t)
	if got := networkAttr(l.LogAttrs(h.view)); !strings.Contains(got, "host") {
		t.Errorf("the session's log line says network=%q, want the host's", got)
	}
	wantOut(t, bash(t, h.tools(t, l), reach(api(t, "127.0.0.1:0"))), "reached\n")
}

// A --sandbox-network value that is none of on, off and host is refused
// with the three choices.
func TestParseNetwork(t *testing.T) {
	for _, n := range []string{"on", "off", "host"} {
		if got, err := sandbox.ParseNetwork(n); err != nil || string(got) != n {
			t.Errorf("ParseNetwork(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := sandbox.ParseNetwork("pasta"); err == nil || !strings.Contains(err.Error(), "on (") || !strings.Contains(err.Error(), "host (") {
		t.Errorf("ParseNetwork(pasta) = %v", err)
	}
	if l, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Auto, Network: "bridge"}, nil); l != nil || err == nil || !strings.Contains(err.Error(), "bridge") {
		t.Errorf("New with network bridge = %v, %v", l, err)
	}
}

// A pasta that fails at once makes the launcher end the sandbox it was
// attaching to before the sandbox's own setup is done, the moment at which
// bubblewrap's child has not yet asked to die with bubblewrap. The probe
// must still come back, every time, with the warning, and leave no
// process of its sandbox behind (a worker once hung at start for good,
// its probe's sandbox orphaned and holding the probe's pipes).
func TestNetworkOnWithAPastaThatFailsFallsBackPromptly(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "pasta")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho refused here >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// bubblewrap under a name of this test's own, so that its sandboxes
	// are told from those of tests running beside it.
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skipf("bubblewrap is not installed, so the sandbox is not tested: %v", err)
	}
	bwrap := filepath.Join(dir, "bwrap")
	if err := os.Symlink(real, bwrap); err != nil {
		t.Fatal(err)
	}
	// Left running, the orphan ends only when the launcher gives up on
	// its pipes (a 2 s WaitDelay) and its cat reads the end of its input:
	// 20 probes then take 40 s, where they take well under one.
	const probes = 20
	start := time.Now()
	for i := range probes {
		var logs testlog.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := sandbox.New(context.Background(), sandbox.Config{Mode: sandbox.Bwrap, Program: bwrap, Pasta: failing}, logs.Text())
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Skipf("bubblewrap cannot run here, so the sandbox is not tested: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("probe %d: sandbox.New still probing pasta after 30 s", i)
		}
		if line := logs.String(); !strings.Contains(line, "shares the host's network") || !strings.Contains(line, "refused here") {
			t.Fatalf("probe %d: the warning = %q; want the host's network shared and what pasta said", i, line)
		}
	}
	if took := time.Since(start); took > probes*time.Second {
		t.Errorf("%d probes took %s: the sandboxes they ended were not killed but waited for", probes, took.Round(time.Millisecond))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := running(t, bwrap)
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the probes' sandboxes still run", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running counts the processes, zombies aside, started as program (the
// first word of their command line).
func running(t *testing.T, program string) int {
	t.Helper()
	n := 0
	for _, pid := range hostPids(t, program) {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !bytes.HasPrefix(cmdline, []byte(program+"\x00")) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if s := string(stat); !strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z") {
				n++
			}
		}
	}
	return n
}
