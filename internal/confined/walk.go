//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
func (r *Root) Walk() ([]Entry, []Skipped, error) {
	fd, err := r.openRoot()
	if err != nil {
		return nil, nil, &fs.PathError{Op: "walk", Path: r.dir, Err: err}
	}
	w := &walker{}
	if err := w.dir(fd, ""); err != nil {
		return nil, nil, &fs.PathError{Op: "walk", Path: r.dir, Err: err}
	}
	return w.files, w.skipped, nil
}

type walker struct {
	files   []Entry
	skipped []Skipped
}

// dir lists the directory open as fd (whose path is prefix) and closes fd.
// Only a failure to read the listing itself is returned.
func (w *walker) dir(fd int, prefix string) error {
	f := os.NewFile(uintptr(fd), prefix)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read the folder listing: %w", err)
	}
	slices.Sort(names)
	dirfd := int(f.Fd())
	for _, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		if !utf8.ValidString(name) {
			w.skip(rel, ErrBadName)
			continue
		}
		if IsTempName(name) {
			w.skip(rel, ErrTempFile)
			continue
		}
		st, err := lstatAt(dirfd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since the listing: simply not there
		}
		if err != nil {
			w.skip(rel, err)
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if err := typeError(&st); err != nil {
				w.skip(rel, err) // a hard link
				continue
			}
			w.files = append(w.files, Entry{Path: rel, Info: fileInfo(&st)})
		case unix.S_IFDIR:
			sub, err := openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				w.skip(rel, classify(dirfd, name, err))
				continue
			}
			if err := w.dir(sub, rel); err != nil {
				w.skip(rel, err)
			}
		default:
			w.skip(rel, typeError(&st))
		}
	}
	return nil
}

func (w *walker) skip(rel string, err error) {
	w.skipped = append(w.skipped, Skipped{Path: rel, Err: err})
}
