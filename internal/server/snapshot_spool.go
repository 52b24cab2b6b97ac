package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/memstore/memstore/internal/storage"
)

// snapshotSpool stages a snapshot's framing on disk while the database's
// read transaction is open, so the transaction ends as soon as the rows
// are read: a client that reads slowly, or not at all, then holds a file
// handle rather than a read snapshot that keeps SQLite's WAL (or
// PostgreSQL's vacuum) from moving on. Issue 25 grew a WAL from 4 MiB to
// 1.5 GiB in 75 s behind one stalled reader.
type snapshotSpool struct {
	f     *os.File
	bw    *bufio.Writer
	enc   *json.Encoder
	count int
}

// newSnapshotSpool opens an unnamed file in dir ("" is the system's
// temporary folder): it is removed at once and goes away with its handle.
func newSnapshotSpool(dir string) (*snapshotSpool, error) {
	f, err := os.CreateTemp(dir, "memstore-snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("stage the snapshot: %w (the server's spool folder must be writable and have room)", err)
	}
	os.Remove(f.Name())
	sp := &snapshotSpool{f: f, bw: bufio.NewWriterSize(f, 64<<10)}
	sp.enc = json.NewEncoder(sp.bw)
	sp.enc.SetEscapeHTML(false)
	return sp, nil
}

// add stages one memory: its entry line, then its content.
func (sp *snapshotSpool) add(m storage.MemoryRow) error {
	sp.count++
	if err := sp.enc.Encode(wireSnapshotEntry(m)); err != nil {
		return err
	}
	_, err := sp.bw.WriteString(*m.Content)
	return err
}

// sendTo copies what was staged to w.
func (sp *snapshotSpool) sendTo(w io.Writer) error {
	if err := sp.bw.Flush(); err != nil {
		return err
	}
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, sp.f)
	return err
}

func (sp *snapshotSpool) Close() error { return sp.f.Close() }
