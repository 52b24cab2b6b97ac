package memsync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/confined"
)

// A leftover is a store's folder that a killed worker left, with its
// journal. It is adopted when the same session is mounted at the same path
// again, which under a sandbox (a folder per session) or when another host
// finished the session never happens. FindLeftovers lists them, so that
// an operator (memstore doctor) sees the edits that still sit only on this
// disk.

// Leftover is one folder a killed worker left.
type Leftover struct {
	// Dir is the store's folder; StateDir the state folder beside it.
	Dir, StateDir string
	MemoryStoreID string
	// SessionID is the session the journal was written for.
	SessionID string
	// Held: a running worker holds the folder's lock, or is taking it (a
	// state folder with neither journal nor store folder); it is being
	// served, not left over.
	Held bool
	// Edits are the memory paths whose file differs from what the journal
	// says the server held at the last sync: new or edited files, the only
	// copies of which are in Dir.
	Edits []string
	// Bases are the journal's base content_sha256 of each of Edits, ""
	// for a file new since the last sync (RecoverLeftover sends them).
	Bases map[string]string
	// Problem says why the folder could not be read, if it could not.
	Problem string
}

// FindLeftovers lists the folders with a sync journal under root: the
// stores' folders in it, and, as the sandbox places them, in its session
// folders one level down. It changes nothing and takes no lock for longer
// than it takes to test it.
func FindLeftovers(root string) ([]Leftover, error) {
	var out []Leftover
	dirs := []string{root}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), stateDirSuffix)
			if !e.IsDir() || !ok || !strings.HasPrefix(name, ".") || len(name) < 2 {
				continue
			}
			out = append(out, inspectLeftover(filepath.Join(dir, name[1:])))
		}
	}
	return out, nil
}

// inspectLeftover reads one store folder's journal and compares the
// folder with it.
func inspectLeftover(dir string) Leftover {
	l := Leftover{Dir: dir, StateDir: StateDir(dir)}
	held, err := lockHeld(filepath.Join(l.StateDir, lockName))
	if err != nil {
		l.Problem = fmt.Sprintf("its lock cannot be tested (%v)", err)
		return l
	}
	l.Held = held
	sroot, err := confined.Open(l.StateDir)
	if err != nil {
		l.Problem = fmt.Sprintf("its state folder cannot be opened (%v)", err)
		return l
	}
	data, err := sroot.ReadFile(journalName, journalReadLimit)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			// A mount between creating its lock file and taking the
			// lock: nothing is in it yet.
			l.Held = true
			return l
		}
	}
	if err != nil {
		l.Problem = fmt.Sprintf("its journal cannot be read (%v)", err)
		return l
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil || !j.known() {
		l.Problem = "its journal is not one this worker reads"
		return l
	}
	j.settle()
	l.MemoryStoreID, l.SessionID = j.MemoryStoreID, j.SessionID
	if j.Mounting || j.Disposing {
		return l // downloads only, or already saved: no edits
	}
	root, err := confined.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return l
	}
	if err != nil {
		l.Problem = fmt.Sprintf("the folder cannot be opened (%v)", err)
		return l
	}
	local, err := Scan(root, confined.NewHashCache(time.Now), j.MemoryStoreID)
	if err != nil {
		l.Problem = fmt.Sprintf("the folder cannot be scanned (%v)", err)
		return l
	}
	l.Bases = map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(local.Files)) {
		if local.Files[p].SHA256 != j.State[p].Base {
			l.Edits = append(l.Edits, p)
			l.Bases[p] = j.State[p].Base
		}
	}
	return l
}

// lockHeld reports whether a running process holds the lock file at
// path. It reads the kernel's lock table (/proc/locks) rather than trying
// the lock: a worker mounting the folder at that moment must not find it
// taken by the look. Without /proc it tries the lock.
func lockHeld(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return tryLock(path)
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for line := range strings.Lines(string(table)) {
		f := strings.Fields(line)
		// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; a blocked
		// waiter's line has "->" after the number.
		if len(f) >= 7 && f[1] == "FLOCK" && slices.Contains(f[4:7], id) {
			return true, nil
		}
	}
	return false, nil
}

// tryLock tests the lock by taking and releasing it.
func tryLock(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
