package toolset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/memstore/memstore/internal/confined"

	"github.com/memstore/memstore/internal/validate"
)

// markerName is the file that binds a memory folder to its store (SPEC §5).
// write and edit refuse it: an agent that rewrote it would silently stop the
// folder from syncing.
const markerName = validate.MarkerName

type readInput struct {
	FilePath  string  `json:"file_path"`
	ViewRange []int64 `json:"view_range"`
}

// read returns a UTF-8 file's text as is — no line numbers, the way the SDK
// returns it — or, with view_range [start, end] (1-based, inclusive; an end
// of 0 or less means the end of the file), those lines joined by "\n".
func (t *Toolset) read(input json.RawMessage) Result {
	var in readInput
	if res, ok := decode("read", input, &in, `{"file_path": string, "view_range"?: [start_line, end_line]}`); !ok {
		return res
	}
	if in.FilePath == "" {
		return failf("read: file_path is required")
	}
	if len(in.ViewRange) != 0 && len(in.ViewRange) != 2 {
		return failf("read: view_range must be [start_line, end_line]")
	}
	o, err := t.open(in.FilePath)
	if err != nil {
		return failf("read: %v", err)
	}
	f, size, err := o.openRegular(in.FilePath)
	if err != nil {
		return failf("read: %v", err)
	}
	defer f.Close()

	limit := t.cfg.MaxReadBytes
	if len(in.ViewRange) == 2 {
		text, err := readLines(f, in.FilePath, in.ViewRange[0], in.ViewRange[1], limit)
		if err != nil {
			return failf("read: %v", err)
		}
		return Result{Content: text}
	}
	if size > limit {
		return failf("read: %s is %d bytes, exceeds %d-byte limit. Use the view_range parameter to read specific line ranges, e.g. view_range: [1, 500].", in.FilePath, size, limit)
	}
	data, err := readAtMost(f, limit)
	if err != nil {
		return failf("read: %v", fileErr(in.FilePath, err, limit))
	}
	if !utf8.Valid(data) {
		return failf("read: %s is not UTF-8 text; use bash to inspect binary files", in.FilePath)
	}
	return Result{Content: string(data)}
}

// errTooBig is readAtMost's answer for a file that grew past the cap after
// it was measured (or lied about its size, as /proc files do).
var errTooBig = errors.New("file is larger than the size limit")

func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooBig
	}
	return data, nil
}

func fileErr(name string, err error, limit int64) error {
	if errors.Is(err, errTooBig) {
		return fmt.Errorf("%s grew past the %d-byte limit while it was being read", name, limit)
	}
	return fmt.Errorf("%s: %s", name, fsErr(err))
}

// readLines streams the file and returns lines [start, end] joined by "\n",
// so a file too large to load can still be read a slice at a time. Only the
// selected lines count against limit. A start past the end of the file, or an
// end before start, selects nothing.
func readLines(r io.Reader, name string, start, end, limit int64) (string, error) {
	first := max(start, 1)
	last := end
	if last <= 0 {
		last = math.MaxInt64
	}
	if last < first {
		return "", nil
	}
	br := bufio.NewReaderSize(r, 64*1024)
	var out bytes.Buffer
	for line := int64(1); line <= last; line++ {
		selected := line >= first
		if selected && line > first {
			out.WriteByte('\n')
		}
		// Read one line in chunks, so a huge line is never held whole unless
		// it is selected, and then only up to the limit.
		eof := false
		for {
			chunk, err := br.ReadSlice('\n')
			body := bytes.TrimSuffix(chunk, []byte("\n"))
			if selected {
				out.Write(body)
				if int64(out.Len()) > limit {
					if first == last {
						return "", fmt.Errorf("line %d of %s alone exceeds the %d-byte limit; the read tool cannot return part of a line", first, name, limit)
					}
					return "", fmt.Errorf("view_range [%d, %d] of %s exceeds the %d-byte limit; narrow the view_range", start, end, name, limit)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return "", fmt.Errorf("%s: %s", name, fsErr(err))
			}
			break
		}
		if eof {
			break
		}
	}
	if !utf8.Valid(out.Bytes()) {
		return "", fmt.Errorf("%s is not UTF-8 text; use bash to inspect binary files", name)
	}
	return out.String(), nil
}

// openRegular opens the checked target for reading and returns its size.
// Package confined opens it without following a link, without blocking on
// a FIFO swapped in, and only if it is a regular file; a file replaced
// since the check is refused.
func (o *opened) openRegular(name string) (*os.File, int64, error) {
	if o.info == nil {
		return nil, 0, fmt.Errorf("%s: no such file or directory", name)
	}
	if o.info.Mode.IsDir() {
		return nil, 0, fmt.Errorf("%s is a directory", name)
	}
	if !o.info.Mode.IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	f, st, err := o.root.Open(o.rel)
	if err != nil {
		return nil, 0, confinedErr(name, err)
	}
	if st.Inode != o.info.Inode || st.Device != o.info.Device {
		f.Close()
		return nil, 0, fmt.Errorf("%s changed while it was being opened; try again", name)
	}
	return f, st.Size, nil
}

type writeInput struct {
	FilePath string  `json:"file_path"`
	Content  *string `json:"content"`
}

// write replaces (or creates) a whole file, creating missing parent folders.
func (t *Toolset) write(input json.RawMessage) Result {
	var in writeInput
	if res, ok := decode("write", input, &in, `{"file_path": string, "content": string}`); !ok {
		return res
	}
	if in.FilePath == "" {
		return failf("write: file_path is required")
	}
	if in.Content == nil {
		return failf("write: content is required (use \"\" for an empty file)")
	}
	o, err := t.openWritable(in.FilePath)
	if err != nil {
		return failf("write: %v", err)
	}
	if o.info != nil && !o.info.Mode.IsRegular() {
		if o.info.Mode.IsDir() {
			return failf("write: %s is a directory", in.FilePath)
		}
		return failf("write: %s is not a regular file", in.FilePath)
	}
	if err := o.replace(in.FilePath, []byte(*in.Content)); err != nil {
		return failf("write: %v", err)
	}
	res := okf("wrote %d bytes to %s", len(*in.Content), in.FilePath)
	res.Wrote = o.wroteMemory()
	return res
}

type editInput struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// edit replaces old_string with new_string. old_string must occur exactly
// once unless replace_all is set, because replacing the wrong one of several
// occurrences is a silent corruption the agent would not notice.
func (t *Toolset) edit(input json.RawMessage) Result {
	var in editInput
	if res, ok := decode("edit", input, &in, `{"file_path": string, "old_string": string, "new_string": string, "replace_all"?: boolean}`); !ok {
		return res
	}
	if in.FilePath == "" {
		return failf("edit: file_path is required")
	}
	if in.OldString == "" {
		return failf("edit: old_string is required")
	}
	o, err := t.openWritable(in.FilePath)
	if err != nil {
		return failf("edit: %v", err)
	}
	f, size, err := o.openRegular(in.FilePath)
	if err != nil {
		return failf("edit: %v", err)
	}
	defer f.Close()
	if size > t.cfg.MaxReadBytes {
		return failf("edit: %s is %d bytes, exceeds %d-byte limit. The edit tool loads the whole file and cannot modify a file this large.", in.FilePath, size, t.cfg.MaxReadBytes)
	}
	data, err := readAtMost(f, t.cfg.MaxReadBytes)
	if err != nil {
		return failf("edit: %v", fileErr(in.FilePath, err, t.cfg.MaxReadBytes))
	}
	content := string(data)
	count := strings.Count(content, in.OldString)
	switch {
	case count == 0:
		return failf("edit: old_string not found in %s", in.FilePath)
	case count > 1 && !in.ReplaceAll:
		return failf("edit: old_string appears %d times in %s (must be unique); add surrounding text to make it unique, or set replace_all", count, in.FilePath)
	}
	if err := o.replace(in.FilePath, []byte(strings.ReplaceAll(content, in.OldString, in.NewString))); err != nil {
		return failf("edit: %v", err)
	}
	res := okf("edited %s (%d replacement(s))", in.FilePath, count)
	res.Wrote = o.wroteMemory()
	return res
}

// wroteMemory is Result.Wrote for a successful write to the target: its
// advertised mount path when it is a memory store's file, else nothing.
func (o *opened) wroteMemory() []string {
	if o.area.mount == nil {
		return nil
	}
	return []string{path.Join(o.area.mount.Path, o.rel)}
}

// openWritable is open for write and edit: it also refuses read-only stores
// and the store marker, before anything is created.
func (t *Toolset) openWritable(p string) (*opened, error) {
	tg, err := t.resolve(p)
	if err != nil {
		return nil, err
	}
	if m := tg.area.mount; m != nil {
		if m.ReadOnly {
			return nil, fmt.Errorf("%s is in the read-only memory store mounted at %s; it cannot be modified", p, m.Path)
		}
		if tg.rel == markerName {
			return nil, fmt.Errorf("%s is the marker that binds %s to its memory store; it cannot be modified", p, m.Path)
		}
	}
	return t.open(p)
}

// replace writes data to the target atomically through package confined:
// a temporary file in the same folder, synced, then renamed over the
// target, so a reader — the memory sync above all — sees the old content
// or the new, never half of it, and no link on the way is followed.
// Missing parent folders are created 0700; a new file is 0600, and an
// existing one in the working directory keeps its mode (see area.open).
func (o *opened) replace(name string, data []byte) error {
	if o.rel == "." {
		return fmt.Errorf("%s is a directory", name)
	}
	if err := o.root.WriteFile(o.rel, data, confined.Precondition{}); err != nil {
		return confinedErr(name, err)
	}
	return nil
}
