package testenv

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
)

// CommitCutter is a TCP proxy in front of the test PostgreSQL server.
// Armed, it lets the next COMMIT run and cuts the connection before the
// COMMIT's reply reaches the client: the transaction committed, and the
// client cannot know it (a network failure at the worst moment).
type CommitCutter struct {
	ln     net.Listener
	target string
	// Reset cuts with a TCP reset rather than a close.
	Reset bool
	armed atomic.Bool
	cuts  atomic.Int32
}

// commitComplete is the tag of PostgreSQL's reply to a COMMIT that
// committed (a CommandComplete message).
var commitComplete = []byte("COMMIT\x00")

// NewCommitCutter starts a proxy to the host of dbURL and returns it with
// dbURL rewritten to go through it; it stops when t ends.
func NewCommitCutter(t testing.TB, dbURL string) (*CommitCutter, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		t.Skipf("the test database's URL names no host to put a proxy before: %q", dbURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CommitCutter{ln: ln, target: u.Host}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	u.Host = ln.Addr().String()
	return p, u.String()
}

// Arm cuts the next connection whose COMMIT commits.
func (p *CommitCutter) Arm() { p.armed.Store(true) }

// Cuts is how many COMMITs' replies were cut.
func (p *CommitCutter) Cuts() int { return int(p.cuts.Load()) }

func (p *CommitCutter) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	go func() {
		io.Copy(server, client)
		server.Close()
	}()
	defer client.Close()
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], commitComplete) && p.armed.CompareAndSwap(true, false) {
				p.cuts.Add(1)
				if p.Reset {
					client.(*net.TCPConn).SetLinger(0)
				}
				return
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
