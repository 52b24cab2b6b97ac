package memsync

import "fmt"

// MarkerName is the file at the root of every store folder that binds the
// folder to its store. It is never synced, and the server's listing of a
// memory at "/"+MarkerName is skipped.
//
// A sync only trusts a folder whose marker names its store: a folder that
// was deleted and re-created, or that holds another store's or someone
// else's files, must never be uploaded from or drive deletions on the
// server.
const MarkerName = ".anthropic-memory-store"

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
