//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"errors"
	"fmt"
	"strings"

	"github.com/memstore/memstore/internal/validate"
)

// Errors a caller can test for with errors.Is. They reach the caller wrapped
// in an *fs.PathError naming the operation and the relative path.
var (
	// ErrInvalidPath: the relative path is absolute, empty, contains a NUL
	// byte, or has an empty, "." or ".." segment.
	ErrInvalidPath = errors.New("invalid path")
	// ErrSymlink: a component of the path is a symbolic link. Links are
	// never followed, wherever they are.
	ErrSymlink = errors.New("is a symbolic link, and symbolic links are never followed")
	// ErrNotDirectory: an intermediate component exists but is not a directory.
	ErrNotDirectory = errors.New("is not a directory")
	// ErrNotRegular: the path names a FIFO, socket, device, directory or a
	// file with more than one hard link where a regular file was required.
	ErrNotRegular = errors.New("is not a regular file")
	// ErrTooLarge: a read hit its size cap.
	ErrTooLarge = errors.New("is larger than the size limit")
	// ErrChanged: a [Precondition] did not hold — the file changed since the
	// caller last looked at it, so the write or removal was not done.
	ErrChanged = errors.New("changed since it was last looked at, so it was left alone")
	// ErrBadName: a directory entry's name is not valid UTF-8, so it cannot
	// be a memory path. Reported by [Root.Walk], never followed.
	ErrBadName = errors.New("has a name that is not valid UTF-8")
	// ErrTempFile: the entry is a temporary file of an atomic write (see
	// [IsTempName]), most likely left by an interrupted one.
	ErrTempFile = errors.New("is a temporary file of an interrupted write")
)

// TempPrefix starts the name of every temporary file an atomic write makes,
// here and in any other writer into a store's folder (the agent's file
// tools). Walk reports such files as skipped instead of listing them, so a
// leftover from a crash is never uploaded as a memory; the API refuses
// memory paths that use it, so no memory is skipped for it.
const TempPrefix = validate.TempPrefix

// IsTempName reports whether a file name (one path segment) is one of the
// temporary names [Root.WriteFile] uses.
func IsTempName(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// split validates a relative path and returns its segments.
func split(rel string) ([]string, error) {
	var why string
	switch {
	case rel == "":
		why = "the path is empty"
	case rel[0] == '/':
		why = "absolute paths are refused; give a path relative to the folder"
	case strings.IndexByte(rel, 0) >= 0:
		why = "the path contains a NUL byte"
	}
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalidPath, why)
	}
	segs := strings.Split(rel, "/")
	for _, s := range segs {
		switch s {
		case "":
			why = "the path has an empty segment (a doubled or trailing slash)"
		case ".":
			why = `the path has a "." segment`
		case "..":
			why = `the path has a ".." segment, which could leave the folder`
		}
		if why != "" {
			return nil, fmt.Errorf("%w: %s", ErrInvalidPath, why)
		}
	}
	return segs, nil
}
