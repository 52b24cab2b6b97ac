package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// sseFrame is one dispatched Server-Sent Events frame.
type sseFrame struct {
	Event string // the event: field, "" when absent
	Data  string // data: lines joined with "\n"
	ID    string // the last id: seen so far in the stream (it persists across frames)
}

// maxSSELine bounds one line of the stream. An event carries a whole memory
// (100 KiB, up to six bytes per byte once JSON-escaped) or a tool result,
// so lines are long, but an endless line from a broken server must not
// exhaust memory.
const maxSSELine = 16 << 20

// sseReader decodes a text/event-stream as the WHATWG HTML specification
// describes it: lines end in LF, CRLF or CR; a blank line dispatches the
// frame; "field: value" with one optional space after the colon; lines
// starting with ":" are comments (keep-alives); data lines accumulate; an
// id persists until changed; a frame left unterminated at EOF is dropped,
// as it may be cut short.
type sseReader struct {
	sc    *bufio.Scanner
	max   int
	id    string
	retry time.Duration
	first bool
}

// newSSEReader reads frames from r, refusing lines longer than maxLine.
func newSSEReader(r io.Reader, maxLine int) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxLine)), maxLine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, max: maxLine, first: true}
}

// next returns the next frame that has data, skipping frames that only set
// an id or a retry hint. It returns io.EOF at the end of the stream.
func (r *sseReader) next() (sseFrame, error) {
	var (
		event   string
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if r.first {
			line = strings.TrimPrefix(line, "\uFEFF")
			r.first = false
		}
		if line == "" {
			if hasData {
				return sseFrame{Event: event, Data: data.String(), ID: r.id}, nil
			}
			event = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			// An id containing NUL is ignored by the specification, so that
			// a reconnect never sends a header that cannot be a header.
			if !strings.ContainsRune(value, 0) {
				r.id = value
			}
		case "retry":
			if ms, err := strconv.ParseUint(value, 10, 32); err == nil {
				r.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseFrame{}, fmt.Errorf("event stream line exceeds %d bytes", r.max)
		}
		return sseFrame{}, err
	}
	return sseFrame{}, io.EOF
}

// scanSSELines splits on LF, CRLF or a lone CR. A CR at the end of the
// buffer waits for one more byte (unless at EOF) to tell CRLF from CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
