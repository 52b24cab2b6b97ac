package memsync

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/validate"
)

// Unsyncable is why a regular file in the folder cannot be a memory.
type Unsyncable uint8

const (
	// Syncable: the file can be uploaded.
	Syncable Unsyncable = iota
	// NotUTF8: memories are text; the content is not valid UTF-8.
	NotUTF8
	// TooLarge: the content is larger than api.MaxContentBytes.
	TooLarge
)

func (u Unsyncable) String() string {
	switch u {
	case Syncable:
		return "is syncable"
	case NotUTF8:
		return "is not valid UTF-8"
	case TooLarge:
		return fmt.Sprintf("is larger than %d bytes", api.MaxContentBytes)
	}
	return fmt.Sprintf("Unsyncable(%d)", u)
}

// LocalFile is one regular file found in the folder.
type LocalFile struct {
	// SHA256 is the lowercase hex SHA-256 of the content.
	SHA256 string
	// Unsyncable says why the file cannot be uploaded, if it cannot. Such a
	// file still counts as present: it is never mistaken for a deletion.
	Unsyncable Unsyncable
}

// Local is one scan of a store's folder.
type Local struct {
	// Marker is whether the folder's marker names the store; only a trusted
	// folder is ever uploaded from or drives server deletes.
	Marker MarkerState
	// Files are the regular files at valid memory paths (the marker
	// excluded), by memory path.
	Files map[string]LocalFile
	// Obscured are entries at valid memory paths that the scan could not
	// see as files: symlinks, FIFOs and devices, files that could not be
	// hashed, folders that could not be read. Every memory at or under one
	// is left alone on both sides: without this, a folder the scan cannot
	// read would look like its files were deleted.
	Obscured map[string]error
	// Ignored are entries that cannot be memories (names that are not
	// valid memory paths, temporary files of interrupted writes); reported
	// so the caller can log them.
	Ignored []confined.Skipped
	// Rehashed is how many files this scan had to read; the others' digests
	// came from the hash cache.
	Rehashed int
}

// empty reports whether the scan found nothing at all besides the marker.
func (l Local) empty() bool {
	return len(l.Files) == 0 && len(l.Obscured) == 0 && len(l.Ignored) == 0
}

// Scan walks the store folder at root and returns what [Reconcile] needs,
// hashing only the files whose stat changed since cache last saw them. A
// folder that no longer exists scans as empty with a missing marker, which
// Reconcile turns into a rebuild. An error means the folder could not be
// scanned at all (for instance it was replaced by a symlink) and nothing
// should be synced this time.
func Scan(root *confined.Root, cache *confined.HashCache, memoryStoreID string) (Local, error) {
	local := Local{Files: map[string]LocalFile{}, Obscured: map[string]error{}}
	entries, skipped, err := root.Walk()
	if errors.Is(err, fs.ErrNotExist) {
		cache.Retain(func(string) bool { return false })
		return local, nil
	}
	if err != nil {
		return Local{}, fmt.Errorf("scan the folder of memory store %s: %w", memoryStoreID, err)
	}
	readsBefore := cache.Reads()
	for _, e := range entries {
		if e.Path == MarkerName {
			continue
		}
		p := "/" + e.Path
		if err := validate.Path("path", p); err != nil {
			local.Ignored = append(local.Ignored, confined.Skipped{Path: e.Path, Err: fmt.Errorf("not a valid memory path: %w", err)})
			continue
		}
		d, err := cache.Sum(root, e.Path, e.Info)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the walk: it is simply gone
		}
		if err != nil {
			local.Obscured[p] = err
			continue
		}
		f := LocalFile{SHA256: d.SHA256}
		switch {
		case d.Size > api.MaxContentBytes:
			f.Unsyncable = TooLarge
		case !d.UTF8:
			f.Unsyncable = NotUTF8
		}
		local.Files[p] = f
	}
	// The files hashed are exactly those in local.Files.
	cache.Retain(func(rel string) bool { _, ok := local.Files["/"+rel]; return ok })
	local.Rehashed = cache.Reads() - readsBefore

	for _, s := range skipped {
		p := "/" + s.Path
		switch {
		case s.Path == MarkerName:
			// A marker that is not a regular file is simply not trusted.
		case errors.Is(s.Err, confined.ErrBadName), errors.Is(s.Err, confined.ErrTempFile):
			local.Ignored = append(local.Ignored, s)
		case validate.Path("path", p) != nil:
			local.Ignored = append(local.Ignored, s)
		default:
			local.Obscured[p] = s.Err
		}
	}

	local.Marker = readMarker(root, memoryStoreID)
	return local, nil
}
