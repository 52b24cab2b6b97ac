package memsync

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A worker that finishes a folder removes its lock file by name before it
// lets go. A process that opened that file just before the removal must
// not count a lock on it as the folder's: the file at the path is another
// one by then, which a third process can lock as well.
func TestALockOnARemovedLockFileIsNotTheFoldersLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), lockName)
	early, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	// The finisher removes the file; a new worker makes the folder's lock
	// file anew and holds it.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	holder, err := takeLock(path)
	if err != nil {
		t.Fatalf("the new worker could not lock the new lock file: %v", err)
	}
	defer holder.Close()
	// The early opener wins a lock on the removed file, which stillAt
	// refuses: without that check it would serve the folder beside holder.
	if err := unix.Flock(int(early.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock of the removed file: %v", err)
	}
	if stillAt(early, path) {
		t.Error("a lock on the removed lock file was taken for the folder's lock")
	}
	if !stillAt(holder, path) {
		t.Error("the lock on the file at the path was not recognised")
	}
	// Anyone else now finds the folder held.
	if _, err := takeLock(path); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a third worker's lock: %v, want EWOULDBLOCK while the new worker holds it", err)
	}
	// Once the holder finishes (removes the file, lets go), the next
	// worker's lock is on the file at the path again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	next, err := takeLock(path)
	if err != nil {
		t.Fatalf("after the holder let go: %v", err)
	}
	defer next.Close()
	if !stillAt(next, path) {
		t.Error("the next worker's lock is not on the file at the path")
	}
}
