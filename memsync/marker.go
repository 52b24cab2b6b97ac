package memsync

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"

	"github.com/memstore/memstore/internal/confined"

	"github.com/memstore/memstore/internal/validate"
)

// MarkerName is the file at the root of every store folder that binds the
// folder to its store. It is never synced; the API refuses it as a memory
// path, and a memory stored there before that rule is skipped.
//
// A sync only trusts a folder whose marker names its store: a folder that
// was deleted and re-created, or that holds another store's or someone
// else's files, must never be uploaded from or drive deletions on the
// server.
const MarkerName = validate.MarkerName

// markerVersion is the marker format's version, the first line of the file.
const markerVersion = 1

// MarkerContent returns the exact bytes of the marker for a store:
// "version 1\n" followed by the store id, with no trailing newline. This is
// the format the official SDK's environment worker writes, so a folder
// mounted by either worker is recognised by the other.
func MarkerContent(memoryStoreID string) []byte {
	return fmt.Appendf(nil, "version %d\n%s", markerVersion, memoryStoreID)
}

// MarkerState is what a scan found where the marker should be.
type MarkerState uint8

const (
	// MarkerMissing: no marker (or no folder at all). The zero value, so a
	// Local built by hand is untrusted unless it says otherwise.
	MarkerMissing MarkerState = iota
	// MarkerMismatch: something is at the marker's path but it is not this
	// store's marker (other content, a symlink, unreadable).
	MarkerMismatch
	// MarkerTrusted: the marker names this store.
	MarkerTrusted
)

func (m MarkerState) String() string {
	switch m {
	case MarkerMissing:
		return "missing"
	case MarkerMismatch:
		return "mismatch"
	case MarkerTrusted:
		return "trusted"
	}
	return fmt.Sprintf("MarkerState(%d)", m)
}

// markerReadLimit bounds the marker read: a real marker is a few dozen bytes.
const markerReadLimit = 4096

// readMarker looks at the marker of the folder at root. Anything but a
// regular file holding exactly [MarkerContent] is a mismatch — a symlink, a
// folder, other content — except nothing at all (the folder itself may be
// gone), which is missing.
func readMarker(root *confined.Root, memoryStoreID string) MarkerState {
	content, err := root.ReadFile(MarkerName, markerReadLimit)
	switch {
	case err == nil && bytes.Equal(content, MarkerContent(memoryStoreID)):
		return MarkerTrusted
	case errors.Is(err, fs.ErrNotExist):
		return MarkerMissing
	default:
		return MarkerMismatch
	}
}
