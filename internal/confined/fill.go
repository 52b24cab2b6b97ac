//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Filler creates the files of a folder being filled for the first time:
// a store's folder that a mount just created, where nothing is anyone
// else's yet. [Root.WriteFile] costs a temporary file, a rename and a walk
// from the folder down for every file; on a fresh folder none of it buys
// anything, and the kernel's create of the temporary file was half the CPU
// of a mount. A Filler creates each file at its own name (O_CREAT|O_EXCL,
// so nothing already there is replaced and no symlink is followed) and
// keeps the folders it opened, so a file costs one open, one write and
// one close.
//
// What it gives up is what a fresh folder does not need: a reader may see
// a file half written, and a crash may leave one. The caller must make
// sure no one reads the folder until the fill is done, and that a folder
// a crash cut short is recognised as such (memsync journals the mount
// first). Nothing is fsynced: the caller flushes the filesystem once.
//
// It holds descriptors of the folders it walked until Close, so it is for
// the length of one fill: a folder moved meanwhile would still be written
// through. Safe for concurrent use.
type Filler struct {
	r    *Root
	mu   sync.Mutex
	dirs map[string]int // folder path relative to the root ("" for the root) → open descriptor
}

// Filler opens the folder for a fill. The caller closes it.
func (r *Root) Filler() (*Filler, error) {
	fd, err := r.openRoot()
	if err != nil {
		return nil, &fs.PathError{Op: "fill", Path: r.dir, Err: err}
	}
	return &Filler{r: r, dirs: map[string]int{"": fd}}, nil
}

// Close lets go of the folders the fill opened. No Create may be running:
// its folder's descriptor could be closed, and its number reused, under it.
func (f *Filler) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fd := range f.dirs {
		_ = unix.Close(fd)
	}
	f.dirs = nil
}

// Create makes rel a new regular file (mode 0600) holding data, creating
// its missing parent folders (mode 0700) without following a symlink
// anywhere. It fails with [ErrChanged] if anything is at rel already, and
// removes the file again if the write fails.
func (f *Filler) Create(rel string, data []byte) error {
	const op = "create"
	segs, err := split(rel)
	if err == nil && IsTempName(segs[len(segs)-1]) {
		err = fmt.Errorf("%w: names starting with %q are reserved for temporary files", ErrInvalidPath, TempPrefix)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	dir, err := f.dir(segs[:len(segs)-1])
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	leaf := segs[len(segs)-1]
	fd, err := openat(dir, leaf, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("%w (something is there now)", ErrChanged)}
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	err = writeAll(fd, data)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		// The file is this fill's own (O_EXCL): nothing else is lost.
		_ = unix.Unlinkat(dir, leaf, 0)
		return &fs.PathError{Op: op, Path: rel, Err: err}
	}
	return nil
}

// dir returns the open descriptor of the folder segs names, opening (and
// creating) the folders on the way that the fill has not opened yet.
func (f *Filler) dir(segs []string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs == nil {
		return -1, errors.New("the fill is closed")
	}
	return f.open(segs)
}

// open is dir under f.mu.
func (f *Filler) open(segs []string) (int, error) {
	key := strings.Join(segs, "/")
	if fd, ok := f.dirs[key]; ok {
		return fd, nil
	}
	parent, err := f.open(segs[:len(segs)-1])
	if err != nil {
		return -1, err
	}
	name := segs[len(segs)-1]
	fd, err := openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		err = unix.Mkdirat(parent, name, 0o700)
		if err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		}
	}
	if err != nil {
		return -1, componentError(key, classify(parent, name, err))
	}
	f.dirs[key] = fd
	return fd, nil
}

// writeAll writes data to fd, retrying short writes and EINTR.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
