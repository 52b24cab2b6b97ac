package storagetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// testTurns: a session's turn has one holder at a time; releasing it lets
// the next taker in, and other sessions' turns are independent.
func testTurns(t *testing.T, open Factory) {
	s := open(t, time.Now)
	defer s.Close()
	ctx := t.Context()
	release, ok, err := s.TryTurn(ctx, "sesn_a")
	if err != nil || !ok {
		t.Fatalf("first TryTurn = %v, %v; want the turn", ok, err)
	}
	if _, ok, err := s.TryTurn(ctx, "sesn_a"); err != nil || ok {
		t.Fatalf("second TryTurn of a held turn = %v, %v; want refused", ok, err)
	}
	other, ok, err := s.TryTurn(ctx, "sesn_b")
	if err != nil || !ok {
		t.Fatalf("TryTurn of another session = %v, %v; want the turn", ok, err)
	}
	other()
	release()
	again, ok, err := s.TryTurn(ctx, "sesn_a")
	if err != nil || !ok {
		t.Fatalf("TryTurn after release = %v, %v; want the turn", ok, err)
	}
	again()
}

// testTurnCandidates: the sessions whose log may call for a turn are those
// mid-turn and the idle ones whose newest event a client sent; never an
// idle one the runtime answered, a terminated or an archived one.
func testTurnCandidates(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	session := func(types ...string) string {
		t.Helper()
		sess, _ := f.newSession(f.env)
		for _, typ := range types {
			e := api.Event{Type: typ}
			switch typ {
			case api.EventUserMessage:
				e = api.UserMessage("hello")
			case api.EventSessionStatusIdle:
				e.StopReason = &api.StopReason{Type: api.StopEndTurn}
			}
			if _, err := f.s.AppendEvents(f.ctx, sess.ID, []api.Event{e}, nil); err != nil {
				t.Fatal(err)
			}
		}
		return sess.ID
	}
	running := session(api.EventUserMessage, api.EventSessionStatusRunning)
	rescheduling := session(api.EventSessionStatusRescheduled)
	unanswered := session(api.EventUserMessage, api.EventSessionStatusRunning, api.EventSessionStatusIdle, api.EventUserMessage)
	session(api.EventUserMessage, api.EventSessionStatusRunning, api.EventSessionStatusIdle) // answered
	session()                                                                                // never spoken to
	session(api.EventUserMessage, api.EventSessionStatusTerminated)                          // terminated
	archived := session(api.EventUserMessage, api.EventSessionStatusRunning)
	if _, err := f.s.UpdateSession(f.ctx, archived, func(s *api.Session) error {
		now := f.clock.Now()
		s.ArchivedAt = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var got []storage.TurnCandidate
	for after := ""; ; {
		page, err := f.s.TurnCandidates(f.ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].SessionID
	}
	want := map[string]string{running: api.SessionRunning, rescheduling: api.SessionRescheduling, unanswered: api.SessionIdle}
	if len(got) != len(want) || !slices.IsSortedFunc(got, func(a, b storage.TurnCandidate) int { return strings.Compare(a.SessionID, b.SessionID) }) {
		t.Fatalf("candidates = %+v; want %v in id order", got, want)
	}
	for _, c := range got {
		v, err := f.s.ViewSession(f.ctx, c.SessionID)
		if err != nil || want[c.SessionID] != c.Status || c.Seq != v.Seq {
			t.Fatalf("candidate %+v; want status %q and the newest event's seq %d (%v)", c, want[c.SessionID], v.Seq, err)
		}
	}
}
