package toolset

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memstore/memstore/internal/confined"
)

func TestReadReturnsTheFileAsIs(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.work, "crlf.txt"), "one\r\ntwo\r\n")
	mustWrite(t, filepath.Join(f.work, "empty.txt"), "")
	mustWrite(t, filepath.Join(f.work, "sub", "utf8.md"), "héllo wörld\n")

	if got := wantOK(t, f.run(t, "read", in("file_path", "crlf.txt"))); got != "one\r\ntwo\r\n" {
		t.Fatalf("read = %q", got)
	}
	if got := wantOK(t, f.run(t, "read", in("file_path", "empty.txt"))); got != "" {
		t.Fatalf("read of an empty file = %q", got)
	}
	// Absolute and relative names reach the same file.
	abs := filepath.Join(f.work, "sub", "utf8.md")
	if a, b := wantOK(t, f.run(t, "read", in("file_path", abs))), wantOK(t, f.run(t, "read", in("file_path", "sub/../sub/utf8.md"))); a != b || a != "héllo wörld\n" {
		t.Fatalf("absolute read %q, relative read %q", a, b)
	}
}

func TestReadViewRange(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.work, "lines.txt"), "l1\nl2\nl3\nl4\n")
	cases := []struct {
		rng  []int
		want string
	}{
		{[]int{2, 3}, "l2\nl3"},
		{[]int{3, 0}, "l3\nl4\n"}, // 0 = to the end; the final newline ends an empty fifth line
		{[]int{3, -1}, "l3\nl4\n"},
		{[]int{0, 1}, "l1"},
		{[]int{1, 99}, "l1\nl2\nl3\nl4\n"},
		{[]int{4, 4}, "l4"},
		{[]int{9, 12}, ""},
		{[]int{3, 2}, ""},
	}
	for _, c := range cases {
		got := wantOK(t, f.run(t, "read", in("file_path", "lines.txt", "view_range", c.rng)))
		if got != c.want {
			t.Errorf("view_range %v = %q, want %q", c.rng, got, c.want)
		}
	}
}

func TestReadSizeLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxReadBytes = 64 })
	big := strings.Repeat("0123456789\n", 20) // 220 bytes, 20 lines
	mustWrite(t, filepath.Join(f.work, "big.txt"), big)
	mustWrite(t, filepath.Join(f.work, "longline.txt"), "short\n"+strings.Repeat("x", 100)+"\nshort\n")

	wantErr(t, f.run(t, "read", in("file_path", "big.txt")), "big.txt is 220 bytes, exceeds 64-byte limit", "view_range")
	// A slice of a file over the cap can still be read.
	if got := wantOK(t, f.run(t, "read", in("file_path", "big.txt", "view_range", []int{19, 20}))); got != "0123456789\n0123456789" {
		t.Fatalf("view_range of a big file = %q", got)
	}
	wantErr(t, f.run(t, "read", in("file_path", "big.txt", "view_range", []int{1, 10})), "view_range [1, 10]", "narrow the view_range")
	wantErr(t, f.run(t, "read", in("file_path", "longline.txt", "view_range", []int{2, 2})), "line 2 of longline.txt alone exceeds")
	if got := wantOK(t, f.run(t, "read", in("file_path", "longline.txt", "view_range", []int{3, 3}))); got != "short" {
		t.Fatalf("line after a long line = %q", got)
	}
	// edit loads whole files, so it refuses big ones outright, changing nothing.
	wantErr(t, f.run(t, "edit", in("file_path", "big.txt", "old_string", "0123", "new_string", "x", "replace_all", true)), "exceeds 64-byte limit")
	if readString(t, filepath.Join(f.work, "big.txt")) != big {
		t.Fatal("a refused edit changed the file")
	}
}

func TestReadRefusesWhatIsNotATextFile(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.work, "bin.dat"), "\xff\xfe\x00\x01")
	mustMkdir(t, filepath.Join(f.work, "dir"))
	if err := syscall.Mkfifo(filepath.Join(f.work, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.run(t, "read", in("file_path", "bin.dat")), "bin.dat is not UTF-8 text")
	wantErr(t, f.run(t, "read", in("file_path", "dir")), "dir is a directory")
	// A FIFO would block a reader forever; it is refused instead.
	wantErr(t, f.run(t, "read", in("file_path", "fifo")), "fifo is not a regular file")
	wantErr(t, f.run(t, "read", in("file_path", "missing.txt")), "missing.txt: no such file or directory")
	wantErr(t, f.run(t, "read", in("file_path", "missing/deeper.txt")), "no such file or directory")
}

func TestWriteCreatesOwnerOnlyFilesAtomically(t *testing.T) {
	f := newFixture(t)
	res := wantOK(t, f.run(t, "write", in("file_path", "a/b/c.txt", "content", "hello")))
	if res != "wrote 5 bytes to a/b/c.txt" {
		t.Fatalf("write result = %q", res)
	}
	name := filepath.Join(f.work, "a", "b", "c.txt")
	if got := readString(t, name); got != "hello" {
		t.Fatalf("file holds %q", got)
	}
	assertMode(t, name, 0o600)
	assertMode(t, filepath.Join(f.work, "a"), 0o700)
	assertMode(t, filepath.Join(f.work, "a", "b"), 0o700)

	// Overwriting keeps the file's mode; an empty content is fine.
	if err := os.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	wantOK(t, f.run(t, "write", in("file_path", name, "content", "")))
	if got := readString(t, name); got != "" {
		t.Fatalf("file holds %q after writing empty content", got)
	}
	assertMode(t, name, 0o640)
	assertNoTempFiles(t, f.work)

	wantErr(t, f.run(t, "write", in("file_path", "a", "content", "x")), "a is a directory")
	wantErr(t, f.run(t, "write", in("file_path", ".", "content", "x")), "is a directory")
	wantErr(t, f.run(t, "write", in("file_path", "a/b/c.txt/d", "content", "x")), "a/b/c.txt is not a directory")
}

func TestEdit(t *testing.T) {
	f := newFixture(t)
	name := filepath.Join(f.work, "doc.md")
	const orig = "alpha beta\ngamma beta\ndelta\n"
	mustWrite(t, name, orig)
	if err := os.Chmod(name, 0o644); err != nil {
		t.Fatal(err)
	}

	wantErr(t, f.run(t, "edit", in("file_path", "doc.md", "old_string", "omega", "new_string", "x")), "old_string not found in doc.md")
	wantErr(t, f.run(t, "edit", in("file_path", "doc.md", "old_string", "beta", "new_string", "x")), "old_string appears 2 times in doc.md (must be unique)", "replace_all")
	wantErr(t, f.run(t, "edit", in("file_path", "nope.md", "old_string", "a", "new_string", "b")), "nope.md: no such file or directory")
	if got := readString(t, name); got != orig {
		t.Fatalf("refused edits changed the file to %q", got)
	}
	mustNotExist(t, filepath.Join(f.work, "nope.md"))

	if got := wantOK(t, f.run(t, "edit", in("file_path", "doc.md", "old_string", "delta", "new_string", "DELTA"))); got != "edited doc.md (1 replacement(s))" {
		t.Fatalf("edit result = %q", got)
	}
	if got := wantOK(t, f.run(t, "edit", in("file_path", "doc.md", "old_string", "beta", "new_string", "B", "replace_all", true))); got != "edited doc.md (2 replacement(s))" {
		t.Fatalf("replace_all result = %q", got)
	}
	if got := readString(t, name); got != "alpha B\ngamma B\nDELTA\n" {
		t.Fatalf("file after edits = %q", got)
	}
	assertMode(t, name, 0o644)
	assertNoTempFiles(t, f.work)
}

func assertMode(t *testing.T, name string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Fatalf("%s has mode %o, want %o", name, got, want)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	for name := range snapshot(t, dir) {
		if confined.IsTempName(filepath.Base(name)) {
			t.Fatalf("temporary file %s left behind", name)
		}
	}
}
