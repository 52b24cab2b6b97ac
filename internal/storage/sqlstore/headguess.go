package sqlstore

import (
	"sync"

	"github.com/memstore/memstore/internal/storage"
)

// headGuesses remembers the memories this server wrote last, by id, as
// it wrote them (without their content), for two guesses:
//   - the path of an update that keeps its memory's path, so its search
//     entry is computed before its write queues (splitAhead), outside the
//     batch that holds its store's lock; a guess that turns out wrong (the
//     memory moved, through another server) is computed again there
//     (memoryTx.searchEntry). Splitting a 4 KB update's words inside the
//     batch took about 50 µs of the leader's time per update, one after
//     another (docs/postgresql-performance.md);
//   - the memory an update or delete reads, on a batch that guesses its
//     reads (Guesser): the head version it names is checked inside the
//     transaction.
//
// Only backends whose server computes the search entries keep guesses
// (Store.keepHeads).
type headGuesses struct {
	mu    sync.Mutex
	heads map[string]storage.MemoryRow
}

// maxHeadGuesses bounds the memories remembered; past it, a note forgets
// one memory it does not name.
const maxHeadGuesses = 4096

// note remembers m, without its content.
func (g *headGuesses) note(m storage.MemoryRow) {
	m.Content = nil
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.heads == nil {
		g.heads = make(map[string]storage.MemoryRow, 64)
	}
	if _, ok := g.heads[m.ID]; !ok && len(g.heads) >= maxHeadGuesses {
		for id := range g.heads { // an arbitrary one
			delete(g.heads, id)
			break
		}
	}
	g.heads[m.ID] = m
}

func (g *headGuesses) forget(memoryID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.heads, memoryID)
}

func (g *headGuesses) guess(memoryID string) (storage.MemoryRow, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.heads[memoryID]
	return m, ok
}
