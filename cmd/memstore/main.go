// Command memstore is the one binary of memstore: the server (serve), the
// environment worker (worker poll | run), and the operator verbs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	quit := &forceQuit{}
	ctx = withForceQuit(ctx, quit)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go quit.watch(sigs, cancel, os.Stderr, os.Exit)
	os.Exit(run(ctx, os.Args[1:], streams{os.Stdin, os.Stdout, os.Stderr}))
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

// run runs the command args name, with its standard input and outputs
// passed in, and returns the exit status: 0 done, 1 failed, 2 misused (the
// usage was printed).
func run(ctx context.Context, args []string, s streams) int {
	root := newRootCommand(s)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, &usage):
		fmt.Fprintf(s.stderr, "%s: %v\n\n", cmd.CommandPath(), err)
		fmt.Fprint(s.stderr, cmd.UsageString())
		return 2
	}
	fmt.Fprintf(s.stderr, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

// envOr returns the environment variable's value, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
