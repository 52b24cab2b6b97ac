package storage

import (
	"context"
	"errors"
)

// IsRefusal tells a write's own refusal, decided by reading the database
// (not found, archived, a conflict, a failed precondition, a full store, a
// caller that gave up), from a failure of the database. A group commit runs
// on after a refusal, which changed nothing, but not after a failure.
func IsRefusal(err error) bool {
	var (
		conflict     *PathConflictError
		precondition *PreconditionFailedError
		full         *StoreFullError
	)
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrStoreArchived) ||
		errors.As(err, &conflict) || errors.As(err, &precondition) || errors.As(err, &full) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
