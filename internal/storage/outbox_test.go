package storage

import "testing"

func TestOutboxSignalsCommitsOfMarkedTransactionsOnly(t *testing.T) {
	var o Outbox
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	stored := o.Stored()
	plain, rolledBack, wrote := new(int), new(int), new(int)
	o.Ended(plain, true)
	o.Wrote(rolledBack)
	o.Ended(rolledBack, false)
	if closed(stored) {
		t.Fatal("a commit that wrote no outbox rows, or a rollback that did, signalled")
	}
	o.Wrote(wrote)
	o.Ended(wrote, true)
	if !closed(stored) {
		t.Fatal("a commit that wrote outbox rows did not signal")
	}
	if closed(o.Stored()) || len(o.wrote) != 0 {
		t.Fatalf("after the signal: a fresh channel is closed, or %d transactions are still marked", len(o.wrote))
	}
}
