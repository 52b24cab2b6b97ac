package server_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/retention"
)

// A store shows the retention in force, the server's default until it has
// its own; an update sets and clears it.
func TestRetentionOnTheStore(t *testing.T) {
	e := newEnv(t, app.Config{DefaultRetention: retention.Policy{MaxAge: 30 * 24 * time.Hour}})
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "s"}, &st)
	if got := *st.VersionRetention; got != (api.VersionRetention{Type: api.RetentionMaxAge, MaxAgeSeconds: 30 * 24 * 3600, ServerDefault: true}) {
		t.Fatalf("new store shows %+v, want the server's default", got)
	}
	var set api.MemoryStore // fresh: a decode into st would keep its old fields
	e.ok("POST", "/v1/memory_stores/"+st.ID, map[string]any{api.ExtensionRetentionField: map[string]any{"type": "keep_last", "keep_last": 2}}, &set)
	if got := *set.VersionRetention; got != (api.VersionRetention{Type: api.RetentionKeepLast, KeepLast: 2}) {
		t.Fatalf("after setting keep_last=2: %+v", got)
	}
	var read, cleared api.MemoryStore
	e.ok("GET", "/v1/memory_stores/"+st.ID, nil, &read)
	if got := *read.VersionRetention; got != (api.VersionRetention{Type: api.RetentionKeepLast, KeepLast: 2}) {
		t.Fatalf("read back %+v", got)
	}
	e.ok("POST", "/v1/memory_stores/"+st.ID, map[string]any{api.ExtensionRetentionField: map[string]any{"type": "server_default"}}, &cleared)
	if !cleared.VersionRetention.ServerDefault || cleared.VersionRetention.Type != api.RetentionMaxAge {
		t.Fatalf("back to the default: %+v", cleared.VersionRetention)
	}
	var created api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "all", api.ExtensionRetentionField: map[string]any{"type": "keep_all"}}, &created)
	if got := *created.VersionRetention; got != (api.VersionRetention{Type: api.RetentionKeepAll}) {
		t.Fatalf("created with keep_all: %+v", got)
	}
}

// Bad policies are refused with what to send, and change nothing.
func TestRetentionRefusals(t *testing.T) {
	f := newFixture(t)
	s := "/v1/memory_stores/" + f.store.ID
	field := api.ExtensionRetentionField
	body := func(v map[string]any) map[string]any { return map[string]any{field: v} }
	f.check(t, []refusal{
		{"unknown type", "POST", s, body(map[string]any{"type": "keep_some"}), nil, 400, api.InvalidRequest, []string{field + ".type", "keep_last", "server_default"}},
		{"keep_last without a count", "POST", s, body(map[string]any{"type": "keep_last"}), nil, 400, api.InvalidRequest, []string{field, "keep_last", "1 to"}},
		{"keep_last with an age", "POST", s, body(map[string]any{"type": "keep_last", "keep_last": 2, "max_age_seconds": 60}), nil, 400, api.InvalidRequest, []string{"no max_age_seconds"}},
		{"keep_last too many", "POST", s, body(map[string]any{"type": "keep_last", "keep_last": retention.MaxKeepLast + 1}), nil, 400, api.InvalidRequest, []string{field, "keep 1 to"}},
		{"max_age of zero", "POST", s, body(map[string]any{"type": "max_age", "max_age_seconds": 0}), nil, 400, api.InvalidRequest, []string{"max_age_seconds"}},
		{"max_age overflowing", "POST", s, body(map[string]any{"type": "max_age", "max_age_seconds": int64(1) << 62}), nil, 400, api.InvalidRequest, []string{"max_age_seconds", "1 to"}},
		{"keep_all with a count", "POST", s, body(map[string]any{"type": "keep_all", "keep_last": 3}), nil, 400, api.InvalidRequest, []string{"takes neither"}},
		{"server_default sent", "POST", s, body(map[string]any{"type": "keep_all", "server_default": true}), nil, 400, api.InvalidRequest, []string{"server_default", "set by the server"}},
		{"on create", "POST", "/v1/memory_stores", map[string]any{"name": "n", field: map[string]any{"type": "nope"}}, nil, 400, api.InvalidRequest, []string{field + ".type"}},
		{"archived store", "POST", "/v1/memory_stores/" + f.archived.ID, body(map[string]any{"type": "keep_last", "keep_last": 1}), nil, 409, api.Conflict, []string{"archived"}},
	})
}

// With keep_last=2 a memory with 10 versions keeps 2; the feed then answers
// a cursor below the pruned versions 410 changes_pruned_error, saying to
// start over from a snapshot, and a snapshot's sequence is followed on.
func TestFeedCursorBehindRetention(t *testing.T) {
	e := newEnv(t, app.Config{})
	var st api.MemoryStore
	e.ok("POST", "/v1/memory_stores", map[string]any{"name": "s", api.ExtensionRetentionField: map[string]any{"type": "keep_last", "keep_last": 2}}, &st)
	s := "/v1/memory_stores/" + st.ID
	var m api.Memory
	e.ok("POST", s+"/memories", api.CreateMemoryRequest{Path: "/m", Content: "v1"}, &m)
	for i := 2; i <= 10; i++ {
		e.ok("POST", s+"/memories/"+m.ID, map[string]any{"content": fmt.Sprintf("v%d", i)}, nil)
	}
	pruner := app.New(app.Config{Store: e.db, Logger: slog.New(slog.DiscardHandler)})
	if n, err := pruner.PruneVersions(e.ctx); err != nil || n != 8 {
		t.Fatalf("pruned %d, %v; want 8", n, err)
	}
	var versions api.Page[api.MemoryVersion]
	e.ok("GET", s+"/memory_versions?memory_id="+m.ID, nil, &versions)
	if len(versions.Data) != 2 {
		t.Fatalf("%d versions left, want 2", len(versions.Data))
	}
	before := e.snapshot()
	res := e.do("GET", s+"/changes?after=0", nil)
	ae := e.apiError(res)
	if res.status != 410 || ae.Type != api.ChangesPruned {
		t.Fatalf("feed from 0: %d %s %s", res.status, ae.Type, ae.Message)
	}
	for _, want := range []string{"after", "retention", "snapshot", "sequence 8"} {
		if !strings.Contains(ae.Message, want) {
			t.Errorf("message %q does not mention %q", ae.Message, want)
		}
	}
	if e.snapshot() != before {
		t.Fatal("a refused feed read changed storage")
	}
	var l api.MemoryChangeList
	e.ok("GET", s+"/changes?after=8", nil, &l)
	if len(l.Data) != 2 || l.LatestSequence != 10 {
		t.Fatalf("feed after the pruned range: %d changes at %d", len(l.Data), l.LatestSequence)
	}
}
