package sqlstore

import (
	"context"
	"strings"
)

// ReadAhead is offered by the Conn a MemoryWriter hands its writes when it
// fetched the first read of every write of a batch together with the
// batch's locks, before any write ran: one round trip for the batch rather
// than one per write, which is what kept one store's writers waiting on
// PostgreSQL. A write uses such an answer only when Changes shows that no
// earlier write of the transaction can have changed it, and reads again
// otherwise.
type ReadAhead interface {
	// Ahead is the answer fetched for query with args for the running
	// write, once; false when there is none.
	Ahead(query string, args []any) (Row, bool)
	// Changes are what the transaction's writes have changed so far.
	Changes() *Changes
}

// Guesser is offered by the Conn of a batch that may answer its writes'
// reads with what they most likely answer rather than read them first: it
// sends the guessed reads, with the writes and the COMMIT, as statements
// that fail the transaction when a read answers otherwise, and the batch
// then runs again reading. A write guesses a read only when no earlier
// write of the transaction may have changed its answer (Changes), so the
// Guesser may check it before the writes. A batch whose reads were all
// guessed commits in one round trip, where reading first took two.
type Guesser interface {
	// Guessing reports whether the running write may guess its reads.
	Guessing() bool
	// Expect sends query, a read the guess says answers no row.
	Expect(query string, args []any)
}

// Deferrer is offered by a Conn that may send a write's statement later,
// together with the next read or the COMMIT: for statements whose row
// count the write does not look at. Their errors fail the transaction.
type Deferrer interface {
	Defer(ctx context.Context, query string, args ...any)
}

// Changes are the memories and paths a transaction's memory writes have
// changed, so a read fetched before them is trusted only when none of them
// bears on it.
type Changes struct {
	all      bool
	memories map[string]bool
	paths    map[string][]string // by store
}

// Memory notes that memory id changed.
func (c *Changes) Memory(id string) {
	if c.memories == nil {
		c.memories = map[string]bool{}
	}
	c.memories[id] = true
}

// Path notes that a memory now occupies path p of store storeID.
func (c *Changes) Path(storeID, p string) {
	if c.paths == nil {
		c.paths = map[string][]string{}
	}
	c.paths[storeID] = append(c.paths[storeID], p)
}

// Everything notes a change this record cannot name.
func (c *Changes) Everything() { c.all = true }

// TouchesMemory reports whether memory id may have changed.
func (c *Changes) TouchesMemory(id string) bool { return c.all || c.memories[id] }

// TouchesPath reports whether a memory may have come to occupy p, one of
// its ancestors or one of its descendants in store storeID: the paths a
// path check looks at.
func (c *Changes) TouchesPath(storeID, p string) bool {
	if c.all {
		return true
	}
	for _, t := range c.paths[storeID] {
		if t == p || strings.HasPrefix(p, t+"/") || strings.HasPrefix(t, p+"/") {
			return true
		}
	}
	return false
}
