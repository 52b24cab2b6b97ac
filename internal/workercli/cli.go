// Package workercli is the environment worker's command line (worker
// poll, run and webhook, their flags, the process's signals and exit
// codes), shared by the memstore binary and by memstore-worker, a binary
// that links the worker alone: the server, the console and the database
// drivers weigh some 60 MB that a worker host need not map.
package workercli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs root with the process's arguments and exits with its status.
// The first SIGINT or SIGTERM cancels the command's context, a second one
// quits at once (see ForceQuit).
func Main(root *cobra.Command) {
	ctx, cancel := context.WithCancel(context.Background())
	quit := &ForceQuit{}
	ctx = WithForceQuit(ctx, quit)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go quit.Watch(sigs, cancel, os.Stderr, os.Exit)
	os.Exit(Execute(ctx, root, os.Args[1:], os.Stderr))
}

// Execute runs root with args and returns the exit status: 0 done, 1
// failed, 2 misused (the usage was printed on stderr).
func Execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var usage UsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %v\n\n", cmd.CommandPath(), err)
		fmt.Fprint(stderr, cmd.UsageString())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

// ErrUsage marks an error already explained on stderr (exit status 2).
var ErrUsage = errors.New("usage")

// UsageError is a command called the wrong way: Execute prints it with
// the command's usage and exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// NoArgs refuses positional arguments, with a message that says where settings go.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q; every setting is a flag", args[0])
	}
	return nil
}

// NewNoun makes a command that groups verbs ("memstore env"): alone it
// prints its usage and exits 2; an unknown verb is a usage error.
func NewNoun(use, short string, verbs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
				return ErrUsage
			case args[0] == "help":
				cmd.HelpFunc()(cmd, nil)
				return nil
			}
			return UsageError{fmt.Errorf("unknown verb %q", args[0])}
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.AddCommand(verbs...)
	return cmd
}

// NewLogger is the process's logger in --log-format, text or json.
func NewLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", format)
	}
}

// ForceQuit is what a second SIGINT or SIGTERM does. The first one cancels
// the command's context and lets it finish gracefully, which for a worker
// means flushing the session's memory within its bounds (up to a minute);
// an operator who cannot wait that long signals again, and the process
// exits at once, after the running command has said what that loses.
type ForceQuit struct {
	mu    sync.Mutex
	hooks []func()
	// interrupts, while a command has taken them, receives each SIGINT
	// instead.
	interrupts chan struct{}
}

type forceQuitKey struct{}

func WithForceQuit(ctx context.Context, q *ForceQuit) context.Context {
	return context.WithValue(ctx, forceQuitKey{}, q)
}

// OnForceQuit registers fn to run, before the exit, when a second signal
// cuts the command short; fn should log what is lost.
func OnForceQuit(ctx context.Context, fn func()) {
	if q, ok := ctx.Value(forceQuitKey{}).(*ForceQuit); ok {
		q.mu.Lock()
		q.hooks = append(q.hooks, fn)
		q.mu.Unlock()
	}
}

// TakeInterrupts delivers each SIGINT (Ctrl-C) on the channel it returns
// instead of cancelling the command, until release is called: a chat uses
// Ctrl-C to interrupt a turn and carries on. SIGTERM still cancels.
func TakeInterrupts(ctx context.Context) (interrupts <-chan struct{}, release func()) {
	q, ok := ctx.Value(forceQuitKey{}).(*ForceQuit)
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
func (q *ForceQuit) next(sigs <-chan os.Signal) os.Signal {
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

// Watch turns the first signal into cancel and the second into exit(1).
// Only a command that registered a hook has something to lose, so only it
// is told about the second signal.
func (q *ForceQuit) Watch(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
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

// EnvOr returns the environment variable's value, or def when it is unset.
func EnvOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
