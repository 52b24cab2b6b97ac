// Command memstore-worker is memstore's environment worker alone:
// `memstore-worker poll | run | webhook` are `memstore worker poll | run |
// webhook`, flags and all, in a binary that links none of the server, the
// console or the database drivers. It is a fifth of memstore's size, and
// an idle worker's resident memory is mostly the pages of its executable.
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/internal/workercli"
)

func main() {
	workercli.Main(newRootCommand(os.Stderr))
}

// newRootCommand is `memstore worker` under the binary's own name.
func newRootCommand(stderr io.Writer) *cobra.Command {
	root := workercli.NewCommand(stderr)
	root.Use = "memstore-worker"
	return root
}
