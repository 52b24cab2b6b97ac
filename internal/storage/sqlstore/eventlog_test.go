package sqlstore

import (
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
