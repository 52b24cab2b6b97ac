package sqlstore

import "sync"

// pathGuesses remembers the path of the memories written last, by id, so
// that an update that keeps its memory's path can have its search entry
// computed before its write queues (splitAhead), outside the batch that
// holds its store's lock: the path is known for sure only once the write
// reads the memory, and a guess that turns out wrong (the memory moved,
// through another server) is computed again there (memoryTx.searchEntry).
// Splitting a 4 KB update's words inside the batch took about 50 µs of the
// leader's time per update, one after another
// (docs/postgresql-performance.md). Only backends whose server computes
// the entries keep guesses (Store.guessPaths).
type pathGuesses struct {
	mu    sync.Mutex
	paths map[string]string
}

// maxPathGuesses bounds the memories remembered; past it, a note forgets
// one memory it does not name.
const maxPathGuesses = 4096

func (g *pathGuesses) note(memoryID, path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paths == nil {
		g.paths = make(map[string]string, 64)
	}
	if _, ok := g.paths[memoryID]; !ok && len(g.paths) >= maxPathGuesses {
		for id := range g.paths { // an arbitrary one
			delete(g.paths, id)
			break
		}
	}
	g.paths[memoryID] = path
}

func (g *pathGuesses) guess(memoryID string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.paths[memoryID]
	return p, ok
}
