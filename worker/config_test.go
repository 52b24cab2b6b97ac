package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/testlog"
	"github.com/memstore/memstore/memsync"
)

// A configuration that would fail every session is refused by New, before
// the worker claims anything: a --mount-root that is missing or not a
// folder (every session with memory would fail to mount, and each would
// wait for a human to re-queue it), a sync interval or a deletion mode
// memsync refuses. Each error names the setting and what to do. What does
// not need the mount root (memory disabled, items handed to an on-work
// command) is not held to it.
func TestNewRefusesAConfigurationThatWouldFailEverySession(t *testing.T) {
	f := newFixture(t, "")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "typo")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string // parts of the error; none: New accepts it
	}{
		{"missing mount root", func(c *Config) { c.MountRoot = missing }, []string{missing, "does not exist", "--mount-root", "mkdir"}},
		{"mount root is a file", func(c *Config) { c.MountRoot = file }, []string{file, "not a folder", "--mount-root"}},
		{"interval below the minimum", func(c *Config) { c.MemorySyncInterval = time.Second }, []string{"memory_sync_interval", "minimum"}},
		{"unknown deletion mode", func(c *Config) { c.MemorySyncDeletions = memsync.DeletionMode(9) }, []string{"memory_sync_deletions", "enabled, log_only or disabled"}},
		{"negative max sessions", func(c *Config) { c.MaxSessions = -1 }, []string{"max sessions -1", "at least 1"}},
		{"negative max starting", func(c *Config) { c.MaxStarting = -1 }, []string{"max starting -1", "at least 1"}},
		{"memory disabled needs no mount root", func(c *Config) { c.MountRoot, c.MemorySyncInterval = missing, -1 }, nil},
		{"an on-work poller mounts nothing", func(c *Config) {
			c.MountRoot = missing
			c.OnWork = func(context.Context, api.Work) error { return nil }
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config(&testlog.Buffer{})
			tc.edit(&cfg)
			_, err := New(cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("New = %v, want it accepted", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted it")
			}
			for _, part := range tc.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("New = %q, want it to mention %q", err, part)
				}
			}
			if _, err := os.Stat(missing); err == nil {
				t.Errorf("New created the missing mount root; a typo must not make folders")
			}
		})
	}
}
