package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
)

// rawConn opens a TCP connection to the test server, for requests no HTTP
// client would send: a stalled body, a path with "..".
func (e *cpEnv) rawConn(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// readEnvelope reads one response and its error envelope.
func readEnvelope(t *testing.T, br *bufio.Reader) (*http.Response, api.ErrorEnvelope) {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var env api.ErrorEnvelope
	if err := json.Unmarshal(b, &env); err != nil || env.Error == nil || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: not the error envelope: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	return res, env
}

// A body that stalls is answered 408 with the envelope once the bound has
// passed, and the connection is closed; without a credential the 401 comes
// at once and the connection is closed within the same bound. Nothing is
// stored.
func TestStalledBodyIsTimedOut(t *testing.T) {
	e := newCPEnv(t, func(c *cpConfig) { c.Server.BodyReadTimeout = 50 * time.Millisecond })
	before := e.cpSnapshot()
	for _, c := range []struct {
		name, cred string
		status     int
		typ        api.ErrorType
	}{
		{"with a key", e.apiKey, 408, api.InvalidRequest},
		{"without a credential", "", 401, api.Authentication},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, br := e.rawConn(t)
			hdr := ""
			if c.cred != "" {
				hdr = "x-api-key: " + c.cred + "\r\n"
			}
			fmt.Fprintf(conn, "POST /v1/environments HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":", hdr)
			res, env := readEnvelope(t, br)
			if res.StatusCode != c.status || env.Error.Type != c.typ {
				t.Fatalf("got %d %s, want %d %s: %s", res.StatusCode, env.Error.Type, c.status, c.typ, env.Error.Message)
			}
			if c.status == 408 && (!strings.Contains(env.Error.Message, "50ms") || !res.Close) {
				t.Fatalf("408 %q, close %v: want the bound named and the connection closed", env.Error.Message, res.Close)
			}
			// The server hangs up: the stalled client holds nothing.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("the connection stayed open: %v", err)
			}
		})
	}
	if e.cpSnapshot() != before {
		t.Fatal("a stalled request changed the control plane")
	}
	// A body sent whole is read as always.
	e.environment("after")
}

// URL paths that Go's ServeMux would redirect (307, HTML) are answered by
// memstore with the envelope, and reach no handler.
func TestOddPathsGetTheEnvelope(t *testing.T) {
	e := newCPEnv(t)
	env := e.environment("e")
	before := e.cpSnapshot()
	for _, p := range []string{
		"/v1/environments/../environments",
		"/v1//environments",
		"/v1/./environments",
		"/v1/environments/" + env.ID + "/..",
		"//v1/environments",
		"/v1/environments/%2e%2e/x",
		"/v1/environments/a%00b",
		"/v1/environments/%ff%fe",
		"/v1/memory_stores/x/memories/%2F%2F",
	} {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			t.Run(method+" "+p, func(t *testing.T) {
				conn, br := e.rawConn(t)
				fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Length: 2\r\n\r\n{}", method, p, e.apiKey)
				res, envl := readEnvelope(t, br)
				if res.StatusCode/100 != 4 || res.Header.Get("Location") != "" {
					t.Fatalf("%d (Location %q): %s", res.StatusCode, res.Header.Get("Location"), envl.Error.Message)
				}
			})
		}
	}
	if e.cpSnapshot() != before {
		t.Fatal("an odd path changed the control plane")
	}
}

// Requests in flight are capped per credential and per address: one over
// is answered 429 with retry-after and the envelope, and changes nothing.
func TestInFlightLimits(t *testing.T) {
	e := newCPEnv(t, func(c *cpConfig) { c.Server.MaxRequestsPerKey = 1; c.Server.MaxRequestsPerAddress = 2 })
	env := e.environment("e")
	key := e.envKey(env.ID)
	sess := e.session(env.ID, e.scriptedAgent().ID, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An open stream holds one request of the API key and of the address.
	if _, res := e.openStream(t, ctx, sess.ID, e.apiKey, ""); res.StatusCode != 200 {
		t.Fatalf("stream: %d", res.StatusCode)
	}
	r := e.call("POST", "/v1/environments", e.apiKey, api.CreateEnvironmentRequest{Name: "over"})
	if r.status != 429 || r.errType() != string(api.RateLimit) || r.header.Get("retry-after") == "" || !strings.Contains(string(r.body), "max-requests-per-key") {
		t.Fatalf("over the key's limit: %d %s %s", r.status, r.header, r.body)
	}
	// A second stream, with another credential, fills the address.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if _, res := e.openStream(t, ctx2, sess.ID, key, ""); res.StatusCode != 200 {
		t.Fatalf("second stream: %d", res.StatusCode)
	}
	r = e.call("GET", "/v1/environments/"+env.ID+"/work/poll", key, nil)
	if r.status != 429 || !strings.Contains(string(r.body), "this address") {
		t.Fatalf("over the address's limit: %d %s", r.status, r.body)
	}
	// Once the streams end, requests pass again; the refused create made nothing.
	cancel()
	cancel2()
	for i := 0; ; i++ {
		r = e.call("GET", "/v1/environments?include_archived=true", e.apiKey, nil)
		if r.status == 200 {
			break
		}
		if i == 1000 {
			t.Fatalf("the limits never freed: %d %s", r.status, r.body)
		}
		time.Sleep(time.Millisecond)
	}
	var envs api.Page[api.Environment]
	r.decode(t, &envs)
	if len(envs.Data) != 1 {
		t.Fatalf("%d environments: the refused create made one", len(envs.Data))
	}
}
