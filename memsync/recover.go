package memsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/internal/confined"
)

// A leftover whose session another host finished is never adopted (see
// leftovers.go). RecoverLeftover empties it instead: each file the agent
// changed since the folder's last sync goes to the server through the
// caller's upload (the server decides, by the journal's base, between a
// new version and a conflicted copy), and then the folder goes. It never
// deletes a memory: a file the agent removed is simply not uploaded, and
// the server's copy stays.

// RecoveredFile is one file of a leftover for the upload: its memory path,
// its content, and the content_sha256 the journal says the server held at
// the last sync ("" for a file new since).
type RecoveredFile struct {
	Path, Content, Base string
}

// ErrLeftoverHeld is RecoverLeftover's answer when a running worker holds
// the folder (it adopted it, or is mounting it): that worker syncs it.
var ErrLeftoverHeld = errors.New("a running worker serves this folder")

// RecoverLeftover uploads l's edits through upload, in path order, then
// removes l's folder, its journal and lock, the state folder unless it
// keeps copies of earlier losing edits, and the session folder around
// them when it is inside root and empty. It holds the folder's lock
// throughout, so no worker adopts the folder meanwhile. Any failure
// leaves the folder as it is, for the next try; a folder half removed by
// a crash is finished by the next call (its journal says it was being
// removed).
func RecoverLeftover(ctx context.Context, root string, l Leftover, upload func(context.Context, RecoveredFile) error) (uploaded int, err error) {
	lock, err := takeLock(filepath.Join(l.StateDir, lockName))
	if errors.Is(err, unix.EWOULDBLOCK) {
		return 0, ErrLeftoverHeld
	} else if err != nil {
		return 0, fmt.Errorf("the lock file of %s cannot be locked (%w)", l.StateDir, err)
	}
	defer lock.Close()
	// Read again under the lock: the folder may have changed since l was
	// found.
	now := inspectLeftover(l.Dir)
	if now.Problem != "" {
		return 0, errors.New(now.Problem)
	}
	if now.MemoryStoreID != l.MemoryStoreID || now.SessionID != l.SessionID {
		return 0, fmt.Errorf("the journal of %s changed since it was read (now store %s, session %s); the next scan looks again", l.Dir, now.MemoryStoreID, now.SessionID)
	}
	if len(now.Edits) > 0 {
		folder, err := confined.Open(l.Dir)
		if err != nil {
			return 0, fmt.Errorf("%s cannot be opened (%w)", l.Dir, err)
		}
		for _, p := range now.Edits {
			data, err := folder.ReadFile(strings.TrimPrefix(p, "/"), keptReadLimit)
			if err != nil {
				return uploaded, fmt.Errorf("%s cannot be read (%w)", filepath.Join(l.Dir, p), err)
			}
			if err := upload(ctx, RecoveredFile{Path: p, Content: string(data), Base: now.Bases[p]}); err != nil {
				return uploaded, fmt.Errorf("%s: %w", p, err)
			}
			uploaded++
		}
	}
	if err := markDisposing(l.StateDir); err != nil {
		return uploaded, err
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		return uploaded, fmt.Errorf("%s cannot be removed (%w)", l.Dir, err)
	}
	if sroot, err := confined.Open(l.StateDir); err == nil {
		removeTempFiles(sroot) // of a journal write the kill interrupted
	}
	_ = os.Remove(filepath.Join(l.StateDir, journalName))
	_ = os.Remove(filepath.Join(l.StateDir, lockName))
	_ = os.Remove(filepath.Join(l.StateDir, keptName)) // only if empty
	_ = os.Remove(l.StateDir)                          // likewise
	if parent := filepath.Dir(l.Dir); parent != filepath.Clean(root) && filepath.Dir(parent) == filepath.Clean(root) {
		_ = os.Remove(parent) // the sandbox's session folder, once empty
	}
	return uploaded, nil
}

// markDisposing sets the journal's Disposing flag, durably, before the
// folder is removed: a worker that finds the folder half removed then
// removes the rest instead of reading the missing files as deletions.
func markDisposing(stateDir string) error {
	sroot, err := confined.Open(stateDir)
	if err != nil {
		return fmt.Errorf("the state folder %s cannot be opened (%w)", stateDir, err)
	}
	data, err := sroot.ReadFile(journalName, journalReadLimit)
	if err != nil {
		return fmt.Errorf("the journal in %s cannot be read (%w)", stateDir, err)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("the journal in %s cannot be read (%w)", stateDir, err)
	}
	if j.Disposing {
		return nil
	}
	j.Disposing = true
	if data, err = json.Marshal(j); err == nil {
		err = sroot.WriteFile(journalName, data, confined.Precondition{})
	}
	if err != nil {
		return fmt.Errorf("the journal in %s cannot be written (%w)", stateDir, err)
	}
	return nil
}
