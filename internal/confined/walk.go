//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Entry is one regular file found by [Root.Walk].
type Entry struct {
	// Path is relative to the folder, slash-separated.
	Path string
	Info FileInfo
}

// Skipped is one directory entry [Root.Walk] did not list, and why: Err
// matches [ErrSymlink], [ErrNotRegular], [ErrBadName] or [ErrTempFile], or
// is the I/O error that kept a file from being looked at or a directory from
// being read. A skipped directory's content is not walked.
type Skipped struct {
	Path string
	Err  error
}

// Walk lists every regular file under the folder with its stat, in a
// deterministic order, and reports every entry it skipped so the caller can
// log it. It never descends through a symlink. It fails only when the folder
// itself cannot be opened or read (an error matching fs.ErrNotExist if it is
// gone); a subfolder that cannot be read is reported as skipped, so one
// unreadable folder never makes its files look deleted.
//
// Entries whose name is not valid UTF-8 are skipped ([ErrBadName]): no memory
// can have such a path. Temporary files of atomic writes are skipped
// ([ErrTempFile]) so a crash's leftovers are never mistaken for memories.
// Files with several hard links are skipped ([ErrNotRegular]) unless the
// view is [Root.WithHardLinks].
func (r *Root) Walk() ([]Entry, []Skipped, error) {
	var files []Entry
	var skipped []Skipped
	skip := func(rel string, err error) error {
		skipped = append(skipped, Skipped{Path: rel, Err: err})
		return fs.SkipDir
	}
	err := r.visit("", func(rel string, info FileInfo, err error) error {
		name := path.Base(rel)
		switch {
		case !utf8.ValidString(name):
			return skip(rel, ErrBadName)
		case IsTempName(name):
			return skip(rel, ErrTempFile)
		case err != nil:
			return skip(rel, err)
		case info.Mode.IsDir():
			return nil
		}
		if err := notRegular(info.Mode, info.Links, r.hardLinksOK); err != nil {
			return skip(rel, err)
		}
		files = append(files, Entry{Path: rel, Info: info})
		return nil
	})
	if err != nil {
		return nil, nil, &fs.PathError{Op: "walk", Path: r.dir, Err: err}
	}
	return files, skipped, nil
}

// VisitFunc is called by [Root.Visit] for each entry, with its path
// relative to the folder and its lstat. A non-nil err says the entry could
// not be looked at, or, in a second call for a directory already visited,
// that it could not be opened or listed (its content is then not walked).
// Returning [fs.SkipDir] for a directory skips its content (for any other
// entry it is the same as nil); [fs.SkipAll] ends the walk without error;
// any other error ends the walk and Visit returns it.
type VisitFunc func(rel string, info FileInfo, err error) error

// Visit walks the tree below the folder start (relative to the folder; ""
// is the folder itself) depth first, each directory's entries in lexical
// order, and calls fn for every entry: files, folders, symlinks and
// anything else, each described by itself. It never follows a symlink,
// neither to reach start nor below it. An entry removed while the walk
// runs is simply not there. Visit fails only when start cannot be opened
// or listed, or when fn says so.
func (r *Root) Visit(start string, fn VisitFunc) error {
	if err := r.visit(start, fn); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return err
		}
		return &fs.PathError{Op: "visit", Path: start, Err: err}
	}
	return nil
}

// visit is Visit, its errors not yet wrapped in an *fs.PathError unless
// they come from the walk to start.
func (r *Root) visit(start string, fn VisitFunc) error {
	var fd int
	if start == "" {
		var err error
		if fd, err = r.openRoot(); err != nil {
			return err
		}
	} else {
		segs, err := split(start)
		if err != nil {
			return err
		}
		c, err := r.walkTo("visit", start, segs, false)
		if err != nil {
			return err
		}
		// The chain's last directory is start itself: keep it, close
		// the rest.
		fd = c.fds[len(c.fds)-1]
		c.fds = c.fds[:len(c.fds)-1]
		c.close()
	}
	err := visitDir(fd, start, fn)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

// visitDir lists the directory open as fd (whose path is prefix), calls fn
// for each entry and descends into subdirectories; it closes fd. It
// returns the listing's failure, fs.SkipAll or fn's error.
func visitDir(fd int, prefix string, fn VisitFunc) error {
	f := os.NewFile(uintptr(fd), prefix)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return &listingError{err}
	}
	slices.Sort(names)
	dirfd := int(f.Fd())
	for _, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		st, err := lstatAt(dirfd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since the listing: simply not there
		}
		if err != nil {
			if err := fn(rel, FileInfo{}, err); err != nil && !errors.Is(err, fs.SkipDir) {
				return err
			}
			continue
		}
		info := fileInfo(&st)
		err = fn(rel, info, nil)
		switch {
		case errors.Is(err, fs.SkipDir):
			continue
		case err != nil:
			return err
		case !info.Mode.IsDir():
			continue
		}
		sub, err := openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			err = classify(dirfd, name, err)
		} else if err = visitDir(sub, rel, fn); err == nil {
			continue
		} else if le := (*listingError)(nil); !errors.As(err, &le) {
			return err // fn's, or fs.SkipAll
		}
		if err := fn(rel, info, err); err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
	}
	return nil
}

// listingError is a directory listing that failed, told apart from the
// errors fn returns so that a subfolder's is reported to fn, not returned.
type listingError struct{ err error }

func (e *listingError) Error() string { return "read the folder listing: " + e.err.Error() }
func (e *listingError) Unwrap() error { return e.err }
