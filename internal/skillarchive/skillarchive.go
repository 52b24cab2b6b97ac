// Package skillarchive reads the archive a Skills API serves for a skill
// version (GET /v1/skills/{id}/versions/{v}/content) into the files a
// worker puts in a session's skills/<name>/ folder.
//
// The archive comes over the network from a server the worker trusts only
// so far: a misbehaving or compromised one must not make the worker write
// anywhere but the skill's folder. So the whole archive is checked before
// a single file is returned, and any member that could land elsewhere or
// be more than a plain file refuses the archive outright, rather than
// being skipped: a member that absolute, climbing (".."), a link, a device,
// a second copy of a path, or a file where another member needs a folder.
// Skipping would hand the agent a skill with pieces silently missing.
//
// memstore serves a zip; Anthropic's API may answer a tar (plain, gzip or
// bzip2). Both wrap the files in one top-level folder named after the
// skill, which is stripped.
package skillarchive

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits bound what one archive may unpack to.
type Limits struct {
	Files int
	Bytes int64
}

// DefaultLimits are far above what a skill holds (memstore accepts 500
// files and 8 MiB per version), low enough that an archive bomb cannot
// fill the worker's disk or memory.
var DefaultLimits = Limits{Files: 5000, Bytes: 64 << 20}

// ErrRefused wraps every reason an archive is refused.
var ErrRefused = errors.New("skill archive refused")

// File is one file of a skill: its path inside the skill's folder
// ("SKILL.md", "scripts/run.py"), whether it is executable, its bytes.
type File struct {
	Path       string
	Executable bool
	Content    []byte
}

// member is an archive entry before the wrapper folder is stripped.
type member struct {
	name string // cleaned, slash-separated, no trailing slash
	dir  bool
	file File
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Read checks the archive held in r (size bytes) and returns its files,
// sorted by path, relative to the one folder that wraps them all (or to
// the archive's root when there is no single wrapper). It refuses (with
// an error wrapping ErrRefused) an archive with any member that is not a
// plain file or folder, whose name is absolute, climbs out, is not clean
// UTF-8 or repeats another's, or that goes over lim.
func Read(r io.ReaderAt, size int64, lim Limits) ([]File, error) {
	var head [4]byte
	n, _ := r.ReadAt(head[:], 0)
	var (
		members []member
		err     error
	)
	if n == 4 && (bytes.Equal(head[:], []byte("PK\x03\x04")) || bytes.Equal(head[:], []byte("PK\x05\x06"))) {
		members, err = readZip(r, size, lim)
	} else {
		members, err = readTar(io.NewSectionReader(r, 0, size), lim)
	}
	if err != nil {
		return nil, err
	}
	return unwrap(members)
}

func readZip(r io.ReaderAt, size int64, lim Limits) ([]member, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, refuse("not a readable zip: %v", err)
	}
	var (
		out   []member
		total int64
		files int
	)
	for _, f := range zr.File {
		mode := f.Mode()
		isDir := strings.HasSuffix(f.Name, "/") || mode.IsDir()
		if !isDir && !mode.IsRegular() {
			return nil, refuse("member %q is a %s, not a plain file or folder", f.Name, typeName(mode))
		}
		name, err := cleanName(f.Name)
		if err != nil {
			return nil, err
		}
		m := member{name: name, dir: isDir}
		if !isDir {
			if files++; files > lim.Files {
				return nil, refuse("more than %d files", lim.Files)
			}
			rc, err := f.Open()
			if err != nil {
				return nil, refuse("member %q cannot be read: %v", f.Name, err)
			}
			content, err := readCapped(rc, &total, lim.Bytes)
			rc.Close()
			if err != nil {
				return nil, refuse("member %q: %v", f.Name, err)
			}
			m.file = File{Executable: mode&0o111 != 0, Content: content}
		}
		out = append(out, m)
	}
	return out, nil
}

func readTar(r io.Reader, lim Limits) ([]member, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(3)
	var src io.Reader = br
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, refuse("not a readable gzip: %v", err)
		}
		defer gz.Close()
		src = gz
	case len(head) == 3 && string(head) == "BZh":
		src = bzip2.NewReader(br)
	}
	tr := tar.NewReader(src)
	var (
		out   []member
		total int64
		files int
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, refuse("neither a zip nor a readable tar: %v", err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		case tar.TypeXGlobalHeader:
			continue // archive-wide metadata, no member
		default:
			return nil, refuse("member %q is a %s, not a plain file or folder", hdr.Name, typeName(hdr.FileInfo().Mode()))
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return nil, err
		}
		m := member{name: name, dir: hdr.Typeflag == tar.TypeDir}
		if !m.dir {
			if files++; files > lim.Files {
				return nil, refuse("more than %d files", lim.Files)
			}
			content, err := readCapped(tr, &total, lim.Bytes)
			if err != nil {
				return nil, refuse("member %q: %v", hdr.Name, err)
			}
			m.file = File{Executable: hdr.Mode&0o111 != 0, Content: content}
		}
		out = append(out, m)
	}
	return out, nil
}

// readCapped reads r whole, adding its size to *total, and fails once
// *total passes max (a member's declared size is not trusted).
func readCapped(r io.Reader, total *int64, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max-*total+1))
	if err != nil {
		return nil, err
	}
	*total += int64(len(b))
	if *total > max {
		return nil, fmt.Errorf("the files unpack to more than %d bytes", max)
	}
	return b, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsRegular():
		return "hard link or special file"
	}
	return "special file"
}

// cleanName checks a member's name and returns it without a trailing
// slash (folders) or a leading "./" (tar -C dir . makes those). Anything
// else that is not already clean is refused, never normalised: a name
// that needs cleaning did not come from a well-behaved server.
func cleanName(name string) (string, error) {
	bad := func(why string) (string, error) { return "", refuse("member %q %s", name, why) }
	n := strings.TrimPrefix(name, "./")
	n = strings.TrimSuffix(n, "/")
	switch {
	case n == "" || n == ".":
		return bad("has no name")
	case !utf8.ValidString(n) || strings.ContainsAny(n, "\x00\\"):
		return bad("holds a backslash, a NUL or invalid UTF-8")
	case strings.HasPrefix(n, "/"):
		return bad("is an absolute path")
	}
	for seg := range strings.SplitSeq(n, "/") {
		switch seg {
		case "..":
			return bad("climbs out of the skill's folder")
		case "", ".":
			return bad("is not a clean path (empty or . segments)")
		}
	}
	return n, nil
}

// unwrap strips the one folder every member is in (when there is one),
// and refuses duplicates and a file where another member needs a folder.
func unwrap(members []member) ([]File, error) {
	top := ""
	for i, m := range members {
		first, _, _ := strings.Cut(m.name, "/")
		if i == 0 {
			top = first
		}
		if first != top || (m.name == first && !m.dir) {
			top = ""
			break
		}
	}
	seen := map[string]bool{} // path -> is a folder
	var files []File
	for _, m := range members {
		name := m.name
		if top != "" {
			if name == top {
				continue
			}
			name = strings.TrimPrefix(name, top+"/")
		}
		if isDir, ok := seen[name]; ok && !(isDir && m.dir) {
			return nil, refuse("%q appears twice", name)
		}
		seen[name] = m.dir
		if !m.dir {
			m.file.Path = name
			files = append(files, m.file)
		}
	}
	// A file whose path is another member's folder would make the two
	// collide on disk, one replacing the other.
	for _, f := range files {
		for dir := f.Path; ; {
			i := strings.LastIndexByte(dir, '/')
			if i < 0 {
				break
			}
			dir = dir[:i]
			if isDir, ok := seen[dir]; ok && !isDir {
				return nil, refuse("%q is a file, but %q needs it to be a folder", dir, f.Path)
			}
		}
	}
	if len(files) == 0 {
		return nil, refuse("it holds no files")
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}
