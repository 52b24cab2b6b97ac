//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// FileInfo is what one lstat says about a file.
type FileInfo struct {
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	// ChangeTime is the inode change time (ctime). Unlike ModTime no user
	// process can set it, so a tool that preserves modification times
	// (cp -p, rsync -t) still changes it.
	ChangeTime time.Time
	Inode      uint64
	Device     uint64
	// Links is the number of hard links to the file.
	Links uint64
}

// identity is the part of a stat that changes whenever a file's content may
// have: a rewrite in place changes mtime and ctime, a replace-by-rename
// changes the inode, and a truncation changes the size.
type identity struct {
	size         int64
	mtime, ctime int64
	inode, dev   uint64
}

func (fi FileInfo) identity() identity {
	return identity{
		size:  fi.Size,
		mtime: fi.ModTime.UnixNano(),
		ctime: fi.ChangeTime.UnixNano(),
		inode: fi.Inode,
		dev:   fi.Device,
	}
}

func fileInfo(st *unix.Stat_t) FileInfo {
	return FileInfo{
		Size:       st.Size,
		Mode:       fileMode(uint32(st.Mode)),
		ModTime:    time.Unix(0, st.Mtim.Nano()),
		ChangeTime: time.Unix(0, st.Ctim.Nano()),
		Inode:      uint64(st.Ino),
		Device:     uint64(st.Dev),
		Links:      uint64(st.Nlink),
	}
}

func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// Lstat describes what is at rel without following a symlink anywhere: a
// symlink at rel is described itself (Mode has fs.ModeSymlink), and a
// symlink in place of a folder on the way fails with [ErrSymlink]. An error
// matching fs.ErrNotExist means nothing is at rel.
//
// A sync uses it to confirm, just before it deletes a memory because its
// file is gone, that the file is still gone: an error other than "not
// exist" means something may be there, and the delete must wait.
func (r *Root) Lstat(rel string) (FileInfo, error) {
	const op = "lstat"
	segs, err := split(rel)
	if err != nil {
		return FileInfo{}, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	c, err := r.walkTo(op, rel, segs[:len(segs)-1], false)
	if err != nil {
		return FileInfo{}, err
	}
	defer c.close()
	st, err := lstatAt(c.dir(), segs[len(segs)-1])
	if err != nil {
		return FileInfo{}, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	return fileInfo(&st), nil
}
