// Package storearchive reads and writes a memory store as an archive of
// its files (.tar.gz or .zip), the shape people keep and move notes in.
// Each memory /a/b.md is the entry a/b.md. The console and `memstore store
// export|import` share it, so a file exported by one imports with the
// other.
package storearchive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Formats.
const (
	TarGz = "tar.gz"
	Zip   = "zip"
)

// FormatOf names the format of a file by its name's ending; "" when it is
// not an archive (then the file is one memory).
func FormatOf(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return TarGz
	case strings.HasSuffix(n, ".zip"):
		return Zip
	}
	return ""
}

// File is one memory in an archive: its memory path and its bytes (not
// yet checked to be valid UTF-8: the importer refuses what the API would).
type File struct {
	Path    string
	Content []byte
}

// Skipped is an entry of an archive that cannot be a memory, and why.
type Skipped struct {
	Name   string
	Reason string
}

// Read reads every regular file of an archive of the given format, each at
// most maxFile bytes, at most maxTotal bytes in all. Folders are implied by
// paths; links and other special entries are skipped with a reason.
func Read(format string, data []byte, maxFile, maxTotal int64) ([]File, []Skipped, error) {
	var (
		files   []File
		skipped []Skipped
		total   int64
	)
	add := func(name string, size int64, open func() (io.Reader, error)) error {
		if size > maxFile {
			skipped = append(skipped, Skipped{name, fmt.Sprintf("is %d bytes; a memory holds at most %d", size, maxFile)})
			return nil
		}
		if total += size; total > maxTotal {
			return fmt.Errorf("the archive unpacks to more than %d bytes; split it", maxTotal)
		}
		r, err := open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(r, maxFile+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		files = append(files, File{Path: "/" + strings.TrimPrefix(name, "./"), Content: b})
		return nil
	}
	switch format {
	case TarGz:
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, nil, fmt.Errorf("not a gzip file: %w", err)
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("not a readable tar archive: %w", err)
			}
			switch h.Typeflag {
			case tar.TypeDir:
				continue
			case tar.TypeReg:
				if err := add(h.Name, h.Size, func() (io.Reader, error) { return tr, nil }); err != nil {
					return nil, nil, err
				}
			default:
				skipped = append(skipped, Skipped{h.Name, "is not a regular file (a link or a device); only files become memories"})
			}
		}
	case Zip:
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, nil, fmt.Errorf("not a readable zip archive: %w", err)
		}
		for _, f := range zr.File {
			switch {
			case f.FileInfo().IsDir():
				continue
			case !f.Mode().IsRegular():
				skipped = append(skipped, Skipped{f.Name, "is not a regular file (a link or a device); only files become memories"})
			default:
				if err := add(f.Name, int64(f.UncompressedSize64), func() (io.Reader, error) { return f.Open() }); err != nil {
					return nil, nil, err
				}
			}
		}
	default:
		return nil, nil, fmt.Errorf("unknown archive format %q; use .tar.gz, .tgz or .zip", format)
	}
	return files, skipped, nil
}

// Writer writes memories into an archive.
type Writer struct {
	tw  *tar.Writer
	gz  *gzip.Writer
	zw  *zip.Writer
	now time.Time
}

// NewWriter starts an archive of format on w; modTime stamps its entries.
func NewWriter(w io.Writer, format string, modTime time.Time) (*Writer, error) {
	switch format {
	case TarGz:
		gz := gzip.NewWriter(w)
		return &Writer{gz: gz, tw: tar.NewWriter(gz), now: modTime}, nil
	case Zip:
		return &Writer{zw: zip.NewWriter(w), now: modTime}, nil
	}
	return nil, fmt.Errorf("unknown archive format %q; use tar.gz or zip", format)
}

// Add writes the memory at path with content.
func (a *Writer) Add(path, content string) error {
	name := strings.TrimPrefix(path, "/")
	if a.tw != nil {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: a.now, Typeflag: tar.TypeReg}
		if err := a.tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.WriteString(a.tw, content)
		return err
	}
	f, err := a.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: a.now})
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, content)
	return err
}

// Close finishes the archive (it does not close the underlying writer).
func (a *Writer) Close() error {
	if a.tw != nil {
		if err := a.tw.Close(); err != nil {
			return err
		}
		return a.gz.Close()
	}
	return a.zw.Close()
}

// What an import does with one file.
const (
	Create = "create"
	Change = "change"
	Same   = "same"
	Refuse = "refuse"
)

// Existing is a memory already in the store an import goes into.
type Existing struct {
	ID     string
	SHA256 string
}

// Step is what an import does with one file, and why. For Change, Memory
// is the memory it replaces, at the state the plan saw.
type Step struct {
	Path    string
	Action  string
	Reason  string
	Content string
	Memory  Existing
}

// Plan decides each file's fate against the store's memories by path:
// created when the path is free, changed when it holds other text, left
// alone when it holds the same, refused when check (the API's validators)
// refuses it or the path comes twice. Steps are in path order.
func Plan(files []File, existing map[string]Existing, check func(path, content string) error) []Step {
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	var steps []Step
	seen := map[string]bool{}
	for _, f := range files {
		st := Step{Path: f.Path, Content: string(f.Content)}
		switch {
		case seen[f.Path]:
			st.Action, st.Reason = Refuse, "appears twice in the upload; only the first is imported"
		case !utf8.Valid(f.Content):
			st.Action, st.Reason = Refuse, "is not UTF-8 text; memories hold text only"
		default:
			if err := check(f.Path, st.Content); err != nil {
				st.Action, st.Reason = Refuse, err.Error()
				break
			}
			m, ok := existing[f.Path]
			sum := sha256.Sum256(f.Content)
			switch {
			case !ok:
				st.Action = Create
			case m.SHA256 == hex.EncodeToString(sum[:]):
				st.Action, st.Reason = Same, "already holds this text"
			default:
				st.Action, st.Memory = Change, m
			}
		}
		seen[f.Path] = true
		steps = append(steps, st)
	}
	return steps
}
