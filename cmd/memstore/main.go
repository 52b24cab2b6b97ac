// Command memstore is the one binary of memstore: the server (serve), the
// environment worker (worker poll | run), and the operator verbs.
package main

import (
	"context"
	"os"

	"github.com/memstore/memstore/internal/workercli"
)

func main() {
	workercli.Main(newRootCommand(streams{os.Stdin, os.Stdout, os.Stderr}))
}

// run runs the command args name, with its standard input and outputs
// passed in, and returns the exit status: 0 done, 1 failed, 2 misused (the
// usage was printed).
func run(ctx context.Context, args []string, s streams) int {
	return workercli.Execute(ctx, newRootCommand(s), args, s.stderr)
}
