package console

import (
	"cmp"
	"context"
	"slices"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// workerLoad is how many sessions one worker serves now: the items it
// holds that are starting, active or stopping. A worker that serves many
// sessions at once (worker poll --max-sessions) shows here with its count.
type workerLoad struct {
	WorkerID string
	Serving  int
}

// workerLoadScan bounds how many of an environment's newest items are
// read to count them: an item being served is a recent one, and the page
// must not read a long-lived environment's whole history.
const workerLoadScan = 10 * api.MaxListLimit

// workerLoads counts the sessions each worker of the environment serves,
// busiest first.
func workerLoads(ctx context.Context, store storage.Store, envID string) ([]workerLoad, error) {
	counts := map[string]int{}
	q := storage.ListQuery{Limit: api.MaxListLimit}
	for read := 0; read < workerLoadScan; {
		items, err := store.ListWork(ctx, envID, q)
		if err != nil {
			return nil, err
		}
		for _, w := range items {
			switch w.State {
			case api.WorkStarting, api.WorkActive, api.WorkStopping:
				if w.WorkerID != "" {
					counts[w.WorkerID]++
				}
			}
		}
		read += len(items)
		if len(items) < q.Limit {
			break
		}
		q.After = items[len(items)-1].ID
	}
	loads := make([]workerLoad, 0, len(counts))
	for id, n := range counts {
		loads = append(loads, workerLoad{id, n})
	}
	slices.SortFunc(loads, func(a, b workerLoad) int { return cmp.Or(b.Serving-a.Serving, cmp.Compare(a.WorkerID, b.WorkerID)) })
	return loads, nil
}
