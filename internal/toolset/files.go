package toolset

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"
	"syscall"
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
	defer o.root.Close()
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

// openRegular opens the checked target for reading and returns its size. The
// open does not block (a FIFO swapped in would otherwise hang the call) and
// the opened file must be a regular file.
func (o *opened) openRegular(name string) (*os.File, int64, error) {
	if o.info == nil {
		return nil, 0, fmt.Errorf("%s: no such file or directory", name)
	}
	if o.info.IsDir() {
		return nil, 0, fmt.Errorf("%s is a directory", name)
	}
	if !o.info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	if cr, err := o.confined(); err != nil {
		return nil, 0, err
	} else if cr != nil {
		f, st, err := cr.Open(o.rel)
		if err != nil {
			return nil, 0, confinedErr(name, err)
		}
		return f, st.Size, nil
	}
	f, err := o.root.OpenFile(o.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s", name, fsErr(err))
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || !os.SameFile(info, o.info) {
		f.Close()
		return nil, 0, fmt.Errorf("%s changed while it was being opened; try again", name)
	}
	return f, info.Size(), nil
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
	defer o.root.Close()
	if o.info != nil && !o.info.Mode().IsRegular() {
		if o.info.IsDir() {
			return failf("write: %s is a directory", in.FilePath)
		}
		return failf("write: %s is not a regular file", in.FilePath)
	}
	if err := o.replace(in.FilePath, []byte(*in.Content)); err != nil {
		return failf("write: %v", err)
	}
	return okf("wrote %d bytes to %s", len(*in.Content), in.FilePath)
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
	defer o.root.Close()
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
	return okf("edited %s (%d replacement(s))", in.FilePath, count)
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

// replace writes data to the target atomically: a temporary file in the same
// folder, synced, then renamed over the target, so a reader — the memory sync
// above all — sees the old content or the new, never half of it. Missing
// parent folders are created 0700; a new file is 0600 and an existing one
// keeps its mode.
func (o *opened) replace(name string, data []byte) error {
	if o.rel == "." {
		return fmt.Errorf("%s is a directory", name)
	}
	if cr, err := o.confined(); err != nil {
		return err
	} else if cr != nil {
		// A memory file: confined creates the folders and writes (0600)
		// without following a link anywhere, and is the one writer the
		// memory sync trusts.
		if err := cr.WriteFile(o.rel, data, confined.Precondition{}); err != nil {
			return confinedErr(name, err)
		}
		return nil
	}
	dir := path.Dir(o.rel)
	if err := o.root.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: cannot create its folder: %s", name, fsErr(err))
	}
	// MkdirAll would have followed a link created since open checked the
	// path; check again now that the folders exist.
	if _, err := o.inspect(dir); err != nil {
		return err
	}
	mode := fs.FileMode(0o600)
	if o.info != nil {
		mode = o.info.Mode().Perm()
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	// The memory sync skips names with confined's temporary prefix, so a
	// temporary file left by a crash is never uploaded as a memory.
	tmp := path.Join(dir, confined.TempPrefix+hex.EncodeToString(nonce[:]))
	f, err := o.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %s", name, fsErr(err))
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.root.Rename(tmp, o.rel)
	}
	if err != nil {
		_ = o.root.Remove(tmp)
		return fmt.Errorf("%s: %s", name, fsErr(err))
	}
	return nil
}
