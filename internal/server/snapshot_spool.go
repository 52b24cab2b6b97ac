package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// snapshotSpool stages a snapshot's framing on disk while the database's
// read transaction is open, and a sender copies it to the client as it
// grows. The transaction never waits for the client: a client that reads
// slowly, or not at all, holds a file handle rather than a read snapshot
// that keeps SQLite's WAL (or PostgreSQL's vacuum) from moving on (issue
// 25 grew a WAL from 4 MiB to 1.5 GiB in 75 s behind one stalled reader).
// And the client does not wait for the whole read: it writes the first
// memories to disk while the rest are read (a worker's mount of 500
// memories waited 130–230 ms for its first byte on a loaded host when the
// whole snapshot was staged before sending).
type snapshotSpool struct {
	f     *os.File
	bw    *bufio.Writer
	enc   *json.Encoder
	count int

	mu   sync.Mutex
	grew *sync.Cond
	// staged is how many bytes of f the sender may send; ended: no more
	// come (the end line is among them only if the read succeeded).
	staged int64
	ended  bool
	// abandoned: the sender failed (the client went away or stalled), so
	// the read may stop.
	abandoned bool
}

// spoolChunk is how much is staged before the sender is told: the first
// entry goes at once, then about this much at a time.
const spoolChunk = 32 << 10

// errSnapshotAbandoned ends the read of a snapshot nobody receives.
var errSnapshotAbandoned = errors.New("the client stopped receiving the snapshot")

// newSnapshotSpool opens an unnamed file in dir ("" is the system's
// temporary folder): it is removed at once and goes away with its handle.
func newSnapshotSpool(dir string) (*snapshotSpool, error) {
	f, err := os.CreateTemp(dir, "memstore-snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("stage the snapshot: %w (the server's spool folder must be writable and have room)", err)
	}
	os.Remove(f.Name())
	sp := &snapshotSpool{f: f}
	sp.grew = sync.NewCond(&sp.mu)
	sp.bw = bufio.NewWriterSize(stagedWriter{sp}, spoolChunk)
	sp.enc = json.NewEncoder(sp.bw)
	sp.enc.SetEscapeHTML(false)
	return sp, nil
}

// stagedWriter appends to the spool's file and lets the sender have it.
type stagedWriter struct{ sp *snapshotSpool }

func (w stagedWriter) Write(b []byte) (int, error) {
	n, err := w.sp.f.Write(b)
	w.sp.mu.Lock()
	w.sp.staged += int64(n)
	w.sp.mu.Unlock()
	w.sp.grew.Signal()
	return n, err
}

// add stages one memory: its entry line, then its content. The first is
// handed to the sender at once; it reports first so the caller starts one.
func (sp *snapshotSpool) add(m storage.MemoryRow) (first bool, err error) {
	if sp.isAbandoned() {
		return false, errSnapshotAbandoned
	}
	sp.count++
	if err := sp.enc.Encode(wireSnapshotEntry(m)); err != nil {
		return false, err
	}
	if _, err := sp.bw.WriteString(*m.Content); err != nil {
		return false, err
	}
	if sp.count == 1 {
		return true, sp.bw.Flush()
	}
	return false, nil
}

// end stages the end line when the read succeeded (err nil), and lets the
// sender finish with what is staged. After a failed read nothing more is
// staged: without the end line the client knows the stream is incomplete.
// It reports a failure to stage the end line; a second call does nothing.
func (sp *snapshotSpool) end(seq int64, err error) error {
	sp.mu.Lock()
	ended := sp.ended
	sp.mu.Unlock()
	if ended {
		return nil
	}
	var serr error
	if err == nil {
		serr = sp.enc.Encode(api.SnapshotEntry{Type: "end", Count: sp.count, Sequence: seq})
		if serr == nil {
			serr = sp.bw.Flush()
		}
	}
	sp.mu.Lock()
	sp.ended = true
	sp.mu.Unlock()
	sp.grew.Broadcast()
	return serr
}

func (sp *snapshotSpool) isAbandoned() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.abandoned
}

// sendTo copies what is staged to w as it comes, calling flush whenever it
// has caught up with the read, until the read has ended and all of it is
// sent. A failure to write abandons the read.
func (sp *snapshotSpool) sendTo(w io.Writer, flush func() error) error {
	buf := make([]byte, 64<<10)
	var off int64
	for {
		sp.mu.Lock()
		for sp.staged == off && !sp.ended {
			sp.grew.Wait()
		}
		staged, ended := sp.staged, sp.ended
		sp.mu.Unlock()
		for off < staged {
			n, err := sp.f.ReadAt(buf[:min(int64(len(buf)), staged-off)], off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return sp.abandon(werr)
				}
				off += int64(n)
			}
			if err != nil && off < staged {
				return sp.abandon(err)
			}
		}
		if err := flush(); err != nil {
			return sp.abandon(err)
		}
		if ended {
			return nil
		}
	}
}

func (sp *snapshotSpool) abandon(err error) error {
	sp.mu.Lock()
	sp.abandoned = true
	sp.mu.Unlock()
	return err
}

func (sp *snapshotSpool) Close() error { return sp.f.Close() }
