package console

import (
	"bufio"
	"context"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/memstore/memstore/internal/storearchive"
)

// Import previews are staged on disk, not held in memory: an upload of
// 96 KB can unpack to 64 MiB, and 20 of them took the server to 1.3 GiB
// (issue 25). Memory holds only an index; each person has a quota of
// previews and bytes, and a preview not applied within importPreviewTTL is
// gone. Unpacking and planning, the part that does need memory, runs for
// one upload at a time.
const (
	importPreviewTTL        = time.Hour
	maxPreviewsPerUser      = 4
	maxPreviewBytesPerUser  = 256 << 20
	stagedPreviewFilePrefix = "preview-"
)

// pendingImport is a preview: what applying it will do, for whom.
type pendingImport struct {
	storeID, userID string
	steps           []storearchive.Step
}

// importStaging indexes the previews staged in dir.
type importStaging struct {
	dir string
	// unpack admits one upload at a time to the unpacking and planning.
	unpack chan struct{}
	mu     sync.Mutex
	byID   map[string]stagedPreview
}

type stagedPreview struct {
	storeID, userID, file string
	size                  int64
	staged                time.Time
}

// newImportStaging stages previews in dir ("" is the system's temporary
// folder). Previews do not outlive the process, so files a previous one
// left in dir are removed.
func newImportStaging(dir string) (*importStaging, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("console: create the import staging folder %s: %w", dir, err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, stagedPreviewFilePrefix+"*"))
		for _, f := range old {
			os.Remove(f)
		}
	}
	return &importStaging{dir: dir, unpack: make(chan struct{}, 1), byID: map[string]stagedPreview{}}, nil
}

// admit waits for the turn to unpack an upload; release ends it.
func (s *importStaging) admit(ctx context.Context) (release func(), err error) {
	select {
	case s.unpack <- struct{}{}:
		return func() { <-s.unpack }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put stages p under id. A person over their quota loses their oldest
// previews first; a single preview larger than the quota is refused.
func (s *importStaging) put(now time.Time, id string, p pendingImport) error {
	f, err := os.CreateTemp(s.dir, stagedPreviewFilePrefix+"*")
	if err != nil {
		return fmt.Errorf("stage the import preview: %w", err)
	}
	bw := bufio.NewWriter(f)
	enc := gob.NewEncoder(bw)
	err = enc.Encode(len(p.steps))
	for i := 0; err == nil && i < len(p.steps); i++ {
		err = enc.Encode(p.steps[i])
	}
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			size = fi.Size()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("stage the import preview: %w", err)
	}
	if size > maxPreviewBytesPerUser {
		os.Remove(f.Name())
		return badRequest("this upload's preview takes %d MiB, more than the %d MiB a person may have staged; split it into smaller uploads", size>>20, maxPreviewBytesPerUser>>20)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	var mine []string
	var bytes int64
	for pid, sp := range s.byID {
		if sp.userID == p.userID {
			mine = append(mine, pid)
			bytes += sp.size
		}
	}
	slices.SortFunc(mine, func(a, b string) int { return s.byID[a].staged.Compare(s.byID[b].staged) })
	for len(mine) > 0 && (len(mine) >= maxPreviewsPerUser || bytes+size > maxPreviewBytesPerUser) {
		bytes -= s.byID[mine[0]].size
		s.drop(mine[0])
		mine = mine[1:]
	}
	s.byID[id] = stagedPreview{storeID: p.storeID, userID: p.userID, file: f.Name(), size: size, staged: now}
	return nil
}

// take removes the preview id and returns it; false when there is none
// for this person and store (applied, replaced, expired or never made).
func (s *importStaging) take(now time.Time, id, storeID, userID string) (pendingImport, bool, error) {
	s.mu.Lock()
	s.expire(now)
	sp, ok := s.byID[id]
	if !ok || sp.storeID != storeID || sp.userID != userID {
		s.mu.Unlock()
		return pendingImport{}, false, nil
	}
	delete(s.byID, id)
	s.mu.Unlock()
	defer os.Remove(sp.file)
	f, err := os.Open(sp.file)
	if err != nil {
		return pendingImport{}, false, fmt.Errorf("read the staged import preview: %w", err)
	}
	defer f.Close()
	dec := gob.NewDecoder(bufio.NewReader(f))
	var n int
	err = dec.Decode(&n)
	p := pendingImport{storeID: sp.storeID, userID: sp.userID}
	for i := 0; err == nil && i < n; i++ {
		var st storearchive.Step
		if err = dec.Decode(&st); err == nil {
			p.steps = append(p.steps, st)
		}
	}
	if err != nil {
		return pendingImport{}, false, fmt.Errorf("read the staged import preview: %w", err)
	}
	return p, true, nil
}

// expire drops the previews older than importPreviewTTL; s.mu is held.
func (s *importStaging) expire(now time.Time) {
	for id, sp := range s.byID {
		if now.Sub(sp.staged) > importPreviewTTL {
			s.drop(id)
		}
	}
}

// drop removes one preview and its file; s.mu is held.
func (s *importStaging) drop(id string) {
	os.Remove(s.byID[id].file)
	delete(s.byID, id)
}
