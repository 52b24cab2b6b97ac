package storagetest

import (
	"errors"
	"testing"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// testClaimSettlesLapsedLeases: a claim settles the environment's lapsed
// leases in its transaction and takes an item that put back in the queue
// when it is the oldest; a stopping item whose lease lapsed is stopped and
// stays settled even when nothing is left to claim.
func testClaimSettlesLapsedLeases(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	_, older := f.newSession(f.env)
	f.clock.Advance(time.Second)
	_, stopping := f.newSession(f.env)
	f.clock.Advance(time.Second)
	_, younger := f.newSession(f.env)
	for _, want := range []string{older, stopping} {
		if w, _, err := f.claim(f.env, "w1"); err != nil || w.ID != want {
			t.Fatalf("claim = %+v, %v; want %s", w, err, want)
		}
	}
	if _, err := f.s.StopWork(f.ctx, f.env.ID, stopping, false); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute) // both leases (a minute) lapse
	claim := func() (storage.Work, map[string]string, error) {
		t.Helper()
		w, settled, err := f.s.ClaimWork(f.ctx, storage.Claim{EnvironmentID: f.env.ID, WorkerID: "w2", ClaimTTL: time.Minute, ReclaimOlderThan: 5 * time.Second,
			Token: storage.Credential{ID: ids.New(ids.SessionsToken)}, TokenHash: ids.New("h")})
		states := map[string]string{}
		for _, x := range settled {
			states[x.ID] = x.State
		}
		return w, states, err
	}
	w, settled, err := claim()
	if err != nil || w.ID != older || w.WorkerID != "w2" {
		t.Fatalf("claim after the leases lapsed = %+v, %v; want %s, put back and taken by w2", w, err, older)
	}
	if len(settled) != 2 || settled[older] != api.WorkQueued || settled[stopping] != api.WorkStopped {
		t.Fatalf("settled = %v; want %s queued and %s stopped", settled, older, stopping)
	}
	if w, settled, err := claim(); err != nil || w.ID != younger || len(settled) != 0 {
		t.Fatalf("next claim = %+v (settled %v), %v; want %s and nothing settled", w, settled, err, younger)
	}
	// Nothing claimable: a lapsed lease is still settled, and committed.
	if _, err := f.s.StopWork(f.ctx, f.env.ID, older, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StopWork(f.ctx, f.env.ID, younger, false); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if _, settled, err := claim(); !errors.Is(err, storage.ErrNoWork) || len(settled) != 1 || settled[younger] != api.WorkStopped {
		t.Fatalf("claim with nothing claimable = %v (settled %v); want ErrNoWork, %s stopped", err, settled, younger)
	}
	if got, err := f.s.GetWork(f.ctx, f.env.ID, younger); err != nil || got.State != api.WorkStopped {
		t.Fatalf("after it: %+v, %v; want %s stopped", got, err, younger)
	}
}

// testClaimReadsEnvironment: a claim reads its environment in its
// transaction. An archived one hands out nothing, not even an item queued
// before the archive; a missing one is not found.
func testClaimReadsEnvironment(t *testing.T, open Factory) {
	f := newCPFixture(t, open)
	_, queued := f.newSession(f.env)
	if _, err := f.s.UpdateEnvironment(f.ctx, f.env.ID, func(e *storage.Environment) error {
		now := f.clock.Now()
		e.ArchivedAt = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if w, _, err := f.claim(f.env, "w1"); !errors.Is(err, storage.ErrEnvironmentArchived) {
		t.Fatalf("claim from an archived environment = %+v, %v; want storage.ErrEnvironmentArchived", w, err)
	}
	if w, err := f.s.GetWork(f.ctx, f.env.ID, queued); err != nil || w.ClaimedAt != nil {
		t.Fatalf("item of the archived environment = %+v, %v; want it unclaimed", w, err)
	}
	missing := storage.Environment{ID: ids.New(ids.Environment)}
	if w, _, err := f.claim(missing, "w1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("claim from a missing environment = %+v, %v; want storage.ErrNotFound", w, err)
	}
}
