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
// (docs/postgresql-performance.md).
type pathGuesses struct {
	mu    sync.Mutex
	paths map[string]string
}

// maxPathGuesses bounds the memories remembered; when full, the next
// write starts again from none.
const maxPathGuesses = 4096

func (g *pathGuesses) note(memoryID, path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paths == nil || len(g.paths) >= maxPathGuesses {
		g.paths = make(map[string]string, 64)
	}
	g.paths[memoryID] = path
}

func (g *pathGuesses) guess(memoryID string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.paths[memoryID]
	return p, ok
}
