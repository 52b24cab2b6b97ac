package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// appendMessages appends n user messages to a session in storage, in
// sends of at most 7, waking its followers after each, and returns the
// events' ids in order.
func (f *fixture) appendMessages(sessionID string, n int) []string {
	f.t.Helper()
	var out []string
	for n > 0 {
		k := min(n, 7)
		evs := make([]api.Event, k)
		for i := range evs {
			evs[i] = api.UserMessage(fmt.Sprintf("message %d", len(out)+i))
		}
		stored, err := f.db.AppendEvents(f.ctx, sessionID, evs, nil)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, e := range stored {
			out = append(out, e.ID)
		}
		f.app.Sessions.LogChanged(sessionID)
		n -= k
	}
	return out
}

// take reads from a follower until it has n events, as a stream does.
func take(t *testing.T, fl *app.Follower, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		changed := fl.Changed()
		batch, more, err := fl.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		for _, e := range batch {
			got = append(got, frameID(e.Frame))
		}
		if more || len(got) >= n {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d of %d events arrived", len(got), n)
		}
	}
	return got
}

func sameOrder(t *testing.T, who string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s got %d events; want %d", who, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d is %s; want %s (lost or reordered)", who, i, got[i], want[i])
		}
	}
}

// Followers of one session share its reader: live ones and one that falls
// further behind than the shared ring holds (it reads the database until
// it catches up) each get every event once, in order; one that starts
// from a position gets what came after it.
func TestFollowersGetEveryEventInOrder(t *testing.T) {
	f := newFixture(t, app.Config{FollowRing: 16})
	sess, _ := f.session()
	first := f.appendMessages(sess.ID, 5)
	firstSeq := func() int64 {
		all, err := f.db.ListEvents(f.ctx, sess.ID, storage.EventQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return all[len(all)-1].Seq
	}()

	live := make([]*app.Follower, 3)
	for i := range live {
		live[i] = f.app.Sessions.Follow(sess.ID, firstSeq)
		defer live[i].Close()
	}
	fromStart := f.app.Sessions.Follow(sess.ID, 0)
	defer fromStart.Close()
	slow := f.app.Sessions.Follow(sess.ID, firstSeq)
	defer slow.Close()

	// More than the ring keeps (16 events), so the slow one, which
	// reads nothing meanwhile, must go back to the database.
	want := f.appendMessages(sess.ID, 60)
	for i, fl := range live {
		sameOrder(t, fmt.Sprintf("live follower %d", i), take(t, fl, len(want)), want)
	}
	sameOrder(t, "slow follower", take(t, slow, len(want)), want)
	sameOrder(t, "follower from the start", take(t, fromStart, len(first)+len(want)), append(first, want...))

	more := f.appendMessages(sess.ID, 3)
	sameOrder(t, "slow follower, caught up", take(t, slow, 3), more)
}

// A deleted session ends its followers with storage.ErrNotFound.
func TestFollowerSeesTheSessionDeleted(t *testing.T) {
	f := newFixture(t, app.Config{})
	sess, _ := f.session()
	fl := f.app.Sessions.Follow(sess.ID, 0)
	defer fl.Close()
	f.appendMessages(sess.ID, 1)
	take(t, fl, 1)
	if err := f.db.DeleteSession(f.ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	f.app.Sessions.Ended(sess.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		changed := fl.Changed()
		_, _, err := fl.Next(ctx)
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the follower of a deleted session was never told")
		}
	}
}

// frameID is the id line of an SSE frame.
func frameID(frame []byte) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(string(frame), "id: "), "\n")
	return id
}
