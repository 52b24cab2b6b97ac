package testenv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// CommitCutter is a TCP proxy in front of the test PostgreSQL server.
// Armed with a marker, it lets the next COMMIT of a connection that sent
// the marker run, and cuts that connection before the COMMIT's answer
// reaches the client: the transaction committed, and the client cannot
// know it (a network failure at the worst moment). It reads PostgreSQL's
// messages whole, so only the armed statement's answer is cut.
type CommitCutter struct {
	ln     net.Listener
	target string
	// Reset cuts with a TCP reset rather than a close.
	Reset bool

	mu     sync.Mutex
	marker []byte // armed while not nil
	tag    string
	conns  map[net.Conn]bool // the clients' open connections, for Down
	cuts   atomic.Int32
}

// NewCommitCutter starts a proxy to the host of dbURL and returns it with
// dbURL rewritten to go through it; it stops when t ends. The URL must ask
// for no TLS (sslmode=disable), as the proxy reads the messages.
func NewCommitCutter(t testing.TB, dbURL string) (*CommitCutter, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		t.Skipf("the test database's URL names no host to put a proxy before: %q", dbURL)
	}
	if u.Query().Get("sslmode") != "disable" {
		t.Skipf("the test database's URL does not say sslmode=disable, and the proxy reads its messages: %q", dbURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CommitCutter{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
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

// Down stands for the database gone: the proxy stops accepting
// connections (a client's connect is refused) and cuts those it carries.
func (p *CommitCutter) Down() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Arm cuts the answer to the next COMMIT that commits on a connection whose
// client sent marker (a path, a name) since its last COMMIT.
func (p *CommitCutter) Arm(marker string) { p.ArmAt(marker, "COMMIT") }

// ArmAt is Arm for the statement whose completion tag is tag: "INSERT 0 1"
// cuts the answer to an INSERT that commits on its own, once the server
// says it is ready for the next query (its transaction then committed).
func (p *CommitCutter) ArmAt(marker, tag string) {
	p.mu.Lock()
	p.marker, p.tag = []byte(marker), tag
	p.mu.Unlock()
}

func (p *CommitCutter) armedTag() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tag
}

// Cuts is how many COMMITs' answers were cut.
func (p *CommitCutter) Cuts() int { return int(p.cuts.Load()) }

func (p *CommitCutter) armedWith() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marker
}

// disarm reports whether the proxy was armed, and disarms it.
func (p *CommitCutter) disarm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	armed := p.marker != nil
	p.marker = nil
	return armed
}

func (p *CommitCutter) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
	defer client.Close()
	defer server.Close()
	// marked: the client sent the marker since its last COMMIT.
	var marked atomic.Bool
	go func() {
		defer server.Close()
		buf := make([]byte, 64<<10)
		var tail []byte // the end of the last read, for a marker cut in two
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if m := p.armedWith(); m != nil && bytes.Contains(append(tail, buf[:n]...), m) {
					marked.Store(true)
				}
				tail = append(tail[:0], buf[max(0, n-64):n]...)
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// Every message from the server is a type byte and a length that
	// counts itself. A statement's end is a CommandComplete ('C') naming
	// it, and the transaction's end a ReadyForQuery ('Z'): once the armed
	// statement completed on a marked connection, what follows is held
	// back, and the connection cut at the ReadyForQuery.
	r := bufio.NewReader(server)
	head := make([]byte, 5)
	holding := false
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return // not PostgreSQL's protocol: drop the connection
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if head[0] == 'C' && marked.Load() && string(body) == p.armedTag()+"\x00" && p.disarm() {
			holding = true
		}
		// Idle again: the transaction the marker was sent in is over.
		idle := head[0] == 'Z' && len(body) == 1 && body[0] == 'I'
		if idle && !holding {
			marked.Store(false)
		}
		if holding {
			if !idle {
				continue
			}
			p.cuts.Add(1)
			if p.Reset {
				client.(*net.TCPConn).SetLinger(0)
			}
			return
		}
		if _, err := client.Write(append(head, body...)); err != nil {
			return
		}
	}
}
