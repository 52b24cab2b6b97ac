package memsync

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// flushFolder makes everything written to, renamed in or removed from the
// folder dir before the call durable: one syncfs of its filesystem,
// rather than an fsync of every file and folder the sync touched.
//
// A syncfs writes out every dirty page of the filesystem, everybody's, so
// when many stores flush at once (a burst of sessions mounting together)
// each one waited for all the others' writes, again and again. The callers
// on one filesystem share their flushes instead, as a database's group
// commit does: a syncfs that began after a caller's writes had finished
// covers them, so the callers that arrive while one runs are all covered
// by the next, which one of them runs.
func flushFolder(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	return flusherOf(st.Dev).flush(func() error { return unix.Syncfs(fd) })
}

// flushers holds the flusher of each filesystem (by device number) that
// this process has flushed: the sharing is the process's, across its
// sessions, as the filesystem is.
var flushers sync.Map // uint64 → *flusher

func flusherOf(dev uint64) *flusher {
	if f, ok := flushers.Load(dev); ok {
		return f.(*flusher)
	}
	f, _ := flushers.LoadOrStore(dev, newFlusher())
	return f.(*flusher)
}

// flusher runs the flushes of one filesystem, one at a time, each shared
// by every caller that arrived before it began.
type flusher struct {
	mu   sync.Mutex
	done *sync.Cond
	// started and finished count the flushes begun and ended; running
	// says one is under way (then started == finished+1).
	started, finished uint64
	running           bool
	// err is the error of the latest flush that failed, failed its number.
	err    error
	failed uint64
}

func newFlusher() *flusher {
	f := &flusher{}
	f.done = sync.NewCond(&f.mu)
	return f
}

// flush returns once a flush that began after the call did has ended, and
// its error. sync is the caller's own way to run one, used when it is the
// caller's turn to run the flush everyone waiting shares.
func (f *flusher) flush(sync func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The flush under way, if any, may have begun before the caller's
	// writes ended: only the next one covers them.
	need := f.started + 1
	for f.finished < need {
		if f.running {
			f.done.Wait()
			continue
		}
		f.running = true
		f.started++
		n := f.started
		f.mu.Unlock()
		err := sync()
		f.mu.Lock()
		f.running, f.finished = false, n
		if err != nil {
			f.err, f.failed = err, n
		}
		f.done.Broadcast()
	}
	// Any flush from the one needed on may have been the one to meet the
	// caller's pages failing to reach the disk (and the kernel reports a
	// write-back error once per open file): its error is the caller's.
	if f.failed >= need {
		return f.err
	}
	return nil
}

// bootID names this boot of the machine: a journal written without a flush
// is trusted only within it (journal.UnflushedBoot). "" when it cannot be
// read, and then every journal is flushed.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})
