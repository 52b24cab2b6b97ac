package memsync_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// bindReadOnly bind-mounts dir onto itself read-only, undone when the test
// ends; it needs CAP_SYS_ADMIN.
func bindReadOnly(t *testing.T, dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
}
