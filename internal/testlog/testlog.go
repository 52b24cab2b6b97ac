// Package testlog captures what code under test writes — its log, a
// child process's output — for tests that look for a line in it. It is
// the one home of that harness, which the packages' tests used to copy.
package testlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer that handlers and processes on several
// goroutines may write to while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Text is a logger that writes text lines, debug level and up, into b.
func (b *Buffer) Text() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// JSON is a logger that writes JSON lines, debug level and up, into b, for
// Records.
func (b *Buffer) JSON() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Line returns the first line that contains every one of parts, or "".
func (b *Buffer) Line(parts ...string) string {
	for line := range strings.Lines(b.String()) {
		ok := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				ok = false
				break
			}
		}
		if ok {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

// Records returns the JSON records at level whose message contains msg;
// a line that is not JSON fails the test.
func (b *Buffer) Records(t testing.TB, level slog.Level, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m, _ := rec["msg"].(string); rec["level"] == level.String() && strings.Contains(m, msg) {
			out = append(out, rec)
		}
	}
	return out
}
