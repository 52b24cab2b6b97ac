package workqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Rows is what the bodies of the work queue's writes need of a backend,
// inside one of its write transactions: its clock, the rows of work items
// and credentials, and the session an item serves. A backend locks the rows it returns where it
// locks rows (PostgreSQL: FOR UPDATE, SKIP LOCKED for claims); the order
// of reads, rules and writes is here, once for every backend.
type Rows interface {
	// Now is the transaction's clock (the database's, or an injected one).
	Now(ctx context.Context) (time.Time, error)
	// Work loads one item to change it; storage.ErrNotFound if absent.
	Work(ctx context.Context, environmentID, workID string) (storage.Work, error)
	// Due reads the clock (as Now) and lists, in one read at that clock,
	// the items of c's environment whose lease may have lapsed (as Leased)
	// and the queued items a claim may take, oldest first (a backend may
	// return only the first of each kind: unclaimed, and reclaimable when
	// c reclaims). A backend may read the clock in the same round trip.
	Due(ctx context.Context, c storage.Claim) (now time.Time, leased, claimable []storage.Work, err error)
	// Leased lists the items whose lease may have lapsed at now.
	Leased(ctx context.Context, environmentID string, now time.Time) ([]storage.Work, error)
	// SaveWork writes an item back.
	SaveWork(ctx context.Context, w storage.Work) error
	// Session loads a session, locked against appends and other changes
	// of its items; storage.ErrNotFound if absent.
	Session(ctx context.Context, sessionID string) (api.Session, error)
	// SessionWork lists every item of a session, to change them.
	SessionWork(ctx context.Context, sessionID string) ([]storage.Work, error)
	// InsertWork stores a new item.
	InsertWork(ctx context.Context, w storage.Work) error
	// InsertCredential stores a minted sessions token.
	InsertCredential(ctx context.Context, c storage.Credential, hash string) error
}

// ClaimIn settles the lapsed leases of c's environment in rows (as
// ExpireIn) and claims the next item for c, minting its sessions token, at
// one reading of rows' clock: a poll settles and claims in one
// transaction. settled is what the expiry changed, returned with the claim
// or with storage.ErrNoWork.
//
// The candidates are read with the leases, before the expiry: an item it
// puts back in the queue is a candidate in its new state instead of the
// row read. That finds the item a read after the expiry would: the oldest
// unclaimed one is the oldest of those read and those put back, and an
// item put back is older in the queue than any reclaimable one it hid.
func ClaimIn(ctx context.Context, rows Rows, c storage.Claim) (claimed storage.Work, settled []storage.Work, err error) {
	now, leased, candidates, err := rows.Due(ctx, c)
	if err != nil {
		return storage.Work{}, nil, err
	}
	if settled, err = expire(ctx, rows, leased, now); err != nil {
		return storage.Work{}, nil, err
	}
	candidates = slices.DeleteFunc(candidates, func(w storage.Work) bool {
		return slices.ContainsFunc(settled, func(x storage.Work) bool { return x.ID == w.ID })
	})
	w, ok := Next(append(candidates, settled...), now, c.ReclaimOlderThan)
	if !ok {
		return storage.Work{}, settled, storage.ErrNoWork
	}
	w, tok := Claim(w, c, now)
	if err := rows.SaveWork(ctx, w); err != nil {
		return storage.Work{}, nil, err
	}
	if err := rows.InsertCredential(ctx, tok, c.TokenHash); err != nil {
		return storage.Work{}, nil, fmt.Errorf("mint sessions token for %s: %w", w.ID, err)
	}
	return w, settled, nil
}

// ChangeIn applies rule (Ack, a Heartbeat, a Stop) to one item in rows at
// their clock, and saves the result when the rule changed it.
func ChangeIn(ctx context.Context, rows Rows, environmentID, workID string, rule func(storage.Work, time.Time) (storage.Work, bool, error)) (storage.Work, error) {
	w, err := rows.Work(ctx, environmentID, workID)
	if err != nil {
		return storage.Work{}, err
	}
	now, err := rows.Now(ctx)
	if err != nil {
		return storage.Work{}, err
	}
	w, changed, err := rule(w, now)
	if err != nil {
		return storage.Work{}, err
	}
	if changed {
		if err := rows.SaveWork(ctx, w); err != nil {
			return storage.Work{}, err
		}
	}
	return w, nil
}

// ExpireIn settles the lapsed leases of an environment in rows: each item
// goes back to the queue or stops (Expire). It returns every item settled.
func ExpireIn(ctx context.Context, rows Rows, environmentID string) ([]storage.Work, error) {
	now, err := rows.Now(ctx)
	if err != nil {
		return nil, err
	}
	leased, err := rows.Leased(ctx, environmentID, now)
	if err != nil {
		return nil, err
	}
	return expire(ctx, rows, leased, now)
}

// expire settles the leases among leased that lapsed by now, and returns
// the items it changed.
func expire(ctx context.Context, rows Rows, leased []storage.Work, now time.Time) (settled []storage.Work, err error) {
	for _, w := range leased {
		if !Lapsed(w, now) {
			continue
		}
		w = Expire(w, now)
		settled = append(settled, w)
		if err := rows.SaveWork(ctx, w); err != nil {
			return nil, err
		}
	}
	return settled, nil
}

// Requeued reports whether one of the items an expiry settled went back to
// the queue (its pollers may want waking).
func Requeued(settled []storage.Work) bool {
	return slices.ContainsFunc(settled, func(w storage.Work) bool { return w.State == api.WorkQueued })
}

// HeartbeatRule is the rule of a HeartbeatWork: Heartbeat with h.
func HeartbeatRule(h storage.Heartbeat) func(storage.Work, time.Time) (storage.Work, bool, error) {
	return func(w storage.Work, now time.Time) (storage.Work, bool, error) {
		return Heartbeat(w, h, now)
	}
}

// StopRule is the rule of a StopWork: Stop, which changes the item
// whenever it succeeds.
func StopRule(force bool) func(storage.Work, time.Time) (storage.Work, bool, error) {
	return func(w storage.Work, now time.Time) (storage.Work, bool, error) {
		w, err := Stop(w, force, now)
		return w, err == nil, err
	}
}

// Update is the rule of an UpdateWork: fn edits the item (its metadata),
// which keeps its identity whatever fn did.
func Update(environmentID, workID string, fn func(*storage.Work) error) func(storage.Work, time.Time) (storage.Work, bool, error) {
	return func(w storage.Work, _ time.Time) (storage.Work, bool, error) {
		if err := fn(&w); err != nil {
			return w, false, err
		}
		w.ID, w.EnvironmentID = workID, environmentID
		return w, true, nil
	}
}

// EnsureIn queues w (ID, Metadata and CreatedAt set; a zero CreatedAt is
// the rows' clock) for a session that Wanted one, and returns it and true;
// false when the session needed nothing.
func EnsureIn(ctx context.Context, rows Rows, sessionID string, w storage.Work) (storage.Work, bool, error) {
	sess, err := rows.Session(ctx, sessionID)
	if err != nil {
		return storage.Work{}, false, err
	}
	items, err := rows.SessionWork(ctx, sessionID)
	if err != nil || !Wanted(sess, items) {
		return storage.Work{}, false, err
	}
	if w.CreatedAt.IsZero() {
		if w.CreatedAt, err = rows.Now(ctx); err != nil {
			return storage.Work{}, false, err
		}
	}
	w = Queued(w, sess.EnvironmentID, sessionID)
	if err := rows.InsertWork(ctx, w); err != nil {
		return storage.Work{}, false, err
	}
	return w, true, nil
}

// StopSessionIn force-stops every live item of a session (it is being
// deleted): none may be claimed or renewed again.
func StopSessionIn(ctx context.Context, rows Rows, sessionID string) error {
	items, err := rows.SessionWork(ctx, sessionID)
	if err != nil {
		return err
	}
	now, err := rows.Now(ctx)
	if err != nil {
		return err
	}
	for _, w := range items {
		if !Live(w) {
			continue
		}
		if w, err = Stop(w, true, now); err != nil {
			return err
		}
		if err := rows.SaveWork(ctx, w); err != nil {
			return err
		}
	}
	return nil
}
