package storage

import "context"

// QueueGauges reads the figures /metrics reports of every environment's
// queue, all at once: a scrape costs one query however many environments
// there are.
type QueueGauges interface {
	// QueueDepths counts the queue of every environment not archived, in
	// id order: Depth and Pending as workqueue.Stats counts them (queued
	// items nobody claimed; queued items claimed but not acknowledged),
	// zeros for an empty queue.
	QueueDepths(ctx context.Context) ([]QueueDepth, error)
}

// QueueDepth is one environment's queue, counted.
type QueueDepth struct {
	EnvironmentID string
	Depth         int64
	Pending       int64
}
