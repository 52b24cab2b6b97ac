package skillarchive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

type entry struct {
	name    string
	mode    fs.FileMode
	content string
}

func zipOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name}
		h.SetMode(e.mode | 0o644)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.content))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarOf(t *testing.T, gz bool, headers ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, h := range headers {
		content := strings.Repeat("x", int(h.Size))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// small keeps the limit tests small.
var small = Limits{Files: 3, Bytes: 100}

func read(b []byte) ([]File, error) { return Read(bytes.NewReader(b), int64(len(b)), small) }

func TestReadStripsTheWrapperFolder(t *testing.T) {
	files, err := read(zipOf(t,
		entry{name: "pdf/"},
		entry{name: "pdf/SKILL.md", content: "instructions"},
		entry{name: "pdf/scripts/fill.py", mode: 0o755, content: "run"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "SKILL.md" || files[0].Executable || files[1].Path != "scripts/fill.py" || !files[1].Executable || string(files[1].Content) != "run" {
		t.Fatalf("files = %+v", files)
	}
	// A gzip tar from tar -C dir . reads the same.
	files, err = read(tarOf(t, true,
		&tar.Header{Name: "./pdf/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./pdf/SKILL.md", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3},
	))
	if err != nil || len(files) != 1 || files[0].Path != "SKILL.md" || string(files[0].Content) != "xxx" {
		t.Fatalf("tar.gz files = %+v, %v", files, err)
	}
}

// Every archive that could write outside the skill's folder, or hand over
// something other than plain files, is refused whole.
func TestReadRefusesHostileArchives(t *testing.T) {
	link := &tar.Header{Name: "pdf/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}
	hard := &tar.Header{Name: "pdf/hard", Typeflag: tar.TypeLink, Linkname: "pdf/SKILL.md"}
	dev := &tar.Header{Name: "pdf/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}
	skill := &tar.Header{Name: "pdf/SKILL.md", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}
	for _, tc := range []struct {
		name    string
		archive []byte
		why     string
	}{
		{"climbing", zipOf(t, entry{name: "pdf/SKILL.md"}, entry{name: "pdf/../../evil"}), "climbs out"},
		{"absolute", zipOf(t, entry{name: "/etc/cron.d/evil"}), "absolute"},
		{"backslash", zipOf(t, entry{name: `pdf\..\evil`}), "backslash"},
		{"empty segment", zipOf(t, entry{name: "pdf//evil"}), "not a clean path"},
		{"zip symlink", zipOf(t, entry{name: "pdf/SKILL.md"}, entry{name: "pdf/link", mode: fs.ModeSymlink, content: "/etc"}), "symbolic link"},
		{"tar symlink", tarOf(t, false, skill, link), "symbolic link"},
		{"tar hard link", tarOf(t, false, skill, hard), "not a plain file"},
		{"tar device", tarOf(t, true, skill, dev), "device"},
		{"duplicate", zipOf(t, entry{name: "pdf/SKILL.md", content: "a"}, entry{name: "pdf/SKILL.md", content: "b"}), "appears twice"},
		{"file where a folder goes", zipOf(t, entry{name: "pdf/scripts"}, entry{name: "pdf/scripts/run.sh"}), "needs it to be a folder"},
		{"too large", tarOf(t, true, &tar.Header{Name: "pdf/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: small.Bytes + 1}), "more than 100 bytes"},
		{"too many", zipOf(t, entry{name: "pdf/a"}, entry{name: "pdf/b"}, entry{name: "pdf/c"}, entry{name: "pdf/d"}), "more than 3 files"},
		{"empty", zipOf(t), "no files"},
		{"not an archive", []byte("<html>not found</html>"), "neither a zip nor a readable tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := read(tc.archive)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Read = %d files, %v; want a refusal saying %q", len(files), err, tc.why)
			}
			if files != nil {
				t.Fatalf("a refused archive returned files: %+v", files)
			}
		})
	}
}
