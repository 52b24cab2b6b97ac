package workqueue

import (
	"errors"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func item(id string, queuedAt time.Time) storage.Work {
	w := storage.Work{QueuedAt: queuedAt}
	w.ID, w.State = id, api.WorkQueued
	return w
}

func claimed(w storage.Work, at time.Time) storage.Work {
	w, _ = Claim(w, storage.Claim{WorkerID: "wk", ClaimTTL: time.Minute, Token: storage.Credential{ID: "tok"}}, at)
	return w
}

func TestNextTakesTheOldestClaimableItem(t *testing.T) {
	old, mid, young := item("w3", t0), item("w2", t0.Add(time.Second)), item("w1", t0.Add(2*time.Second))
	tie := item("w0", t0)
	held := claimed(old, t0)
	cases := []struct {
		name    string
		items   []storage.Work
		reclaim time.Duration
		at      time.Time
		want    string
	}{
		{"oldest first", []storage.Work{young, mid, old}, 0, t0, "w3"},
		{"ties by id", []storage.Work{old, tie}, 0, t0, "w0"},
		{"a claimed item waits", []storage.Work{held, young}, 0, t0.Add(time.Hour), "w1"},
		{"reclaimed once old enough", []storage.Work{held, young}, time.Minute, t0.Add(time.Minute), "w3"},
		{"not before", []storage.Work{held, young}, time.Minute, t0.Add(time.Minute - 1), "w1"},
		{"nothing claimable", []storage.Work{held}, 0, t0, ""},
	}
	for _, c := range cases {
		got, ok := Next(c.items, c.at, c.reclaim)
		if (c.want == "") == ok || (ok && got.ID != c.want) {
			t.Errorf("%s: got %q (%v), want %q", c.name, got.ID, ok, c.want)
		}
	}
}

func TestClaimMintsTheTokenForTheItem(t *testing.T) {
	w := item("w1", t0)
	w.EnvironmentID, w.SessionID = "env_1", "sesn_1"
	got, tok := Claim(w, storage.Claim{WorkerID: "wk", ClaimTTL: 30 * time.Second, Token: storage.Credential{ID: "tok"}}, t0)
	if got.WorkerID != "wk" || got.TokenID != "tok" || !got.LeaseExpiresAt.Equal(t0.Add(30*time.Second)) || got.LeaseTTLSeconds != 30 || got.State != api.WorkQueued {
		t.Fatalf("claimed item = %+v", got)
	}
	if tok.Kind != storage.SessionsToken || tok.WorkID != "w1" || tok.SessionID != "sesn_1" || tok.EnvironmentID != "env_1" {
		t.Fatalf("token = %+v", tok)
	}
}

func TestTheLeaseLifecycle(t *testing.T) {
	w := claimed(item("w1", t0), t0)
	if _, _, err := Ack(item("w2", t0), t0); !errors.Is(err, storage.ErrWorkNotClaimed) {
		t.Fatalf("ack unclaimed: %v", err)
	}
	w, changed, err := Ack(w, t0)
	if err != nil || !changed || w.State != api.WorkStarting {
		t.Fatalf("ack: %v %v %s", err, changed, w.State)
	}
	if again, changed, err := Ack(w, t0.Add(time.Second)); err != nil || changed || again.State != api.WorkStarting {
		t.Fatalf("second ack: %v %v", err, changed)
	}
	stale := storage.Heartbeat{Expected: "2020-01-01T00:00:00.000000000Z", TTL: time.Minute, TokenID: "tok"}
	var mismatch *storage.LeaseMismatchError
	if _, _, err := Heartbeat(w, stale, t0); !errors.As(err, &mismatch) {
		t.Fatalf("stale beat: %v", err)
	}
	if _, _, err := Heartbeat(w, storage.Heartbeat{Expected: api.NoHeartbeat, TokenID: "old"}, t0); !errors.As(err, &mismatch) {
		t.Fatalf("earlier claim's token: %v", err)
	}
	beat := t0.Add(10 * time.Second)
	w, _, err = Heartbeat(w, storage.Heartbeat{Expected: api.NoHeartbeat, TTL: time.Minute, TokenID: "tok"}, beat)
	if err != nil || w.State != api.WorkActive || !w.LeaseExpiresAt.Equal(beat.Add(time.Minute)) {
		t.Fatalf("first beat: %v %+v", err, w)
	}
	if Lapsed(w, beat.Add(time.Minute-1)) || !Lapsed(w, beat.Add(time.Minute)) {
		t.Fatal("the lease lapses exactly at its expiry")
	}
	requeued := Expire(w, beat.Add(time.Minute))
	if requeued.State != api.WorkQueued || requeued.ClaimedAt != nil || requeued.TokenID != "" || !requeued.QueuedAt.Equal(t0) {
		t.Fatalf("lapsed active item: %+v", requeued)
	}
	w, err = Stop(w, false, beat)
	if err != nil || w.State != api.WorkStopping {
		t.Fatalf("stop a held item: %v %s", err, w.State)
	}
	// Stale expectations are not compared while stopping.
	if _, _, err := Heartbeat(w, stale, beat); err != nil {
		t.Fatalf("beat while stopping: %v", err)
	}
	if ended := Expire(w, beat.Add(time.Hour)); ended.State != api.WorkStopped || ended.StoppedAt == nil {
		t.Fatalf("lapsed stopping item: %s, stopped at %v", ended.State, ended.StoppedAt)
	}
	w, _ = Stop(w, true, beat)
	if _, err := Stop(w, false, beat); !errors.Is(err, storage.ErrWorkStopped) {
		t.Fatalf("stop twice: %v", err)
	}
	if _, _, err := Ack(w, beat); !errors.Is(err, storage.ErrWorkStopped) {
		t.Fatalf("ack stopped: %v", err)
	}
	if got, changed, err := Heartbeat(w, storage.Heartbeat{TokenID: "tok"}, beat); err != nil || changed || got.State != api.WorkStopped {
		t.Fatalf("beat stopped: %v %v", err, changed)
	}
	if Live(w) || Lapsed(w, beat.Add(time.Hour)) {
		t.Fatal("a stopped item is neither live nor lapsed")
	}
}

func TestStopWithNobodyHoldingItIsImmediate(t *testing.T) {
	w, err := Stop(item("w1", t0), false, t0)
	if err != nil || w.State != api.WorkStopped || !w.StoppedAt.Equal(t0) {
		t.Fatalf("%v %+v", err, w)
	}
}

func TestStatsCountsDepthAndPending(t *testing.T) {
	st := Stats([]storage.Work{item("w1", t0.Add(time.Second)), claimed(item("w2", t0), t0), claimed(item("w3", t0), t0)})
	if st.Depth != 1 || st.Pending != 2 || !st.OldestQueuedAt.Equal(t0) {
		t.Fatalf("%+v", st)
	}
	if empty := Stats(nil); empty.Depth != 0 || empty.OldestQueuedAt != nil {
		t.Fatalf("%+v", empty)
	}
}

func TestASessionWantsAnItemOnlyWhenNothingServesIt(t *testing.T) {
	stopped, _ := Stop(item("w1", t0), true, t0)
	archived := t0
	cases := []struct {
		name  string
		sess  api.Session
		items []storage.Work
		want  bool
	}{
		{"idle, its only item stopped", api.Session{Status: api.SessionIdle}, []storage.Work{stopped}, true},
		{"idle, no item at all", api.Session{Status: api.SessionIdle}, nil, true},
		{"a live item serves it", api.Session{Status: api.SessionRunning}, []storage.Work{stopped, item("w2", t0)}, false},
		{"terminated", api.Session{Status: api.SessionTerminated}, []storage.Work{stopped}, false},
		{"archived", api.Session{Status: api.SessionIdle, ArchivedAt: &archived}, []storage.Work{stopped}, false},
	}
	for _, c := range cases {
		if got := Wanted(c.sess, c.items); got != c.want {
			t.Errorf("%s: Wanted = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestANewItemIsQueuedWhereItWasCreated(t *testing.T) {
	w := Queued(storage.Work{ID: "w1", CreatedAt: t0}, "env_1", "sesn_1")
	if w.State != api.WorkQueued || !w.QueuedAt.Equal(t0) || w.EnvironmentID != "env_1" || w.SessionID != "sesn_1" || w.Metadata == nil || w.ClaimedAt != nil {
		t.Fatalf("%+v", w)
	}
}
