package testclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/testclock"
)

// The clock stands still until advanced, and concurrent readers and
// movers agree on where it ends.
func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := testclock.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			c.Advance(time.Second)
			c.Now()
		})
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(start.Add(10 * time.Second)) {
		t.Errorf("after ten 1s advances Now = %v, want %v", got, start.Add(10*time.Second))
	}
}
