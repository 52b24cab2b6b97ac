package postgres

import (
	"slices"
	"strings"
	"testing"
)

// The statements merged are one row's INSERT of its arguments in order;
// one row's UPDATE by id that moves nothing may stay in a run, unmerged;
// anything else ends a run.
func TestRowStatementShapes(t *testing.T) {
	for _, c := range []struct {
		query   string
		ok      bool
		columns []string
	}{
		{"INSERT INTO memories (id, store_id, content_sha256) VALUES ($1, $2, $3)", true, []string{"id", "store_id", "content_sha256"}},
		{"INSERT INTO memories (id, path) VALUES ($2, $1)", false, nil},
		{"INSERT INTO memories (id, path) VALUES ($1, 'x')", false, nil},
		{"INSERT INTO memories (id, path) VALUES ($1, $2) ON CONFLICT DO NOTHING", false, nil},
		{"INSERT INTO memories (id, path) SELECT $1, $2", false, nil},
		{"UPDATE memories SET content_sha256 = $1, version_id = $2 WHERE id = $3", true, []string{"content_sha256", "version_id", "id"}},
		{"UPDATE memories SET version_id = $2, updated_at = $3 WHERE id = $1", true, []string{"id", "version_id", "updated_at"}},
		{"UPDATE memories SET path = $1, version_id = $2 WHERE id = $3", false, nil},
		{"UPDATE memories SET id = $1 WHERE id = $2", false, nil},
		{"UPDATE memories SET version_id = $1 WHERE id = $2 AND store_id = $3", false, nil},
		{"DELETE FROM memories WHERE id = $1", false, nil},
	} {
		r, ok := parseRowStatement(c.query)
		if ok != c.ok || (ok && !slices.Equal(r.columns, c.columns)) {
			t.Errorf("%s: %v %v, want %v %v", c.query, ok, r.columns, c.ok, c.columns)
		}
	}
}

// A run of row statements has its inserts merged, one statement per text
// of two or more, in the order of each text's first statement (a write's
// version before its memory), the updates unmerged in their order; it is
// sent as it is when it writes a row twice; a statement of another shape
// ends the run.
func TestRowStatementsMergeWithinTheirRun(t *testing.T) {
	s := &DB{columnTypes: map[string]map[string]string{
		"memories":        {"id": "text", "store_id": "text", "version_id": "text"},
		"memory_versions": {"id": "text", "memory_id": "text"},
	}}
	const (
		version = "INSERT INTO memory_versions (id, memory_id) VALUES ($1, $2)"
		create  = "INSERT INTO memories (id, store_id, version_id) VALUES ($1, $2, $3)"
		update  = "UPDATE memories SET version_id = $1 WHERE id = $2"
		remove  = "DELETE FROM memories WHERE id = $1"
	)
	d := func(write int, query string, args ...any) deferredExec {
		return deferredExec{query: query, args: args, write: write}
	}
	got := s.merge([]deferredExec{
		d(0, version, "v1", "m1"), d(0, create, "m1", "s", "v1"),
		d(1, version, "v2", "m2"), d(1, create, "m2", "s", "v2"),
		d(2, version, "v3", "m3"), d(2, create, "m3", "s", "v3"),
		d(3, remove, "m4"),
		d(4, version, "v5", "m5"), d(4, update, "v5", "m5"),
		d(5, version, "v6", "m6"), d(5, update, "v6", "m6"),
	})
	var texts []string
	for _, e := range got {
		texts = append(texts, strings.Fields(e.query)[0]+" "+map[bool]string{true: "merged", false: "alone"}[e.merged])
	}
	want := []string{"INSERT merged", "INSERT merged", "DELETE alone", "INSERT merged", "UPDATE alone", "UPDATE alone"}
	if !slices.Equal(texts, want) {
		t.Fatalf("statements %v, want %v", texts, want)
	}
	if !strings.HasPrefix(got[0].query, "INSERT INTO memory_versions (id, memory_id) SELECT * FROM unnest($1::text[], $2::text[])") {
		t.Errorf("first statement %q, want the versions' merged INSERT", got[0].query)
	}
	if ids := got[0].args[0].([]string); !slices.Equal(ids, []string{"v1", "v2", "v3"}) {
		t.Errorf("the versions' ids %v, want each write's in order", ids)
	}
	if ids := got[1].args[0].([]string); !slices.Equal(ids, []string{"m1", "m2", "m3"}) {
		t.Errorf("the memories' ids %v, want the creates'", ids)
	}

	if ids := got[3].args[0].([]string); !slices.Equal(ids, []string{"v5", "v6"}) || got[4].args[1] != "m5" || got[5].args[1] != "m6" {
		t.Errorf("the updates' run: versions %v, then updates of %v and %v; want v5 and v6, then m5 and m6", ids, got[4].args[1], got[5].args[1])
	}

	// An argument whose values are not all of one type the array takes
	// them as they are.
	if c := typedColumn([]any{"a", nil}); !slices.Equal(c.([]any), []any{"a", nil}) {
		t.Errorf("a column of a string and a NULL became %#v", c)
	}
	if c := typedColumn([]any{int64(1), int64(2)}); !slices.Equal(c.([]int64), []int64{1, 2}) {
		t.Errorf("a column of int64s became %#v", c)
	}

	// A run that writes memory m1 twice is sent as it is.
	twice := []deferredExec{d(0, version, "v1", "m1"), d(0, create, "m1", "s", "v1"), d(1, version, "v2", "m1"), d(1, update, "v2", "m1")}
	if got := s.merge(twice); len(got) != len(twice) || slices.ContainsFunc(got, func(e deferredExec) bool { return e.merged }) {
		t.Errorf("a run writing m1 twice became %d statements, want the %d sent as they are", len(got), len(twice))
	}
}
