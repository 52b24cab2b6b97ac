//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package confined

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Digest is what hashing one file found.
type Digest struct {
	// SHA256 is the lowercase hex SHA-256 of the content — the same form as
	// a memory's content_sha256, so the two compare directly.
	SHA256 string
	// Size is the number of bytes hashed.
	Size int64
	// UTF8 reports whether the content is valid UTF-8; only such files can
	// be memories.
	UTF8 bool
}

// digest streams f through SHA-256 and a UTF-8 check, so a file of any size
// is hashed in constant memory.
func digest(f *os.File) (Digest, error) {
	h := sha256.New()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var size int64
	pending := 0 // bytes of an incomplete rune carried to the next read
	valid := true
	for {
		n, err := f.Read(buf[pending:])
		if n > 0 {
			h.Write(buf[pending : pending+n])
			size += int64(n)
			data := buf[:pending+n]
			cut := completeRunes(data)
			valid = valid && utf8.Valid(data[:cut])
			pending = copy(buf, data[cut:])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Digest{}, err
		}
	}
	return Digest{SHA256: hex.EncodeToString(h.Sum(nil)), Size: size, UTF8: valid && pending == 0}, nil
}

// readBufs are digest's read buffers: a scan hashes a folder's files one
// after the other, and a buffer of its own for each made garbage of 32 KB
// a file — 64 MB for a first scan of 2,000 files — which the collector
// then ran after.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// completeRunes returns the length of the longest prefix of p that does not
// end inside a rune which the next read might complete.
func completeRunes(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}

// hashFile hashes the regular file at rel. It also returns the file's stat
// from before the read and whether the stat was unchanged after it: only a
// stable read may be cached, since a write during the read can mix old and
// new bytes.
func (r *Root) hashFile(rel string) (Digest, FileInfo, bool, error) {
	const op = "hash"
	segs, err := split(rel)
	if err != nil {
		return Digest{}, FileInfo{}, false, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	c, err := r.walkTo(op, rel, segs[:len(segs)-1], false)
	if err != nil {
		return Digest{}, FileInfo{}, false, err
	}
	defer c.close()
	f, st, err := openRegular(c.dir(), segs[len(segs)-1], r.hardLinksOK)
	if err != nil {
		return Digest{}, FileInfo{}, false, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	defer f.Close()
	before := fileInfo(&st)
	d, err := digest(f)
	if err != nil {
		return Digest{}, FileInfo{}, false, &fs.PathError{Op: op, Path: rel, Err: err}
	}
	var after unix.Stat_t
	err = unix.Fstat(int(f.Fd()), &after)
	stable := err == nil && fileInfo(&after).identity() == before.identity() && d.Size == before.Size
	return d, before, stable, nil
}

// racyWindow is how long after a file's last change its hash is not cached.
// Filesystem timestamps are coarse (a few milliseconds on ext4, a second on
// HFS+, two on FAT), so a second write landing in the same tick as the first
// leaves size, mtime, ctime and inode all unchanged; a hash taken that soon
// after a change could be stale by the next scan. Re-hashing such young files
// costs little, and a store's files are small.
const racyWindow = 2 * time.Second

// HashCache remembers each file's digest together with the stat it had, and
// hashes a file again only when its size, mtime, ctime, inode or device
// changed — a scan of an unchanged folder then reads no file content at all.
// Safe for concurrent use.
type HashCache struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]cached
	reads   int
}

// cached is one file's entry: the digest kept as its 32 bytes, not the
// 64-character hex form (a cache holds an entry for every file of a
// folder, and a worker a cache for every folder it serves); Sum spells it
// out again. The size is the identity's: only a stable read is cached.
type cached struct {
	id   identity
	sum  [sha256.Size]byte
	utf8 bool
}

func (e cached) digest() Digest {
	return Digest{SHA256: hex.EncodeToString(e.sum[:]), Size: e.id.size, UTF8: e.utf8}
}

// NewHashCache returns an empty cache. now is the clock used to tell a file
// changed too recently to cache (see the package's racy-window rule); nil
// means time.Now.
func NewHashCache(now func() time.Time) *HashCache {
	if now == nil {
		now = time.Now
	}
	return &HashCache{now: now, entries: map[string]cached{}}
}

// Sum returns the digest of the regular file at rel in root, whose stat (as
// [Root.Walk] reported it) is info. The file is read only when info differs
// from the stat it had when last hashed. An error matching fs.ErrNotExist
// means the file went away after the walk.
func (c *HashCache) Sum(root *Root, rel string, info FileInfo) (Digest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[rel]; ok && e.id == info.identity() {
		return e.digest(), nil
	}
	d, before, stable, err := root.hashFile(rel)
	c.reads++
	if err != nil {
		delete(c.entries, rel)
		return Digest{}, err
	}
	changed := before.ModTime
	if before.ChangeTime.After(changed) {
		changed = before.ChangeTime
	}
	if e := (cached{id: before.identity(), utf8: d.UTF8}); stable && c.now().Sub(changed) >= racyWindow && hexDecode(e.sum[:], d.SHA256) {
		c.entries[rel] = e
	} else {
		delete(c.entries, rel)
	}
	return d, nil
}

// Reads returns how many files the cache has read since it was made: a scan
// can log how many files it actually had to hash.
func (c *HashCache) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// Retain forgets every entry whose path keep rejects, so files deleted from
// the folder do not linger in memory.
func (c *HashCache) Retain(keep func(rel string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for rel := range c.entries {
		if !keep(rel) {
			delete(c.entries, rel)
		}
	}
}

// hexDecode decodes the hex digest s into dst, reporting whether it fit.
func hexDecode(dst []byte, s string) bool {
	n, err := hex.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}
