package app

import "sync"

// waiters wakes goroutines waiting for a key to change, without polling:
// a waiter takes the key's channel before it reads the state, and a writer
// wakes it after committing, so no change can slip between the read and
// the wait.
type waiters struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func newWaiters() waiters { return waiters{chans: map[string]chan struct{}{}} }

// wait returns a channel closed at the next wake of key.
func (n *waiters) wait(key string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.chans[key]
	if !ok {
		ch = make(chan struct{})
		n.chans[key] = ch
	}
	return ch
}

// wake wakes every waiter of key.
func (n *waiters) wake(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch, ok := n.chans[key]; ok {
		close(ch)
		delete(n.chans, key)
	}
}

// wakeAll wakes every waiter of every key.
func (n *waiters) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, ch := range n.chans {
		close(ch)
		delete(n.chans, key)
	}
}

// waiting reports whether someone waits for key (for tests that must know
// a long poll is parked before they wake it).
func (n *waiters) waiting(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.chans[key]
	return ok
}
