package ids

import (
	"testing"
	"time"
)

func TestNewIsSortableAndValid(t *testing.T) {
	prev := ""
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 1000; i++ {
		id := NewAt(Memory, t0.Add(time.Duration(i/10)*time.Millisecond))
		if !Valid(Memory, id) {
			t.Fatalf("%q not valid", id)
		}
		if id <= prev {
			t.Fatalf("ids not increasing: %q then %q", prev, id)
		}
		prev = id
	}
}

func TestValidRejects(t *testing.T) {
	good := New(Session)
	for _, id := range []string{"", "sesn_", "mem_" + good[len(Session):], good + "X", good[:len(good)-1] + "!", "sesn_" + "0123456789abcdefghjkmnpqrs"} {
		if Valid(Session, id) {
			t.Errorf("Valid(%q) = true", id)
		}
	}
}
