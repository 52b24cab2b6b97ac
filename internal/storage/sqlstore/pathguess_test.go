package sqlstore

import (
	"fmt"
	"testing"
)

// The guesses name the path a memory was written at last, and stay
// within their bound however many memories are written.
func TestPathGuessesKeepTheLastPathWithinTheirBound(t *testing.T) {
	var g pathGuesses
	if _, ok := g.guess("mem_1"); ok {
		t.Fatal("a guess before any write")
	}
	g.note("mem_1", "/a.md")
	g.note("mem_1", "/b.md")
	if p, ok := g.guess("mem_1"); !ok || p != "/b.md" {
		t.Fatalf("guess %q %v, want /b.md", p, ok)
	}
	for i := range 3 * maxPathGuesses {
		g.note(fmt.Sprint("mem_x", i), "/x.md")
	}
	if n := len(g.paths); n != maxPathGuesses {
		t.Errorf("%d guesses kept, want %d", n, maxPathGuesses)
	}
	last := fmt.Sprint("mem_x", 3*maxPathGuesses-1)
	if p, ok := g.guess(last); !ok || p != "/x.md" {
		t.Errorf("the last memory written has no guess (%q %v)", p, ok)
	}
}
