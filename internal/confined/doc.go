// Package confined does file I/O inside one directory (a memory store's
// folder) without ever leaving it.
//
// The folder is shared with an agent that runs arbitrary shell commands, so
// anything in it may be a trap: a symlink planted where a file or folder used
// to be, a FIFO that would block a reader forever, a directory swapped for a
// link between two calls. Every operation here therefore walks the path one
// component at a time with openat(2) and O_NOFOLLOW, holding each directory
// open while it opens the next, so no symlink is followed anywhere — not in
// the last component and not in an intermediate one — and a swap racing the
// walk makes the walk fail instead of escaping. Go's os.Root resists escapes
// but still follows links that stay inside the root, which is not enough
// here: a link inside the folder can still make two memories share one file.
//
// Paths are relative, slash-separated, and clean: absolute paths and empty,
// "." or ".." segments are refused with [ErrInvalidPath] rather than
// normalised, because a path that needs cleaning did not come from a
// well-behaved caller.
//
// Only regular files are read or hashed. Writes are atomic (temporary file in
// the same directory, fsync, rename, fsync of the directory) so a crash or a
// concurrent reader never sees half a memory, and they can be made
// conditional on what the file holds just before the rename
// ([Precondition]), which is how a sync avoids overwriting an edit made after
// it looked at the folder. A [Root.WithoutSync] view keeps the atomicity and
// drops the fsyncs, for folders that a crash makes worthless anyway. A
// [Filler] drops the atomicity too, for a folder being filled for the first
// time, which no one reads until the fill is done.
//
// POSIX only: it relies on openat, O_NOFOLLOW and O_DIRECTORY.
package confined
