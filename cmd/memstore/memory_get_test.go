package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// On a terminal, `memory get` ends content that has no final newline with
// one, so the prompt starts on its own line; piped, it prints the content
// byte for byte.
func TestMemoryGetEndsItsLineOnlyOnATerminal(t *testing.T) {
	rs := testServe(t, serveOptions{})
	ctx := context.Background()
	c, err := client.New(rs.baseURL, client.WithAPIKey(rs.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	store, err := c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/bare.md", Content: "- ship it"})
	if err != nil {
		t.Fatal(err)
	}
	ended, err := c.CreateMemory(ctx, store.ID, api.CreateMemoryRequest{Path: "/ended.md", Content: "- ship it\n"})
	if err != nil {
		t.Fatal(err)
	}
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}

	onTerminal := func(args ...string) string {
		t.Helper()
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		var errb bytes.Buffer
		code := run(ctx, append(args, conn...), streams{strings.NewReader(""), tty, &errb})
		tty.Close()
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		out, _ := io.ReadAll(ptmx) // ends with EIO once the terminal side is closed
		// The terminal turns each "\n" into "\r\n".
		return strings.ReplaceAll(string(out), "\r\n", "\n")
	}
	for _, tc := range []struct {
		id, piped, terminal string
	}{
		{bare.ID, "- ship it", "- ship it\n"},
		{ended.ID, "- ship it\n", "- ship it\n"},
	} {
		if got := memstoreCLI(t, 0, append([]string{"memory", "get", store.ID, tc.id}, conn...)...); got != tc.piped {
			t.Errorf("memory get %s, piped, printed %q, want %q", tc.id, got, tc.piped)
		}
		if got := onTerminal("memory", "get", store.ID, tc.id); got != tc.terminal {
			t.Errorf("memory get %s, on a terminal, printed %q, want %q", tc.id, got, tc.terminal)
		}
	}
	if got := onTerminal("memory", "version", "get", store.ID, bare.MemoryVersionID); got != "- ship it\n" {
		t.Errorf("memory version get, on a terminal, printed %q", got)
	}
}
