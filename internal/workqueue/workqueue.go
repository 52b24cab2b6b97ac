// Package workqueue is the work item's lease state machine (SPEC §4): which
// item may be claimed, what a claim, an ack, a heartbeat, a stop and a
// lapsed lease do to it, and how a queue is counted.
//
// Every rule is a pure function over storage.Work rows and a time the
// caller passes in, and the order in which a claim, a change or an expiry
// reads, decides and writes is written once too (rows.go, over a backend's
// Rows), so the storage backends only load rows, lock them and save: SQLite
// and PostgreSQL cannot drift apart, and the rules are tested without a
// database.
package workqueue

import (
	"slices"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Live reports whether an item still serves its session: anything but
// stopped.
func Live(w storage.Work) bool { return w.State != api.WorkStopped }

// AnyLive reports whether one of a session's items still serves it.
func AnyLive(items []storage.Work) bool { return slices.ContainsFunc(items, Live) }

// Queued is w (its ID, Metadata and CreatedAt set by the caller) as a new
// item of session sessionID in environmentID: queued, and entering the
// queue when it was created.
func Queued(w storage.Work, environmentID, sessionID string) storage.Work {
	w.EnvironmentID, w.SessionID = environmentID, sessionID
	w.State = api.WorkQueued
	w.QueuedAt = w.CreatedAt
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	return w
}

// Wanted reports whether sess needs a new item, given its items: it is
// neither terminated nor archived, and no live item serves it.
func Wanted(sess api.Session, items []storage.Work) bool {
	return !storage.Ended(sess) && sess.ArchivedAt == nil && !AnyLive(items)
}

// Claimable reports whether a poll may hand w out at now: a queued item
// nobody claimed, or (when reclaimOlderThan is positive) one claimed but
// not acknowledged for at least that long.
func Claimable(w storage.Work, now time.Time, reclaimOlderThan time.Duration) bool {
	if w.State != api.WorkQueued {
		return false
	}
	if w.ClaimedAt == nil {
		return true
	}
	return reclaimOlderThan > 0 && !w.ClaimedAt.After(now.Add(-reclaimOlderThan))
}

// Next returns the item a claim gets among candidates: the claimable one
// that entered the queue first (ties by id), and false when none is.
func Next(candidates []storage.Work, now time.Time, reclaimOlderThan time.Duration) (storage.Work, bool) {
	var best storage.Work
	found := false
	for _, w := range candidates {
		if !Claimable(w, now, reclaimOlderThan) {
			continue
		}
		if !found || w.QueuedAt.Before(best.QueuedAt) || (w.QueuedAt.Equal(best.QueuedAt) && w.ID < best.ID) {
			best, found = w, true
		}
	}
	return best, found
}

// Claim gives w to c's worker at now: the claim holds for c.ClaimTTL
// unless acknowledged or renewed, and only c.Token speaks for it. It
// returns the item and the sessions token to store under c.TokenHash.
func Claim(w storage.Work, c storage.Claim, now time.Time) (storage.Work, storage.Credential) {
	w.ClaimedAt = ptr(now)
	w.WorkerID = c.WorkerID
	w.TokenID = c.Token.ID
	w.LeaseExpiresAt = ptr(now.Add(c.ClaimTTL))
	w.LeaseTTLSeconds = int64(c.ClaimTTL / time.Second)
	w.LatestHeartbeatAt = nil
	tok := c.Token
	tok.Kind = storage.SessionsToken
	tok.SessionID, tok.WorkID, tok.EnvironmentID = w.SessionID, w.ID, w.EnvironmentID
	tok.CreatedAt = now
	return w, tok
}

// Lapsed reports whether w's lease ran out at now.
func Lapsed(w storage.Work, now time.Time) bool {
	return Live(w) && w.LeaseExpiresAt != nil && !w.LeaseExpiresAt.After(now)
}

// Expire settles a lapsed lease: the item goes back to the queue, keeping
// its place, except a stopping one, which is stopped (asked to stop and no
// longer heard from: nothing to hand to another worker).
func Expire(w storage.Work, now time.Time) storage.Work {
	if w.State == api.WorkStopping {
		w.State = api.WorkStopped
		w.StoppedAt = ptr(now)
		w.LeaseExpiresAt = nil
		return w
	}
	return Release(w)
}

// Release puts a claimed item back in the queue, keeping its place: the
// claim, the lease and its heartbeat history go, and with them the current
// token's authority.
func Release(w storage.Work) storage.Work {
	w.State = api.WorkQueued
	w.ClaimedAt, w.WorkerID, w.TokenID = nil, "", ""
	w.LeaseExpiresAt, w.LeaseTTLSeconds = nil, 0
	w.AcknowledgedAt, w.StartedAt, w.LatestHeartbeatAt = nil, nil, nil
	return w
}

// Ack confirms a claim: queued → starting. An item already acknowledged
// is returned unchanged (changed false). ErrWorkStopped,
// ErrWorkNotClaimed.
func Ack(w storage.Work, now time.Time) (out storage.Work, changed bool, err error) {
	switch {
	case w.State == api.WorkStopped:
		return w, false, storage.ErrWorkStopped
	case w.State == api.WorkQueued && w.ClaimedAt == nil:
		return w, false, storage.ErrWorkNotClaimed
	case w.State == api.WorkQueued:
		w.State = api.WorkStarting
		w.AcknowledgedAt = ptr(now)
		return w, true, nil
	}
	return w, false, nil
}

// Heartbeat renews w's lease for h at now. A stopped item is returned
// unchanged (changed false). A *LeaseMismatchError when h's token is not
// the current holder's, or its expectation is stale (not compared while
// stopping).
func Heartbeat(w storage.Work, h storage.Heartbeat, now time.Time) (out storage.Work, changed bool, err error) {
	// A token of an earlier claim never renews, whatever it expects: its
	// lease is gone even if the new holder has not beaten yet.
	if h.TokenID != "" && h.TokenID != w.TokenID {
		return w, false, &storage.LeaseMismatchError{Current: w}
	}
	if w.State == api.WorkStopped {
		return w, false, nil
	}
	if w.ClaimedAt == nil {
		return w, false, &storage.LeaseMismatchError{Current: w}
	}
	want := api.NoHeartbeat
	if w.LatestHeartbeatAt != nil {
		want = storage.HeartbeatToken(*w.LatestHeartbeatAt)
	}
	// A stopping item is not compared, as in the hosted API: its worker
	// must learn of the stop on its next beat, not lose the lease to a 412
	// and leave without its final sync.
	if h.Expected != want && w.State != api.WorkStopping {
		return w, false, &storage.LeaseMismatchError{Current: w}
	}
	w.LatestHeartbeatAt = ptr(now)
	w.LeaseExpiresAt = ptr(now.Add(h.TTL))
	w.LeaseTTLSeconds = int64(h.TTL / time.Second)
	switch w.State {
	case api.WorkQueued, api.WorkStarting:
		w.State = api.WorkActive
		if w.AcknowledgedAt == nil {
			w.AcknowledgedAt = ptr(now)
		}
		w.StartedAt = ptr(now)
	}
	return w, true, nil
}

// Stop stops w at now: forced, or with nobody holding it who could be
// told, it is stopped at once; otherwise it is stopping until its worker
// hears of it. ErrWorkStopped when it already is.
func Stop(w storage.Work, force bool, now time.Time) (storage.Work, error) {
	if w.State == api.WorkStopped {
		return w, storage.ErrWorkStopped
	}
	if w.StopRequestedAt == nil {
		w.StopRequestedAt = ptr(now)
	}
	if force || w.ClaimedAt == nil {
		w.State = api.WorkStopped
		w.StoppedAt = ptr(now)
		w.LeaseExpiresAt = nil
	} else {
		w.State = api.WorkStopping
	}
	return w, nil
}

// Stats counts an environment's queue from its queued items: depth is
// what nobody claimed, pending what is claimed but not acknowledged.
func Stats(queued []storage.Work) storage.QueueStats {
	var st storage.QueueStats
	for _, w := range queued {
		if w.State != api.WorkQueued {
			continue
		}
		if w.ClaimedAt == nil {
			st.Depth++
		} else {
			st.Pending++
		}
		if st.OldestQueuedAt == nil || w.QueuedAt.Before(*st.OldestQueuedAt) {
			st.OldestQueuedAt = ptr(w.QueuedAt)
		}
	}
	return st
}

func ptr(t time.Time) *time.Time { return &t }
