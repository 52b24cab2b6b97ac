package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/memstore/memstore/api"
)

// ListChangesParams shapes one change-feed request.
type ListChangesParams struct {
	// After is the cursor: the latest_sequence of a previous answer, or a
	// snapshot's sequence; 0 asks for every change.
	After int64
	// Wait makes the request a long poll: with nothing after the cursor,
	// the server answers at the store's next change or after Wait
	// (at most api.MaxChangesWait), whichever comes first.
	Wait time.Duration
	// Limit caps the changes per answer (0: the server's maximum).
	Limit int
}

// ListChanges reads a store's change feed, a memstore extension (SPEC §8):
// the changes after p.After, oldest first. A server without the extension
// (Anthropic's API) answers 404; a cursor the store did not issue is a 400
// invalid_request_error, after which a client starts over from a full
// listing.
func (c *Client) ListChanges(ctx context.Context, storeID string, p ListChangesParams) (*api.MemoryChangeList, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/changes", storeID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("after", strconv.FormatInt(p.After, 10))
	if p.Wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(p.Wait.Milliseconds(), 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	out := new(api.MemoryChangeList)
	return out, c.do(ctx, request{method: http.MethodGet, path: path, query: q, memory: true}, out)
}

// Snapshot opens a stream of every memory of a store under prefix ("" or
// "/" for all) with its content, a memstore extension (SPEC §8); read it
// with Next. A server without the extension answers 404. The stream lives
// as long as ctx; Close it when done.
func (c *Client) Snapshot(ctx context.Context, storeID, prefix string) (*SnapshotStream, error) {
	path, err := route("/v1/memory_stores/{memory_store_id}/snapshot", storeID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if prefix != "" && prefix != "/" {
		q.Set("path_prefix", prefix)
	}
	res, _, err := c.send(ctx, request{method: http.MethodGet, path: path, query: q, memory: true,
		header: http.Header{"Accept": {api.SnapshotContentType}}}, false)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != api.SnapshotContentType {
		res.Body.Close()
		return nil, fmt.Errorf("client: GET %s: expected a snapshot stream, got Content-Type %q; check that the base URL points at a memstore server", path, res.Header.Get("Content-Type"))
	}
	seq, err := strconv.ParseInt(res.Header.Get(api.SequenceHeader), 10, 64)
	if err != nil {
		res.Body.Close()
		return nil, fmt.Errorf("client: GET %s: the snapshot has no valid %s header (%q)", path, api.SequenceHeader, res.Header.Get(api.SequenceHeader))
	}
	return &SnapshotStream{Sequence: seq, body: res.Body, rd: bufio.NewReaderSize(res.Body, 64<<10)}, nil
}

// SnapshotStream reads a snapshot one memory at a time:
//
//	for { e, content, err := s.Next(); if err == io.EOF { break } … io.Copy(file, content) … }
//
// The content reader of an entry is valid until the next call of Next,
// which skips whatever of it was left unread.
type SnapshotStream struct {
	// Sequence is the change-feed sequence the snapshot is consistent at:
	// follow the feed from there.
	Sequence int64
	body     io.ReadCloser
	rd       *bufio.Reader
	content  *io.LimitedReader
	count    int
	done     bool
}

// ErrSnapshotCut reports a snapshot stream that ended before its end line:
// what was read is not the whole store.
var ErrSnapshotCut = errors.New("client: the snapshot stream ended early; read it again")

// Next returns the next memory's entry and its content, or io.EOF after
// the last one. Any other error means the snapshot is incomplete.
func (s *SnapshotStream) Next() (api.SnapshotEntry, io.Reader, error) {
	if s.done {
		return api.SnapshotEntry{}, nil, io.EOF
	}
	if s.content != nil {
		if _, err := io.Copy(io.Discard, s.content); err != nil {
			return api.SnapshotEntry{}, nil, s.cut(err)
		}
		if s.content.N > 0 {
			return api.SnapshotEntry{}, nil, s.cut(io.ErrUnexpectedEOF)
		}
		s.content = nil
	}
	line, err := s.rd.ReadBytes('\n')
	if err != nil {
		return api.SnapshotEntry{}, nil, s.cut(err)
	}
	var e api.SnapshotEntry
	if err := json.Unmarshal(line, &e); err != nil {
		return e, nil, s.cut(fmt.Errorf("decoding an entry: %w", err))
	}
	switch e.Type {
	case "end":
		s.done = true
		if e.Count != s.count || e.Sequence != s.Sequence {
			return e, nil, s.cut(fmt.Errorf("end line says %d memories at sequence %d, read %d at %d", e.Count, e.Sequence, s.count, s.Sequence))
		}
		return e, nil, io.EOF
	case "memory":
		if e.ContentSizeBytes < 0 || e.ContentSizeBytes > api.MaxContentBytes {
			return e, nil, s.cut(fmt.Errorf("entry %s has a content size of %d bytes", e.Path, e.ContentSizeBytes))
		}
		s.count++
		s.content = &io.LimitedReader{R: s.rd, N: e.ContentSizeBytes}
		return e, s.content, nil
	}
	return e, nil, s.cut(fmt.Errorf("unknown entry type %q", e.Type))
}

func (s *SnapshotStream) cut(err error) error {
	s.done = true
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", ErrSnapshotCut, err)
}

// Close releases the stream's connection.
func (s *SnapshotStream) Close() error { return s.body.Close() }
