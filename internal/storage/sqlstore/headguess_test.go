package sqlstore

import (
	"fmt"
	"testing"

	"github.com/memstore/memstore/internal/storage"
)

// The guesses hold a memory as it was written last, without its content,
// forget it when told, and stay within their bound however many memories
// are written.
func TestHeadGuessesKeepTheLastWriteWithinTheirBound(t *testing.T) {
	var g headGuesses
	if _, ok := g.guess("mem_1"); ok {
		t.Fatal("a guess before any write")
	}
	content := "hello"
	g.note(storage.MemoryRow{ID: "mem_1", Path: "/a.md", VersionID: "ver_1", Content: &content})
	g.note(storage.MemoryRow{ID: "mem_1", Path: "/b.md", VersionID: "ver_2", Content: &content})
	if m, ok := g.guess("mem_1"); !ok || m.Path != "/b.md" || m.VersionID != "ver_2" || m.Content != nil {
		t.Fatalf("guess %+v %v, want /b.md at ver_2 without content", m, ok)
	}
	g.forget("mem_1")
	if _, ok := g.guess("mem_1"); ok {
		t.Fatal("a guess of a forgotten memory")
	}
	for i := range 3 * maxHeadGuesses {
		g.note(storage.MemoryRow{ID: fmt.Sprint("mem_x", i), Path: "/x.md"})
	}
	if n := len(g.heads); n != maxHeadGuesses {
		t.Errorf("%d guesses kept, want %d", n, maxHeadGuesses)
	}
	last := fmt.Sprint("mem_x", 3*maxHeadGuesses-1)
	if m, ok := g.guess(last); !ok || m.Path != "/x.md" {
		t.Errorf("the last memory written has no guess (%+v %v)", m, ok)
	}
}
