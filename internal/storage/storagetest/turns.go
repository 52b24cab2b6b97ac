package storagetest

import (
	"testing"
	"time"
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
