package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A server that is down, a URL that is not a memstore server's root and a
// refused key each fail at once, in one line that says what was tried and
// what to do, after a single attempt.
func TestCLIConnectionFailuresAreOneLineWithTheFix(t *testing.T) {
	t.Setenv("MEMSTORE_API_KEY", "")
	t.Setenv("MEMSTORE_ADMIN_KEY", "")
	rs, _ := cliServer(t)

	// A listener that takes each connection and closes it: a server that
	// dies on every request. It counts the attempts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var attempts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			c.Close()
		}
	}()
	// A port nothing listens on.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + closed.Addr().String()
	closed.Close()
	// Some other web server.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"server down", []string{"store", "list", "--base-url", down, "--api-key", "k"},
			[]string{"cannot reach the server at " + down, "connection refused", "memstore serve", "--base-url"}},
		{"server drops the connection", []string{"store", "list", "--base-url", "http://" + ln.Addr().String(), "--api-key", "k"},
			[]string{"cannot reach the server at http://" + ln.Addr().String(), "memstore serve"}},
		{"not a memstore server", []string{"store", "list", "--base-url", other.URL, "--api-key", "k"},
			[]string{other.URL + " does not answer as a memstore server", "404", "--base-url"}},
		{"the API's path in the URL", []string{"store", "list", "--base-url", rs.baseURL + "/v1", "--api-key", rs.adminKey},
			[]string{"without /v1"}},
		{"wrong key", []string{"store", "list", "--base-url", rs.baseURL, "--api-key", "sk-memstore-wrong"},
			[]string{"refused the API key from --api-key", "MEMSTORE_API_KEY"}},
		{"not a URL", []string{"store", "list", "--base-url", "localhost:8080", "--api-key", "k"},
			[]string{`--base-url "localhost:8080"`, "http://127.0.0.1:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, testStreams(&stdout, &stderr)); code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "memstore store list: ") || strings.Contains(out, "dial tcp") {
				t.Errorf("want one line naming the command, without the raw dial error:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
		})
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("the CLI connected %d times to a server that dropped the connection, want 1 (no hidden retries)", n)
	}
}

// The worker's errors are not prefixed twice ("memstore worker poll:
// worker: …").
func TestWorkerErrorsAreNotPrefixedTwice(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"worker", "poll", "--base-url", "http://127.0.0.1:1", "--environment-id", "env_x", "--environment-key", "k", "--mount-root", "/nonexistent/memory", "--workdir", t.TempDir()}
	if code := run(context.Background(), args, testStreams(&stdout, &stderr)); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if out := stderr.String(); !strings.HasPrefix(out, "memstore worker poll: the mount root /nonexistent/memory does not exist") {
		t.Errorf("stderr:\n%s", out)
	}
}
