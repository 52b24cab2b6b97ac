package storearchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memstore/memstore/internal/testdigest"
)

func TestWriteThenReadGivesTheSameFiles(t *testing.T) {
	files := []File{{"/a.md", []byte("alpha")}, {"/dir/deep/b.md", []byte("")}, {"/ü.md", []byte("ünïcode\n")}}
	for _, format := range []string{TarGz, Zip} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, format, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := w.Add(f.Path, string(f.Content)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, skipped, err := Read(format, buf.Bytes(), 100, 1000)
		if err != nil || len(skipped) != 0 {
			t.Fatalf("%s: Read = %v, %v", format, skipped, err)
		}
		for i := range got {
			if got[i].Content == nil {
				got[i].Content = []byte{}
			}
		}
		files[1].Content = []byte{}
		if !reflect.DeepEqual(got, files) {
			t.Fatalf("%s: read back %q, wrote %q", format, got, files)
		}
	}
}

func TestReadSkipsLinksAndOversizedFilesAndRefusesBombs(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "link.md", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	tw.WriteHeader(&tar.Header{Name: "big.md", Typeflag: tar.TypeReg, Size: 11, Mode: 0o644})
	tw.Write([]byte("0123456789X"))
	tw.WriteHeader(&tar.Header{Name: "ok.md", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644})
	tw.Write([]byte("ok"))
	tw.Close()
	gz.Close()
	files, skipped, err := Read(TarGz, buf.Bytes(), 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "/ok.md" {
		t.Fatalf("files = %q, want only /ok.md", files)
	}
	if len(skipped) != 2 || skipped[0].Name != "link.md" || skipped[1].Name != "big.md" {
		t.Fatalf("skipped = %+v, want the link and the oversized file, each with a reason", skipped)
	}
	if _, _, err := Read(TarGz, buf.Bytes(), 10, 1); err == nil || !strings.Contains(err.Error(), "split it") {
		t.Fatalf("an archive past the total limit: err = %v", err)
	}
	if _, _, err := Read(Zip, []byte("not a zip"), 10, 100); err == nil {
		t.Fatal("garbage read as a zip")
	}
}

func TestPlan(t *testing.T) {
	existing := map[string]Existing{"/same.md": {"mem_1", testdigest.SHA256("same")}, "/changed.md": {"mem_2", testdigest.SHA256("old")}}
	check := func(path, content string) error {
		if strings.Contains(path, "..") {
			return errors.New("path: must not contain a .. segment")
		}
		return nil
	}
	steps := Plan([]File{
		{"/new.md", []byte("new")}, {"/same.md", []byte("same")}, {"/changed.md", []byte("new text")},
		{"/bin.md", []byte{0xff}}, {"/../x.md", []byte("x")}, {"/new.md", []byte("again")},
	}, existing, check)
	var got []string
	for _, st := range steps {
		got = append(got, st.Path+" "+st.Action)
	}
	want := []string{"/../x.md refuse", "/bin.md refuse", "/changed.md change", "/new.md create", "/new.md refuse", "/same.md same"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Plan = %q, want %q", got, want)
	}
	if steps[2].Memory != existing["/changed.md"] {
		t.Fatalf("a change must carry the memory it replaces, at the state seen: %+v", steps[2].Memory)
	}
}
