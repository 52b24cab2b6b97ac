package storage

import "sync"

// Outbox is how a backend tells the webhook dispatchers of its process that
// deliveries are waiting, exactly when they are: the transactions that
// write outbox rows mark themselves with Wrote, and when one of them
// commits, every channel Stored handed out is closed. A change that stores
// no delivery (every memory write, most of the time) wakes nobody, and a
// change from anywhere (the API, the console, an agent runtime) wakes
// them alike. The zero value is ready.
type Outbox struct {
	mu sync.Mutex
	// wrote holds the open transactions that wrote outbox rows.
	wrote map[any]bool
	// stored is closed at the next commit of one of them.
	stored chan struct{}
}

// Wrote marks tx, an open transaction, as one that wrote outbox rows.
func (o *Outbox) Wrote(tx any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.wrote == nil {
		o.wrote = map[any]bool{}
	}
	o.wrote[tx] = true
}

// Ended reports that tx ended, committed or not: a commit of a transaction
// that wrote outbox rows wakes the waiters.
func (o *Outbox) Ended(tx any, committed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.wrote[tx] {
		return
	}
	delete(o.wrote, tx)
	if committed && o.stored != nil {
		close(o.stored)
		o.stored = nil
	}
}

// Stored returns a channel closed once a transaction that wrote outbox rows
// commits after this call.
func (o *Outbox) Stored() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stored == nil {
		o.stored = make(chan struct{})
	}
	return o.stored
}
