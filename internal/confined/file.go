//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Precondition is what a path must hold immediately before [Root.WriteFile]
// replaces it or [Root.RemoveFile] removes it. The zero value checks nothing.
//
// A sync decides what to do from a scan taken a moment earlier; the agent may
// have edited the file since. Checking again right before the rename or
// unlink — relative to the same open parent directory — shrinks the window in
// which such an edit could be lost to the few microseconds between the check
// and the syscall.
type Precondition struct {
	// Absent requires that nothing at all is at the path.
	Absent bool
	// SHA256, when set, requires a regular file whose content hashes to this
	// lowercase hex SHA-256.
	SHA256 string
}

var errBadPrecondition = errors.New("a precondition cannot require both absence and content")

func (p Precondition) check(dirfd int, leaf string) error {
	switch {
	case p.Absent:
		_, err := lstatAt(dirfd, leaf)
		switch {
		case err == nil:
			return fmt.Errorf("%w (something is there now)", ErrChanged)
		case errors.Is(err, unix.ENOENT):
			return nil
		default:
			return err
		}
	case p.SHA256 != "":
		f, _, err := openRegular(dirfd, leaf, false)
		switch {
		case errors.Is(err, unix.ENOENT):
			return fmt.Errorf("%w (it is gone)", ErrChanged)
		case errors.Is(err, ErrSymlink), errors.Is(err, ErrNotRegular):
			return fmt.Errorf("%w (it %v)", ErrChanged, err)
		case err != nil:
			return err
		}
		defer f.Close()
		d, err := digest(f)
		if err != nil {
			return err
		}
		if d.SHA256 != p.SHA256 {
			return fmt.Errorf("%w (its content differs)", ErrChanged)
		}
	}
	return nil
}

// openRegular opens leaf inside dirfd for reading, only if it is a regular
// file (with several hard links only if hardLinksOK). The lstat first keeps a FIFO or device from even being opened (an
// open can have side effects on a device); O_NONBLOCK keeps a FIFO swapped in
// after that lstat from blocking the open, and the fstat of the opened
// descriptor catches that swap.
func openRegular(dirfd int, leaf string, hardLinksOK bool) (*os.File, unix.Stat_t, error) {
	st, err := lstatAt(dirfd, leaf)
	if err != nil {
		return nil, st, err
	}
	if err := typeErrorLinks(&st, hardLinksOK); err != nil {
		return nil, st, err
	}
	fd, err := openat(dirfd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, st, classify(dirfd, leaf, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, st, err
	}
	if err := typeErrorLinks(&st, hardLinksOK); err != nil {
		_ = unix.Close(fd)
		return nil, st, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), leaf), st, nil
}

// Open opens the regular file at rel for reading, refusing symlinks
// anywhere on the path, FIFOs, devices, directories and files with several
// hard links (unless [Root.WithHardLinks]), and returns it with its stat.
// The caller closes it.
func (r *Root) Open(rel string) (*os.File, FileInfo, error) {
	const op = "open"
	segs, err := split(rel)
	if err != nil {
		return nil, FileInfo{}, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	c, err := r.walkTo(op, rel, segs[:len(segs)-1], false)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer c.close()
	f, st, err := openRegular(c.dir(), segs[len(segs)-1], r.hardLinksOK)
	if err != nil {
		return nil, FileInfo{}, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	return f, fileInfo(&st), nil
}

// ReadFile returns the content of the regular file at rel, refusing what
// [Root.Open] refuses, and refusing with [ErrTooLarge] a file longer than
// max bytes (max must not be negative).
func (r *Root) ReadFile(rel string, max int64) ([]byte, error) {
	const op = "read"
	f, st, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size > max {
		return nil, &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("%w of %d bytes (it has %d)", ErrTooLarge, max, st.Size)}
	}
	// The file may grow after the fstat, so the cap is enforced on the read too.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("%w of %d bytes", ErrTooLarge, max)}
	}
	return data, nil
}

// WriteFile atomically makes rel a regular file (mode 0600, or with
// [Root.KeepingModes] the mode of the file it replaces) holding data.
//
// Missing parent folders are created (mode 0700) without following a symlink
// anywhere. The content goes to a temporary file in the same folder, is
// fsynced, pre is checked against what rel holds at that moment, and only then
// is the temporary file renamed over rel and the folder fsynced: a reader sees
// the old content or the new, never a mix, and a failed precondition
// ([ErrChanged]) leaves rel untouched. A symlink at rel is replaced, not
// followed. An empty folder at rel holds nothing to lose and is replaced
// too (unless pre requires content), so that a folder emptied of its files
// never blocks a file of the same name; a folder that holds anything is
// refused with [ErrNotRegular]. No temporary file survives an error. A
// [Root.WithoutSync] view skips both fsyncs.
func (r *Root) WriteFile(rel string, data []byte, pre Precondition) error {
	const op = "write"
	segs, err := split(rel)
	switch {
	case err != nil:
	case pre.Absent && pre.SHA256 != "":
		err = errBadPrecondition
	case IsTempName(segs[len(segs)-1]):
		err = fmt.Errorf("%w: names starting with %q are reserved for temporary files", ErrInvalidPath, TempPrefix)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	leaf := segs[len(segs)-1]
	c, err := r.walkTo(op, rel, segs[:len(segs)-1], true)
	if err != nil {
		return err
	}
	defer c.close()
	dir := c.dir()
	if st, err := lstatAt(dir, leaf); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// rmdir removes the folder only while it is empty, so nothing in
		// it can be lost to a file created there meanwhile.
		if pre.SHA256 != "" || unix.Unlinkat(dir, leaf, unix.AT_REMOVEDIR) != nil {
			return &fs.PathError{Op: op, Path: rel, Err: typeError(&st)}
		}
	}
	tmp, f, err := createTemp(dir)
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if r.keepModes {
		if st, err := lstatAt(dir, leaf); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			_ = f.Chmod(fileMode(uint32(st.Mode)).Perm())
		}
	}
	_, err = f.Write(data)
	if err == nil && !r.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = pre.check(dir, leaf)
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, leaf)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	renamed = true
	if err := r.fsync(dir); err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("the file is in place but its folder could not be synced to disk: %w", err)}
	}
	return nil
}

// createTemp creates a fresh temporary file (mode 0600) inside dirfd.
func createTemp(dirfd int) (string, *os.File, error) {
	var rnd [8]byte
	for range 10 {
		_, _ = rand.Read(rnd[:])
		name := TempPrefix + hex.EncodeToString(rnd[:])
		fd, err := openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create a temporary file: %w", err)
		}
		return name, os.NewFile(uintptr(fd), name), nil
	}
	return "", nil, errors.New("create a temporary file: every random name was taken")
}

// RemoveFile removes the file at rel, after checking pre against it. A
// symlink at rel is removed itself, never its target; a directory is refused
// with [ErrNotRegular]. A missing file gives an error matching
// fs.ErrNotExist.
//
// With pruneEmpty set, the folders that held the file are then removed from
// the deepest up, stopping at the first that is not empty and never removing
// the store folder itself — a memory deleted on the server should not leave
// an empty folder behind. Pruning is best effort: once the file is gone,
// RemoveFile reports success even if a folder could not be removed.
func (r *Root) RemoveFile(rel string, pre Precondition, pruneEmpty bool) error {
	const op = "remove"
	segs, err := split(rel)
	if err == nil && pre.Absent {
		err = errors.New("a removal cannot require the file to be absent")
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	c, err := r.walkTo(op, rel, segs[:len(segs)-1], false)
	if err != nil {
		return err
	}
	defer c.close()
	dir, leaf := c.dir(), segs[len(segs)-1]
	st, err := lstatAt(dir, leaf)
	if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = typeError(&st)
	}
	if err == nil {
		err = pre.check(dir, leaf)
	}
	if err == nil {
		err = unix.Unlinkat(dir, leaf, 0)
	}
	if err == nil {
		err = r.fsync(dir)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	if pruneEmpty {
		for i := len(c.names) - 1; i >= 0; i-- {
			if unix.Unlinkat(c.fds[i], c.names[i], unix.AT_REMOVEDIR) != nil {
				break
			}
			_ = r.fsync(c.fds[i])
		}
	}
	return nil
}

// CaseInsensitive reports whether the folder's filesystem treats names that
// differ only in letter case as one name (the default on macOS), by creating
// a probe file and looking it up under an upper-cased name. A sync needs to
// know: on such a filesystem two memories /Notes.md and /notes.md would share
// one file.
func (r *Root) CaseInsensitive() (bool, error) {
	const op = "probe case sensitivity"
	fd, err := r.openRoot()
	if err != nil {
		return false, &fs.PathError{Op: op, Path: r.dir, Err: err}
	}
	defer unix.Close(fd)
	name, f, err := createTemp(fd)
	if err != nil {
		return false, &fs.PathError{Op: op, Path: r.dir, Err: err}
	}
	_ = f.Close()
	defer unix.Unlinkat(fd, name, 0)
	orig, err := lstatAt(fd, name)
	if err != nil {
		return false, &fs.PathError{Op: op, Path: r.dir, Err: err}
	}
	upper, err := lstatAt(fd, strings.ToUpper(name))
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, &fs.PathError{Op: op, Path: r.dir, Err: err}
	}
	return upper.Ino == orig.Ino && upper.Dev == orig.Dev, nil
}
