package app

import (
	"context"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/retention"
	"github.com/memstore/memstore/internal/storage"
)

// Version retention runs beside the server: every interval the pruner walks
// the stores and deletes, in small transactions, the versions each store's
// policy (or the server's default) no longer keeps. Writers wait at most for
// one batch's delete; a store with a long history is pruned over several
// batches, never in one long transaction.

// DefaultPruneBatch is how many versions one pruning transaction deletes at
// most (Config.PruneBatch's default).
const DefaultPruneBatch = 200

// RetentionOf is the policy in force for st, and whether it is the server's
// default rather than the store's own.
func (a *App) RetentionOf(st storage.MemoryStoreRow) (p retention.Policy, inherited bool) {
	if st.Retention != nil {
		return *st.Retention, false
	}
	return a.cfg.DefaultRetention, true
}

// RunRetention prunes every interval until ctx ends. Every replica sharing a
// database may run it: deleting a version twice deletes nothing.
func (a *App) RunRetention(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := a.PruneVersions(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("pruning memory versions failed; trying again at the next round", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PruneVersions makes one round over every store (archived ones too) and
// returns how many versions it deleted.
func (a *App) PruneVersions(ctx context.Context) (int, error) {
	batch := a.cfg.PruneBatch
	if batch <= 0 {
		batch = DefaultPruneBatch
	}
	total := 0
	q := storage.MemoryStoreQuery{IncludeArchived: true, Limit: 100}
	for {
		page, err := a.store.ListMemoryStores(ctx, q)
		if err != nil {
			return total, err
		}
		for _, st := range page.Items {
			n, err := a.pruneStore(ctx, st, batch)
			total += n
			if err != nil {
				return total, err
			}
		}
		if page.Next == "" {
			return total, nil
		}
		q.Cursor = page.Next
	}
}

// pruneStore deletes what st's policy lets go, batch by batch.
func (a *App) pruneStore(ctx context.Context, st storage.MemoryStoreRow, batch int) (int, error) {
	policy, _ := a.RetentionOf(st)
	if policy.KeepsAll() {
		return 0, nil
	}
	total := 0
	for ctx.Err() == nil {
		n, err := a.store.PruneVersions(ctx, st.ID, policy, a.now(), batch)
		total += n
		if err != nil || n < batch {
			if total > 0 {
				a.log.InfoContext(ctx, "memory versions pruned", "memory_store_id", st.ID, "versions", total, "retention", policy.String())
			}
			return total, err
		}
	}
	return total, ctx.Err()
}

// checkRetention refuses a store policy out of bounds (nil is the default).
func checkRetention(p *retention.Policy) error {
	if p == nil {
		return nil
	}
	if err := p.Check(); err != nil {
		return &api.Error{Type: api.InvalidRequest, Message: api.ExtensionRetentionField + ": " + err.Error()}
	}
	return nil
}
