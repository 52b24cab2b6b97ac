//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is one confined folder. It holds no open descriptor: every operation
// opens the folder afresh (refusing a symlink in its place), so a folder that
// was removed or replaced since the last call is noticed instead of being
// written through a stale descriptor.
//
// The folder's own parent directories are the operator's configuration and
// are trusted; everything below the folder is not.
type Root struct {
	dir string
	// noSync skips every fsync (see WithoutSync).
	noSync bool
	// hardLinksOK lets reads open files with several links (see
	// WithHardLinks); keepModes makes writes keep a file's permission bits
	// (see KeepingModes).
	hardLinksOK, keepModes bool
}

// Open returns the confined folder at dir, which must already exist as a
// directory and must not be a symlink.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	r := &Root{dir: abs}
	fd, err := r.openRoot()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: abs, Err: err}
	}
	_ = unix.Close(fd)
	return r, nil
}

// Create makes the folder dir (mode 0700) and returns it. It fails with an
// error matching fs.ErrExist if anything — file, folder or symlink — is
// already at dir, so a caller that must not adopt someone else's folder can
// rely on it; a caller rebuilding a folder it owns can treat that error as
// success after checking with [Open].
func Create(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: dir, Err: err}
	}
	if err := unix.Mkdir(abs, 0o700); err != nil {
		return nil, &fs.PathError{Op: "create", Path: abs, Err: err}
	}
	return &Root{dir: abs}, nil
}

// Dir returns the folder's absolute path.
func (r *Root) Dir() string { return r.dir }

// WithoutSync returns the same folder with durability switched off: writes
// stay atomic for every reader (temporary file, then rename), and
// preconditions and confinement are unchanged, but nothing is fsynced, so a
// crash of the machine may lose or empty recent writes.
//
// That is the right trade for a folder that is only a copy of another
// source of truth: a memory store's folder is filled from the server, and
// the crash it must survive is the worker's (the page cache, and so every
// write, outlives the process). There, two disk flushes per file bought
// nothing and tripled the time to download a store.
func (r *Root) WithoutSync() *Root {
	c := *r
	c.noSync = true
	return &c
}

// WithHardLinks returns the same folder with files that have several hard
// links readable. Symlinks are still never followed, and a write still
// replaces the name rather than writing through the link.
//
// The refusal guards a memory store's folder, whose files the sync
// publishes: there, a hard link to a file outside may leak it. An agent's
// working directory publishes nothing, and hard links are common in it
// (package managers link their caches into projects).
func (r *Root) WithHardLinks() *Root {
	c := *r
	c.hardLinksOK = true
	return &c
}

// KeepingModes returns the same folder with writes that give a replaced
// file the permission bits it had (a new file is still 0600): in a
// working directory an executable script stays executable after an edit.
// A memory store's folder wants every file owner-only instead.
func (r *Root) KeepingModes() *Root {
	c := *r
	c.keepModes = true
	return &c
}

// fsync flushes the directory open as fd, unless r is WithoutSync.
func (r *Root) fsync(fd int) error {
	if r.noSync {
		return nil
	}
	return unix.Fsync(fd)
}

// openRoot opens the folder itself without following a symlink there.
func (r *Root) openRoot() (int, error) {
	fd, err := openat(unix.AT_FDCWD, r.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("store folder %s: %w", r.dir, classify(unix.AT_FDCWD, r.dir, err))
	}
	return fd, nil
}

// openat retries on EINTR, which a slow filesystem may return when a signal
// arrives mid-open; O_CLOEXEC keeps descriptors out of spawned tool processes.
func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// classify turns the errno of a failed no-follow open into one of this
// package's errors. Platforms disagree on the errno for "O_NOFOLLOW met a
// symlink" (ELOOP on Linux, EMLINK on FreeBSD, EFTYPE on NetBSD; ENOTDIR when
// O_DIRECTORY is also set), so the entry is looked at again instead.
func classify(dirfd int, name string, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return ErrSymlink
	case unix.S_IFDIR:
		return err
	default:
		if errors.Is(err, unix.ENOTDIR) {
			return ErrNotDirectory
		}
		return err
	}
}

// chain is the open directories from the folder down to the parent of a
// path's last component. fds[0] is the folder; fds[i+1] is names[i] opened
// inside fds[i]. Holding every level open lets a removal prune empty parents
// relative to descriptors, never by re-resolving a path.
type chain struct {
	fds   []int
	names []string
}

func (c *chain) dir() int { return c.fds[len(c.fds)-1] }

func (c *chain) close() {
	for _, fd := range c.fds {
		_ = unix.Close(fd)
	}
}

// walkTo opens the directories named by segs one by one, never following a
// symlink. With create set, missing directories are made (mode 0700) and the
// directory holding each new one is fsynced so the new entry is durable.
// Errors come back wrapped for op and rel, naming the component at fault.
func (r *Root) walkTo(op, rel string, segs []string, create bool) (*chain, error) {
	root, err := r.openRoot()
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	c := &chain{fds: []int{root}}
	for i, name := range segs {
		fd, err := openat(c.dir(), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) && create {
			err = unix.Mkdirat(c.dir(), name, 0o700)
			if err == nil {
				err = r.fsync(c.dir())
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = openat(c.dir(), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			}
		}
		if err != nil {
			err = componentError(strings.Join(segs[:i+1], "/"), classify(c.dir(), name, err))
			c.close()
			return nil, &fs.PathError{Op: op, Path: rel, Err: err}
		}
		c.fds = append(c.fds, fd)
		c.names = append(c.names, name)
	}
	return c, nil
}

// componentError names the intermediate component an error is about, so
// "a/b/c.md: "a" is a symbolic link…" says which link blocked the walk.
func componentError(component string, err error) error {
	if errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotDirectory) {
		return fmt.Errorf("%q %w", component, err)
	}
	return fmt.Errorf("%q: %w", component, err)
}

// lstatAt stats name inside dirfd without following a symlink.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return st, err
		}
	}
}

// typeError is the error for an entry of the wrong type where a regular file
// was wanted: anything but a regular file with a single link.
func typeError(st *unix.Stat_t) error { return typeErrorLinks(st, false) }

// typeErrorLinks is typeError that, with hardLinksOK, also accepts a
// regular file with several links.
func typeErrorLinks(st *unix.Stat_t, hardLinksOK bool) error {
	return notRegular(fileMode(uint32(st.Mode)), uint64(st.Nlink), hardLinksOK)
}

// notRegular is typeErrorLinks for an entry described by its mode and link
// count.
func notRegular(mode fs.FileMode, links uint64, hardLinksOK bool) error {
	switch {
	case mode.IsRegular():
		if n := links; n > 1 && !hardLinksOK {
			// A hard link shares its content with a file that may lie
			// outside the folder: reading it would leak that file, and
			// syncing it would publish it.
			return fmt.Errorf("%w (it has %d hard links, so it may share its content with a file outside the folder)", ErrNotRegular, n)
		}
		return nil
	case mode&fs.ModeSymlink != 0:
		return ErrSymlink
	case mode.IsDir():
		return fmt.Errorf("%w (it is a directory)", ErrNotRegular)
	default:
		return ErrNotRegular
	}
}
