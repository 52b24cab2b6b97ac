package console

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// diffLine is one line of a line diff: Op is "same", "add" or "del".
type diffLine struct {
	Op   string
	Text string
}

// lineDiff diffs two texts line by line (diff-match-patch's line mode), the
// way a person compares two versions of a note.
func lineDiff(from, to string) []diffLine {
	dmp := diffmatchpatch.New()
	a, b, lines := dmp.DiffLinesToChars(from, to)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), lines)
	var out []diffLine
	for _, d := range diffs {
		op := "same"
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			op = "add"
		case diffmatchpatch.DiffDelete:
			op = "del"
		}
		for _, l := range strings.SplitAfter(d.Text, "\n") {
			if l != "" {
				out = append(out, diffLine{Op: op, Text: strings.TrimSuffix(l, "\n")})
			}
		}
	}
	return out
}
