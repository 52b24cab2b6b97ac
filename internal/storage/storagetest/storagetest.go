// Package storagetest is the conformance suite every storage backend runs:
// the same behaviour asserted against SQLite and PostgreSQL, so a backend
// cannot drift from the contract unnoticed.
package storagetest

import (
	"testing"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/testclock"
)

// Factory opens a fresh, empty store whose clock is now. Each call must
// return an independent database; the suite closes it.
type Factory func(t *testing.T, now func() time.Time) storage.Store

// Run runs the whole suite against the backend that open makes.
func Run(t *testing.T, open Factory) {
	t.Run("Credentials", func(t *testing.T) { testCredentials(t, open) })
	t.Run("Environments", func(t *testing.T) { testEnvironments(t, open) })
	t.Run("Agents", func(t *testing.T) { testAgents(t, open) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open) })
	t.Run("StoresOfSessions", func(t *testing.T) { testStoresOfSessions(t, open) })
	t.Run("Events", func(t *testing.T) { testEvents(t, open) })
	t.Run("AppendSteps", func(t *testing.T) { testAppendSteps(t, open) })
	t.Run("WorkQueue", func(t *testing.T) { testWorkQueue(t, open) })
	t.Run("ReclaimOrder", func(t *testing.T) { testReclaimOrder(t, open) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testConcurrentClaims(t, open) })
	t.Run("ClaimSettlesLapsedLeases", func(t *testing.T) { testClaimSettlesLapsedLeases(t, open) })
	t.Run("ClaimReadsEnvironment", func(t *testing.T) { testClaimReadsEnvironment(t, open) })
	t.Run("QueueDepths", func(t *testing.T) { testQueueDepths(t, open) })
	t.Run("MemoryStores", func(t *testing.T) { testMemoryStores(t, open) })
	t.Run("Memories", func(t *testing.T) { testMemories(t, open) })
	t.Run("MemoryListing", func(t *testing.T) { testMemoryListing(t, open) })
	t.Run("MemoryVersions", func(t *testing.T) { testMemoryVersions(t, open) })
	t.Run("MemoryStoreUsage", func(t *testing.T) { testMemoryStoreUsage(t, open) })
	t.Run("Search", func(t *testing.T) { testSearch(t, open) })
	t.Run("Users", func(t *testing.T) { testUsers(t, open) })
	t.Run("Changes", func(t *testing.T) { testChanges(t, open) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, open) })
	t.Run("Turns", func(t *testing.T) { testTurns(t, open) })
	t.Run("TurnCandidates", func(t *testing.T) { testTurnCandidates(t, open) })
	t.Run("WebhookEndpoints", func(t *testing.T) { testWebhookEndpoints(t, open) })
	t.Run("WebhookOutbox", func(t *testing.T) { testWebhookOutbox(t, open) })
	t.Run("WebhookRetries", func(t *testing.T) { testWebhookRetries(t, open) })
	t.Run("WebhookGivenBack", func(t *testing.T) { testWebhookGivenBack(t, open) })
	t.Run("DeliveriesStored", func(t *testing.T) { testDeliveriesStored(t, open) })
	t.Run("ConcurrentDeliveryClaims", func(t *testing.T) { testConcurrentDeliveryClaims(t, open) })
	t.Run("Skills", func(t *testing.T) { testSkills(t, open) })
	t.Run("Vaults", func(t *testing.T) { testVaults(t, open) })
}

// newClock is the suite's settable clock, stopped at a fixed time.
func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
}
