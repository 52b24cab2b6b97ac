// Package storage is the persistence boundary of the server: one interface,
// Store, implemented once over SQL (sqlstore/) for every backend (sqlite/
// and postgres/) and checked by one conformance suite (storagetest/).
//
// Each method is one transaction. Rules that need atomicity (a path is free,
// a precondition still holds, a store is not full) are enforced inside the
// transaction and reported as the typed errors below, so every backend
// behaves the same and the HTTP layer only translates. The rules are
// written once: those that need no SQL here and in package workqueue (the
// memory writes in memorywrites.go), the rest with their SQL in package
// sqlstore. A backend offers only what its database does its own way:
// connections, transactions, placeholders, locks, errors, notifications.
//
// Which types are storage's. What a backend stores as columns is a row of
// storage's own: a memory store, memory and version (MemoryStoreRow,
// MemoryRow, VersionRow, with the Actor who wrote it), an Environment, a
// Work item with its lease, QueueStats, a Credential. Backends read and write those without knowing the wire: type
// discriminators, the wire's nesting (a work item's data object) and the
// empty collections the official SDK requires are added by internal/server,
// in one mapping, so an API change does not reach the SQL.
//
// Agents, sessions and their events are different: they are documents the
// API defines, stored as their JSON, and they stay api.Agent, api.Session
// and api.Event here. The rules that read them inside a transaction are the
// API's rules over the API's fields — the append guard (agent.Check), the
// runtime's SessionView, Append's stamping — and the SQLite backend keeps
// the decoded logs in memory: a storage copy of every event kind would be
// a second definition of the wire, converted on every append, with nothing
// to gain. A backend treats them as bodies: it sets no field of them, only
// extracts the columns it finds them by (a session's environment, agent,
// status and archived_at; an event's type; a resource's store) and keeps a
// session's resources in rows of their own, because deleting or archiving
// a store must find its sessions inside its transaction.
package storage

import (
	"context"
	"errors"
	"time"
)

// Store is everything the server persists.
type Store interface {
	Credentials
	MemoryStores
	ControlPlane
	QueueGauges
	Users
	Turns
	Webhooks
	Skills
	Retention
	Vaults
	// Close releases the backend's connections.
	Close() error
}

// ErrNotFound reports that the addressed object does not exist (or is
// invisible to the caller). The HTTP layer answers 404.
var ErrNotFound = errors.New("storage: not found")

// ErrUnavailable reports that the database cannot be reached right now
// (connection lost, server restarting). The HTTP layer answers 503 with
// x-should-retry: true (false when joined with ErrOutcomeUnknown); the
// backend reconnects by itself.
var ErrUnavailable = errors.New("storage: database unavailable")

// ErrOutcomeUnknown reports a write whose COMMIT was sent but whose answer
// was lost with the connection: it may have landed or not. It comes joined
// with ErrUnavailable. The HTTP layer answers 503 with x-should-retry:
// false, saying to read the object back before writing again (a create
// or a guarded update that landed answers 409 when repeated).
var ErrOutcomeUnknown = errors.New("storage: the write's outcome is unknown")

// Wake names what changed: the log of session Key (TopicSession) or the
// queue of environment Key (TopicQueue).
type Wake struct {
	Topic string
	Key   string
}

// Wake topics.
const (
	TopicSession = "session"
	TopicQueue   = "queue"
)

// Waker is offered by a backend several servers share: each server learns
// of the changes another committed, so that its event streams and long
// polls wake at once instead of at their next keepalive. A backend only
// one process uses (SQLite) does not offer it.
type Waker interface {
	// Listen starts delivering every committed change to fn, from any
	// server, until ctx ends; it returns once it listens. It reconnects by
	// itself when the database goes away.
	Listen(ctx context.Context, fn func(Wake)) error
}

// PollLog is offered by a backend several servers share, so that
// workers_polling counts the polls every server saw: its ClaimWork notes
// each poll (Claim.PolledAt) in the claim's transaction. A backend only one
// process uses (SQLite) does not offer it: the server counts in memory.
type PollLog interface {
	// CountPollers counts the workers that polled environmentID at or
	// after since.
	CountPollers(ctx context.Context, environmentID string, since time.Time) (int64, error)
}
