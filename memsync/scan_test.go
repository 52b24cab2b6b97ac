package memsync

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/confined"
	"github.com/memstore/memstore/internal/testdigest"
	"github.com/memstore/memstore/internal/validate"
)

const storeID = "memstore_01TEST"

// newFolder makes a store folder holding this store's marker, and a clock
// far enough ahead that the hash cache trusts every file written now.
func newFolder(t *testing.T) (*confined.Root, *confined.HashCache) {
	t.Helper()
	root, err := confined.Create(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WriteFile(MarkerName, MarkerContent(storeID), confined.Precondition{}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	return root, confined.NewHashCache(func() time.Time { return later })
}

func write(t *testing.T, root *confined.Root, rel, content string) {
	t.Helper()
	if err := root.WriteFile(rel, []byte(content), confined.Precondition{}); err != nil {
		t.Fatal(err)
	}
}

func TestMarkerContentMatchesTheSDKFormat(t *testing.T) {
	// The official SDK's worker writes "version 1\n<store id>", no trailing
	// newline, and trusts a folder only when the file is exactly that.
	if got := string(MarkerContent("memstore_abc")); got != "version 1\nmemstore_abc" {
		t.Fatalf("MarkerContent = %q", got)
	}
}

func TestScan(t *testing.T) {
	root, cache := newFolder(t)
	dir := root.Dir()
	outside := t.TempDir()
	write(t, root, "a.md", "alpha")
	write(t, root, "sub/b.md", "beta ✓")
	write(t, root, "bin", "\xff\xfe")
	write(t, root, "big", strings.Repeat("x", api.MaxContentBytes+1))
	write(t, root, "limit", strings.Repeat("x", api.MaxContentBytes))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link.md")))
	must(unix.Mkfifo(filepath.Join(dir, "sub/fifo"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "bad\xffname"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "ctl\x01name"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "sub/.memstore-tmp-0123"), []byte("x"), 0o600))

	local, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	if local.Marker != MarkerTrusted {
		t.Fatalf("marker %v, want trusted", local.Marker)
	}
	want := map[string]LocalFile{
		"/a.md":     {SHA256: testdigest.SHA256("alpha")},
		"/sub/b.md": {SHA256: testdigest.SHA256("beta ✓")},
		"/bin":      {SHA256: testdigest.SHA256("\xff\xfe"), Unsyncable: NotUTF8},
		"/big":      {SHA256: testdigest.SHA256(strings.Repeat("x", api.MaxContentBytes+1)), Unsyncable: TooLarge},
		"/limit":    {SHA256: testdigest.SHA256(strings.Repeat("x", api.MaxContentBytes))},
	}
	if !maps.Equal(local.Files, want) {
		t.Fatalf("files:\n got %v\nwant %v", local.Files, want)
	}
	if got := slices.Sorted(maps.Keys(local.Obscured)); !slices.Equal(got, []string{"/link.md", "/sub/fifo"}) {
		t.Fatalf("obscured = %v", got)
	}
	if !errors.Is(local.Obscured["/link.md"], confined.ErrSymlink) || !errors.Is(local.Obscured["/sub/fifo"], confined.ErrNotRegular) {
		t.Fatalf("obscured reasons = %v", local.Obscured)
	}
	var ignored []string
	for _, s := range local.Ignored {
		ignored = append(ignored, s.Path)
	}
	if want := []string{"ctl\x01name", "bad\xffname", "sub/.memstore-tmp-0123"}; !slices.Equal(slices.Sorted(slices.Values(ignored)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("ignored = %q, want %q", ignored, want)
	}
	if local.Rehashed != 5 {
		t.Fatalf("first scan hashed %d files, want 5", local.Rehashed)
	}

	// Nothing changed: nothing is read again.
	again, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Rehashed != 0 || !maps.Equal(again.Files, local.Files) {
		t.Fatalf("rescan of an unchanged folder hashed %d files (want 0), files equal: %v", again.Rehashed, maps.Equal(again.Files, local.Files))
	}
	// One edit, one deletion: one file read.
	write(t, root, "a.md", "ALPHA")
	must(os.Remove(filepath.Join(dir, "bin")))
	third, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	if third.Rehashed != 1 || third.Files["/a.md"].SHA256 != testdigest.SHA256("ALPHA") || len(third.Files) != 4 {
		t.Fatalf("after one edit and one deletion: hashed %d, files %v", third.Rehashed, third.Files)
	}
}

func TestScanMarker(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, root *confined.Root)
		want  MarkerState
	}{
		{"this store's marker", func(*testing.T, *confined.Root) {}, MarkerTrusted},
		{"another store's marker", func(t *testing.T, root *confined.Root) {
			write(t, root, MarkerName, string(MarkerContent("memstore_OTHER")))
		}, MarkerMismatch},
		{"a marker with a trailing newline", func(t *testing.T, root *confined.Root) {
			write(t, root, MarkerName, string(MarkerContent(storeID))+"\n")
		}, MarkerMismatch},
		{"a symlink to a valid marker elsewhere", func(t *testing.T, root *confined.Root) {
			elsewhere := filepath.Join(t.TempDir(), "m")
			if err := os.WriteFile(elsewhere, MarkerContent(storeID), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(root.Dir(), MarkerName)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(root.Dir(), MarkerName)); err != nil {
				t.Fatal(err)
			}
		}, MarkerMismatch},
		{"no marker", func(t *testing.T, root *confined.Root) {
			if err := os.Remove(filepath.Join(root.Dir(), MarkerName)); err != nil {
				t.Fatal(err)
			}
		}, MarkerMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, cache := newFolder(t)
			write(t, root, "a.md", "alpha")
			c.setup(t, root)
			local, err := Scan(root, cache, storeID)
			if err != nil {
				t.Fatal(err)
			}
			if local.Marker != c.want {
				t.Fatalf("marker = %v, want %v", local.Marker, c.want)
			}
			if _, listed := local.Files["/"+MarkerName]; listed || len(local.Obscured) != 0 {
				t.Fatalf("the marker leaked into the scan: %v %v", local.Files, local.Obscured)
			}
		})
	}
}

func TestScanOfAVanishedFolder(t *testing.T) {
	root, cache := newFolder(t)
	write(t, root, "a.md", "alpha")
	if err := os.RemoveAll(root.Dir()); err != nil {
		t.Fatal(err)
	}
	local, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	if local.Marker != MarkerMissing || !local.empty() {
		t.Fatalf("vanished folder scanned as %+v, want empty and unmarked", local)
	}
	plan := Reconcile(synced("/a.md", testdigest.SHA256("alpha")), local, Remote{"/a.md": {ID: "mem_1", SHA256: testdigest.SHA256("alpha")}}, Options{Now: t0})
	if !plan.Rebuild || len(plan.Actions) != 1 || plan.Actions[0].Kind != Download {
		t.Fatalf("a vanished folder should be rebuilt: %+v", plan)
	}

	// A folder replaced by a symlink is not scanned at all.
	if err := os.Symlink(t.TempDir(), root.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(root, cache, storeID); !errors.Is(err, confined.ErrSymlink) || !strings.Contains(err.Error(), storeID) {
		t.Fatalf("scan of a folder replaced by a symlink = %v, want ErrSymlink naming the store", err)
	}
}

// TestScanThenReconcile runs the two together on a real folder: the agent
// replaced one memory's file with a symlink, deleted another, edited a third.
func TestScanThenReconcile(t *testing.T) {
	root, cache := newFolder(t)
	for _, f := range []string{"keep.md", "edit.md", "gone.md", "link.md"} {
		write(t, root, f, f)
	}
	state := synced("/keep.md", testdigest.SHA256("keep.md"), "/edit.md", testdigest.SHA256("edit.md"), "/gone.md", testdigest.SHA256("gone.md"), "/link.md", testdigest.SHA256("link.md"))
	remote := Remote{}
	for p, ps := range state {
		remote[p] = RemoteMemory{ID: id(p), SHA256: ps.Base}
	}
	write(t, root, "edit.md", "edited")
	if err := os.Remove(filepath.Join(root.Dir(), "gone.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root.Dir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	local, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	plan := Reconcile(state, local, remote, Options{Now: t0, Final: true})
	want := []Action{
		update("/edit.md", testdigest.SHA256("edit.md"), testdigest.SHA256("edited")),
		deleteRemote("/gone.md", testdigest.SHA256("gone.md")),
		only(SkipObscured, "/link.md"),
	}
	if !slices.Equal(plan.Actions, want) {
		t.Fatalf("actions:\n got %s\nwant %s", fmtActions(plan.Actions), fmtActions(want))
	}
}

// TestPathRulesAreTheServers checks that the folder side refuses exactly
// the paths the server refuses (it uses the server's validator), down to the
// rules easy to forget: a file 21 folders deep is not a memory.
func TestPathRulesAreTheServers(t *testing.T) {
	root, cache := newFolder(t)
	deep := strings.Repeat("d/", validate.MaxPathSegments) + "f.md"
	ok := strings.Repeat("d/", validate.MaxPathSegments-1) + "f.md"
	write(t, root, deep, "too deep")
	write(t, root, ok, "just deep enough")
	local, err := Scan(root, cache, storeID)
	if err != nil {
		t.Fatal(err)
	}
	if _, in := local.Files["/"+ok]; !in || len(local.Files) != 1 {
		t.Fatalf("files %v, want only /%s", local.Files, ok)
	}
	if len(local.Ignored) != 1 || local.Ignored[0].Path != deep || !strings.Contains(local.Ignored[0].Err.Error(), "segments") {
		t.Fatalf("ignored %v, want %s refused for its depth", local.Ignored, deep)
	}
	// The same path in a listing is skipped, never written.
	plan := Reconcile(State{}, trusted(nil), remote("/"+deep, A), Options{Now: t0})
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != SkipInvalidPath {
		t.Fatalf("actions %s, want the listed path skipped", fmtActions(plan.Actions))
	}
}

func TestFoldCase(t *testing.T) {
	for _, pair := range [][2]string{{"/Notes.md", "/notes.md"}, {"/ÉTÉ", "/été"}, {"/\u212a", "/k"}, {"/ΣΑΣ", "/σας"}} {
		if foldCase(pair[0]) != foldCase(pair[1]) {
			t.Errorf("%q and %q should fold together", pair[0], pair[1])
		}
	}
	if foldCase("/a") == foldCase("/b") {
		t.Error("different letters folded together")
	}
}
