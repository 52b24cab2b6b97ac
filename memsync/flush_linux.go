package memsync

import "golang.org/x/sys/unix"

// flushFolder makes everything written to, renamed in or removed from the
// folder dir durable: one syncfs of its filesystem, rather than an fsync
// of every file and folder the sync touched.
func flushFolder(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}
