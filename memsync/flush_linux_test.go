package memsync

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A burst of stores flushing at once shares flushes: the callers that
// arrive while one runs wait for the next (the running one may have begun
// before their writes ended) and are all covered by that one, and its
// error is theirs, not the first caller's.
func TestCallersArrivingDuringAFlushShareTheNextOne(t *testing.T) {
	f := newFlusher()
	var runs atomic.Int32
	firstBegan, releaseFirst := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error)
	go func() {
		firstDone <- f.flush(func() error {
			runs.Add(1)
			close(firstBegan)
			<-releaseFirst
			return nil
		})
	}()
	<-firstBegan
	failed := errors.New("write-back failed")
	var wg sync.WaitGroup
	errs := make([]error, 5)
	var returned atomic.Int32
	for i := range errs {
		wg.Go(func() {
			errs[i] = f.flush(func() error { runs.Add(1); return failed })
			returned.Add(1)
		})
	}
	// Let every caller reach its wait, then check none returned while the
	// flush begun before it runs (the count of flushes, below, checks that
	// none took that flush for its own).
	time.Sleep(50 * time.Millisecond)
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d callers returned while the flush begun before them ran", n)
	}
	close(releaseFirst)
	if err := <-firstDone; err != nil {
		t.Fatalf("the first caller's flush succeeded, yet it got %v", err)
	}
	wg.Wait()
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d flushes ran for 6 callers in two waves, want 2", n)
	}
	for i, err := range errs {
		if !errors.Is(err, failed) {
			t.Errorf("caller %d got %v, want the error of the flush that covered it", i, err)
		}
	}
	// A caller after the failure runs a flush of its own, which succeeds.
	if err := f.flush(func() error { return nil }); err != nil {
		t.Fatalf("a flush after the failed one: %v", err)
	}
}
