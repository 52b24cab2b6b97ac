package sqlstore

import (
	"fmt"
	"testing"

	"github.com/memstore/memstore/api"
)

// The room after a cached log is lent to one appender at a time: a second
// appender, or a reader, gets a clipped slice, so that nobody's append
// writes where another's does, and what the appender writes there is not
// in the log anyone else gets until it puts its own.
func TestLogCacheLendsItsRoomToOneAppender(t *testing.T) {
	var c logCache
	events := make([]api.Event, 2, 8)
	events[0].ID, events[1].ID = "a", "b"
	c.put("s", eventLog{seq: 2, events: events})

	first := c.get("s", true)
	if len(first.events) != 2 || cap(first.events) != 8 {
		t.Fatalf("first appender got len %d cap %d, want the cached array's room (2, 8)", len(first.events), cap(first.events))
	}
	for name, l := range map[string]eventLog{"second appender": c.get("s", true), "reader": c.get("s", false)} {
		if len(l.events) != 2 || cap(l.events) != 2 {
			t.Fatalf("%s got len %d cap %d while the room is lent, want a clipped slice (2, 2)", name, len(l.events), cap(l.events))
		}
	}
	first.events = append(first.events, api.Event{ID: "c"})
	if got := c.get("s", false).events; len(got) != 2 || got[1].ID != "b" {
		t.Fatalf("before its put the appender's event shows in the cache: %v", got)
	}

	c.put("s", eventLog{seq: 3, events: first.events})
	next := c.get("s", true)
	if len(next.events) != 3 || next.events[2].ID != "c" || cap(next.events) != 8 {
		t.Fatalf("after the put the next appender got len %d cap %d, want the new log with the room (3, 8)", len(next.events), cap(next.events))
	}
	if l := c.get("s", true); cap(l.events) != 3 {
		t.Fatalf("the room was lent twice after a put (cap %d)", cap(l.events))
	}
}

// The cache forgets the session used longest ago, not one at random: a
// server with as many busy sessions as the cache holds keeps all of them.
func TestLogCacheForgetsTheSessionsUsedLongestAgo(t *testing.T) {
	var c logCache
	for i := range maxCachedLogs {
		c.put(fmt.Sprint("s", i), eventLog{seq: 1, events: make([]api.Event, 1)})
	}
	if c.get("s0", true).seq != 1 {
		t.Fatal("s0 was not cached")
	}
	c.put("s1", eventLog{seq: 1, events: make([]api.Event, 1)}) // no newer log: still counts as a use
	c.put("new", eventLog{seq: 1, events: make([]api.Event, 1)})
	if c.get("s2", false).seq != 0 {
		t.Error("s2, used longest ago, is still cached after one session too many")
	}
	for _, id := range []string{"s0", "s1", "s3", "new"} {
		if c.get(id, false).seq != 1 {
			t.Errorf("%s was forgotten; only s2 should be", id)
		}
	}
	if len(c.entries) != maxCachedLogs || c.used.Len() != maxCachedLogs || c.events != maxCachedLogs {
		t.Errorf("cache holds %d entries, %d in use order, %d events; want %d of each", len(c.entries), c.used.Len(), c.events, maxCachedLogs)
	}
}

// However long their logs, the minCachedLogs sessions used last are kept;
// beyond them, sessions are kept only while all the cached logs' events
// together stay within maxCachedEvents.
func TestLogCacheBoundsTheEventsItHolds(t *testing.T) {
	var c logCache
	cached := func(id string) bool { return c.entries[id] != nil } // without counting as a use
	half := maxCachedEvents/2 + 1
	c.put("a", eventLog{seq: 1, events: make([]api.Event, half)})
	c.put("b", eventLog{seq: 1, events: make([]api.Event, half)})
	for i := range minCachedLogs - 2 {
		c.put(fmt.Sprint("s", i), eventLog{seq: 1, events: make([]api.Event, 1)})
	}
	if c.used.Len() != minCachedLogs || !cached("a") || !cached("b") {
		t.Fatalf("minCachedLogs sessions (%d cached), over the event bound: a cached %v, b cached %v; want both kept", c.used.Len(), cached("a"), cached("b"))
	}
	c.put("one more", eventLog{seq: 1, events: make([]api.Event, 1)})
	if cached("a") || !cached("b") {
		t.Fatalf("one session past minCachedLogs, over the event bound: a cached %v, b cached %v; want a (used longest ago) forgotten, b kept", cached("a"), cached("b"))
	}
	if want := half + minCachedLogs - 1; c.used.Len() != minCachedLogs || c.events != want {
		t.Fatalf("after forgetting a: %d sessions, %d events counted; want %d and %d", c.used.Len(), c.events, minCachedLogs, want)
	}
	c.drop("b")
	c.put("under the bound", eventLog{seq: 1, events: make([]api.Event, 1)})
	if c.used.Len() != minCachedLogs || c.events != minCachedLogs {
		t.Fatalf("under the event bound: %d sessions, %d events; want %d of each", c.used.Len(), c.events, minCachedLogs)
	}
	c.put("past the floor", eventLog{seq: 1, events: make([]api.Event, 1)})
	if c.used.Len() != minCachedLogs+1 {
		t.Fatalf("under the event bound, %d sessions cached; want %d (kept past minCachedLogs)", c.used.Len(), minCachedLogs+1)
	}
	for id := range c.entries {
		c.drop(id)
	}
	if len(c.entries) != 0 || c.used.Len() != 0 || c.events != 0 {
		t.Fatalf("after dropping all: %d entries, %d in use order, %d events", len(c.entries), c.used.Len(), c.events)
	}
}
