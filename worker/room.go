package worker

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Each session works in a room of its own: a fresh folder under the
// worker's Workdir that is its working directory and its HOME, the only
// place it may write besides its stores, removed when the session ends. A
// shared working directory let one session read another's files and plant
// dotfiles that every later session's tools would meet.

// roomSuffix ends a room's name, <workdir>/<session id>.room: a session's
// sandboxed mount folder is <mount root>/<session id>, and the two roots
// may be one folder.
const roomSuffix = ".room"

// openRoom makes the session's room, empty and owner-only. A folder of
// that name is a leftover of a worker that was killed while serving the
// session: the room is fresh every time, so it is removed first.
func (w *Worker) openRoom(sessionID string, log *slog.Logger) (string, error) {
	if sessionID == "" || sessionID != filepath.Base(sessionID) || strings.HasPrefix(sessionID, ".") {
		return "", fmt.Errorf("session id %q cannot name a folder", sessionID)
	}
	dir := filepath.Join(w.cfg.Workdir, sessionID+roomSuffix)
	if _, err := os.Lstat(dir); err == nil {
		log.Info("removing the session's room a killed worker left behind; each session starts in an empty one", "path", dir)
		if err := removeTree(dir); err != nil {
			return "", fmt.Errorf("remove the room %s a killed worker left (%v); remove it by hand", dir, err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create the session's room %s (%v); give the worker's user write access to --workdir %s", dir, err, w.cfg.Workdir)
	}
	return dir, nil
}

// closeRoom removes the room, or keeps it with Config.KeepWorkdirs.
func (w *Worker) closeRoom(dir string, log *slog.Logger) {
	if w.cfg.KeepWorkdirs {
		log.Info("the session's room is kept for inspection (--keep-workdirs)", "path", dir)
		return
	}
	if err := removeTree(dir); err != nil {
		log.Warn("the session's room could not be removed", "path", dir, "err", err, "fix", "remove it by hand")
	}
}

// removeTree removes dir and everything in it, folders the agent made
// unreadable or unwritable (chmod 000) included.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	// WalkDir calls the func on a folder before it reads it: made
	// readable then, it can be listed and emptied.
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// claimShared claims dirs, the shared folders of a session's stores in the
// worker's mount root, for an unsandboxed session: all of them, or none
// when another session of this worker holds one (ok false). release lets
// go of them. Without a sandbox the shared folder is where the agent's
// bash finds a store; a second session of the store gets folders of its
// own instead (mountRootFor), so the two run side by side rather than one
// waiting for the other to end.
func (w *Worker) claimShared(dirs []string) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range dirs {
		if w.folders[d] {
			return nil, false
		}
	}
	for _, d := range dirs {
		w.folders[d] = true
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, d := range dirs {
			delete(w.folders, d)
		}
	}, true
}
