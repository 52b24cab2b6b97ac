//go:build !linux

package memsync_test

import (
	"errors"
	"testing"
)

func bindReadOnly(*testing.T, string) error {
	return errors.New("read-only bind mounts are a Linux feature")
}
