// Command memstore is the one binary of memstore: the server (serve), the
// environment worker (worker poll | run), and the operator verbs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by each subcommand's file in an init function, so a
// verb and its flags live together.
var commands = map[string]command{}

// errUsage marks an error already explained on stderr (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	quit := &forceQuit{}
	ctx = withForceQuit(ctx, quit)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go quit.watch(sigs, cancel, os.Stderr, os.Exit)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// forceQuit is what a second SIGINT or SIGTERM does. The first one cancels
// the command's context and lets it finish gracefully, which for a worker
// means flushing the session's memory within its bounds (up to a minute);
// an operator who cannot wait that long signals again, and the process
// exits at once, after the running command has said what that loses.
type forceQuit struct {
	mu    sync.Mutex
	hooks []func()
	// interrupts, while a command has taken them, receives each SIGINT
	// instead.
	interrupts chan struct{}
}

type forceQuitKey struct{}

func withForceQuit(ctx context.Context, q *forceQuit) context.Context {
	return context.WithValue(ctx, forceQuitKey{}, q)
}

// onForceQuit registers fn to run, before the exit, when a second signal
// cuts the command short; fn should log what is lost.
func onForceQuit(ctx context.Context, fn func()) {
	if q, ok := ctx.Value(forceQuitKey{}).(*forceQuit); ok {
		q.mu.Lock()
		q.hooks = append(q.hooks, fn)
		q.mu.Unlock()
	}
}

// takeInterrupts delivers each SIGINT (Ctrl-C) on the channel it returns
// instead of cancelling the command, until release is called: a chat uses
// Ctrl-C to interrupt a turn and carries on. SIGTERM still cancels.
func takeInterrupts(ctx context.Context) (interrupts <-chan struct{}, release func()) {
	q, ok := ctx.Value(forceQuitKey{}).(*forceQuit)
	if !ok {
		return nil, func() {}
	}
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	q.interrupts = ch
	q.mu.Unlock()
	return ch, func() {
		q.mu.Lock()
		q.interrupts = nil
		q.mu.Unlock()
	}
}

// next is the next signal that is not a SIGINT taken by the command.
func (q *forceQuit) next(sigs <-chan os.Signal) os.Signal {
	for sig := range sigs {
		q.mu.Lock()
		ch := q.interrupts
		q.mu.Unlock()
		if sig != os.Interrupt || ch == nil {
			return sig
		}
		select {
		case ch <- struct{}{}:
		default: // one press not yet taken is enough
		}
	}
	return nil
}

// watch turns the first signal into cancel and the second into exit(1).
// Only a command that registered a hook has something to lose, so only it
// is told about the second signal.
func (q *forceQuit) watch(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
	sig := q.next(sigs)
	q.mu.Lock()
	hooks := len(q.hooks) > 0
	q.mu.Unlock()
	if hooks {
		fmt.Fprintf(stderr, "memstore: %v: finishing gracefully (a worker first flushes its session's memory, up to a minute); send it again to quit at once\n", sig)
	}
	cancel()
	sig = q.next(sigs)
	fmt.Fprintf(stderr, "memstore: %v again: quitting at once\n", sig)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, fn := range q.hooks {
		fn()
	}
	exit(1)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "memstore: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0 // -h asked for the usage, as 'memstore -h' does
		case errors.Is(err, errUsage):
			return 2
		}
		fmt.Fprintf(stderr, "memstore %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "memstore: memory stores for agent sandboxes (server and worker in one binary)")
	fmt.Fprintln(w, "\nUsage: memstore <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'memstore <command> -h' for a command's flags.")
}

// newFlagSet makes a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("memstore "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args with fs. A bad flag is a usage error (exit 2):
// the flag package has already printed it with the usage, so it is not
// printed again; -h stays flag.ErrHelp (exit 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return errUsage
	}
	return err
}

// envOr returns the environment variable's value, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
