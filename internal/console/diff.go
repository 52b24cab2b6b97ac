package console

import (
	"strings"

	"github.com/aymanbagabas/go-udiff"
)

// diffLine is one line of a line diff: Op is "same", "add" or "del".
type diffLine struct {
	Op   string
	Text string
}

// lineDiff diffs two texts line by line, the way a person compares two
// versions of a note. It uses the same diff library as the command line's
// `memory diff`, so both show a change alike.
func lineDiff(from, to string) []diffLine {
	var out []diffLine
	add := func(op, text string) {
		for _, l := range strings.SplitAfter(text, "\n") {
			if l != "" {
				out = append(out, diffLine{Op: op, Text: strings.TrimSuffix(l, "\n")})
			}
		}
	}
	at := 0
	for _, e := range udiff.Lines(from, to) {
		add("same", from[at:e.Start])
		add("del", from[e.Start:e.End])
		add("add", e.New)
		at = e.End
	}
	add("same", from[at:])
	return out
}
