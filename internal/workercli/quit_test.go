package workercli

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/memstore/memstore/internal/testlog"
)

// The first SIGINT or SIGTERM asks the command to finish gracefully; a
// second one quits at once, after the command has said what that loses,
// instead of waiting for a worker's flush (up to a minute).
func TestSecondSignalQuitsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quit := &ForceQuit{}
	ctx = WithForceQuit(ctx, quit)
	lost := false
	OnForceQuit(ctx, func() { lost = true })

	sigs := make(chan os.Signal, 1)
	exited := make(chan int, 1)
	var stderr testlog.Buffer
	go quit.Watch(sigs, cancel, &stderr, func(code int) { exited <- code })

	sigs <- syscall.SIGTERM
	<-ctx.Done()
	select {
	case code := <-exited:
		t.Fatalf("exit(%d) after the first signal; it must let the command finish", code)
	default:
	}
	sigs <- os.Interrupt
	if code := <-exited; code != 1 {
		t.Errorf("exit(%d) after the second signal, want 1", code)
	}
	if !lost {
		t.Error("the command's force-quit hook did not run before the exit")
	}
	out := stderr.String()
	for _, want := range []string{"again to quit at once", "quitting at once"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}

// A command with nothing to lose says nothing on the first signal: Ctrl-C
// on `session events --follow` just ends it.
func TestFirstSignalIsQuietWithoutForceQuitHooks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quit := &ForceQuit{}
	sigs := make(chan os.Signal, 1)
	var stderr testlog.Buffer
	go quit.Watch(sigs, cancel, &stderr, func(int) {})
	sigs <- os.Interrupt
	<-ctx.Done() // watch writes before it cancels
	if stderr.String() != "" {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
}

// While a command has taken the interrupts (a chat), each SIGINT reaches
// it instead of cancelling it; released, SIGINT cancels again.
func TestTakenInterruptsReachTheCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quit := &ForceQuit{}
	ctx = WithForceQuit(ctx, quit)
	interrupts, release := TakeInterrupts(ctx)
	sigs := make(chan os.Signal, 1)
	go quit.Watch(sigs, cancel, &testlog.Buffer{}, func(int) {})
	for range 3 {
		sigs <- os.Interrupt
		<-interrupts
	}
	if ctx.Err() != nil {
		t.Fatal("a taken SIGINT cancelled the command")
	}
	release()
	sigs <- os.Interrupt
	<-ctx.Done()
}
