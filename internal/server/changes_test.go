package server_test

import (
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

// The change feed and snapshot's refusals (SPEC §8): each a 4xx that says
// what to do, changing nothing.
func TestChangeFeedRefusals(t *testing.T) {
	f := newFixture(t)
	s := "/v1/memory_stores/" + f.store.ID
	missing := "/v1/memory_stores/memstore_01NOPENOPENOPENOPENOPENOPE"
	f.check(t, []refusal{
		{"cursor ahead of the store", "GET", s + "/changes?after=3", nil, nil, 400, api.InvalidRequest, []string{"after", "ahead", "full listing"}},
		{"cursor not a number", "GET", s + "/changes?after=x", nil, nil, 400, api.InvalidRequest, []string{"after", "latest_sequence"}},
		{"cursor negative", "GET", s + "/changes?after=-1", nil, nil, 400, api.InvalidRequest, []string{"after"}},
		{"wait too long", "GET", s + "/changes?wait_ms=30001", nil, nil, 400, api.InvalidRequest, []string{"wait_ms", "30000"}},
		{"wait not a number", "GET", s + "/changes?wait_ms=soon", nil, nil, 400, api.InvalidRequest, []string{"wait_ms"}},
		// Issue 25: this wait overflowed into a negative duration that passed
		// the range check.
		{"wait overflowing a duration", "GET", s + "/changes?wait_ms=9223372036854775807", nil, nil, 400, api.InvalidRequest, []string{"wait_ms", "out of range", "from 0 to 30000"}},
		{"wait negative", "GET", s + "/changes?wait_ms=-1", nil, nil, 400, api.InvalidRequest, []string{"wait_ms", "from 0 to 30000"}},
		{"limit zero", "GET", s + "/changes?limit=0", nil, nil, 400, api.InvalidRequest, []string{"limit"}},
		{"feed of an unknown store", "GET", missing + "/changes", nil, nil, 404, api.NotFound, []string{"memory store"}},
		{"snapshot of an unknown store", "GET", missing + "/snapshot", nil, nil, 404, api.NotFound, []string{"memory store"}},
		{"snapshot prefix without slash", "GET", s + "/snapshot?path_prefix=/notes", nil, nil, 400, api.InvalidRequest, []string{"path_prefix"}},
	})
}

// A worker tells memstore from the hosted API by this header on the store
// and listing endpoints.
func TestExtensionsAdvertised(t *testing.T) {
	f := newFixture(t)
	s := "/v1/memory_stores/" + f.store.ID
	for _, path := range []string{"/v1/memory_stores", s, s + "/memories", s + "/snapshot"} {
		res := f.do("GET", path, nil)
		got := res.header.Get(api.ExtensionsHeader)
		if res.status != 200 || !strings.Contains(got, api.ExtensionChanges) || !strings.Contains(got, api.ExtensionSnapshot) {
			t.Errorf("GET %s: %d, %s = %q", path, res.status, api.ExtensionsHeader, got)
		}
	}
	// A long poll with nothing to report answers empty at the store's
	// latest sequence once its wait is over.
	var l api.MemoryChangeList
	f.ok("GET", s+"/changes?after=2&wait_ms=1", nil, &l)
	if len(l.Data) != 0 || l.LatestSequence != 2 || l.HasMore {
		t.Fatalf("idle long poll = %+v", l)
	}
}
