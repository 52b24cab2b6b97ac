package agent

import (
	"context"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/modeltest"
)

// claudeConfig points the Claude runtime at u, retrying without waiting.
func claudeConfig(u *modeltest.Upstream) ClaudeConfig {
	return ClaudeConfig{BaseURL: u.URL, APIKey: "sk-upstream-test", MaxAttempts: 3, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
}

// waitFor waits until the session's log satisfies done, woken by the
// runner's appends (a safety bound ends a test that would hang).
func (h *harness) waitFor(what string, done func(log []api.Event) bool) []api.Event {
	h.t.Helper()
	bound := time.After(30 * time.Second)
	for {
		log := h.log()
		if done(log) {
			return log
		}
		select {
		case <-h.appended:
		case <-bound:
			h.t.Fatalf("the session never reached %s; log: %s", what, h.types(0))
		}
	}
}

// idleAgain waits for the turn to end (session.status_idle after skip).
func (h *harness) idleAgain(skip int) []api.Event {
	h.t.Helper()
	return h.waitFor("idle", func(log []api.Event) bool {
		for _, e := range log[min(skip, len(log)):] {
			if e.Type == api.EventSessionStatusIdle {
				return true
			}
		}
		return false
	})
}
