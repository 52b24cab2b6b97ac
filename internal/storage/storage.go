// Package storage is the persistence boundary of the server: one interface,
// Store, implemented by every backend (sqlite/ today, postgres/ later) and
// checked by one conformance suite (storagetest/).
//
// Each method is one transaction. Rules that need atomicity (a path is free,
// a precondition still holds, a store is not full) are enforced inside the
// backend and reported as the typed errors below, so every backend behaves
// the same and the HTTP layer only translates.
package storage

import "errors"

// Store is everything the server persists.
type Store interface {
	Credentials
	MemoryStores
	ControlPlane
	Users
	// Close releases the backend's connections.
	Close() error
}

// ErrNotFound reports that the addressed object does not exist (or is
// invisible to the caller). The HTTP layer answers 404.
var ErrNotFound = errors.New("storage: not found")
