package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/memstore/memstore/internal/retention"
)

// Retention deletes the versions a store's retention policy no longer keeps
// (internal/retention says which). The service layer's pruner calls it in
// small batches beside the server, so a store with a long history never
// holds the writers up for long.
type Retention interface {
	// PruneVersions deletes, in one transaction, up to limit of store
	// storeID's versions that policy does not keep at now, oldest sequence
	// first, and returns how many it deleted. It never deletes a memory's
	// newest version nor a redacted one. The store's PrunedThrough rises to
	// the highest sequence deleted. Fewer than limit means the store is
	// pruned for now.
	PruneVersions(ctx context.Context, storeID string, policy retention.Policy, now time.Time, limit int) (int, error)
}

// RetentionSetting is a store's own policy, or Inherit to follow the
// server's default again.
type RetentionSetting struct {
	Inherit bool
	Policy  retention.Policy
}

// ChangesPrunedError refuses a change-feed cursor below the store's
// PrunedThrough: changes after it were deleted by retention, so following
// the feed from there would skip them. The reader starts over from a
// snapshot.
type ChangesPrunedError struct {
	After, PrunedThrough int64
}

func (e *ChangesPrunedError) Error() string {
	return fmt.Sprintf("storage: sequence %d is older than the store's retained changes (pruned through %d)", e.After, e.PrunedThrough)
}
