package validate

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
)

func TestPath(t *testing.T) {
	long := strings.Repeat("/"+strings.Repeat("a", MaxSegmentBytes), 4) // 1,024 bytes
	deep := strings.Repeat("/d", MaxPathSegments)
	tests := []struct {
		name, path string
		wantErr    string // substring of the message; "" means accepted
	}{
		{"simple", "/notes.md", ""},
		{"nested", "/a/b/c.txt", ""},
		{"dots inside names", "/v1..v2/..hidden/x.", ""},
		{"spaces and unicode", "/Notas de reunião/café ☕.md", ""},
		{"exactly 1024 bytes", long, ""},
		{"1025 bytes", long + "b", "limit is 1024 bytes"},
		{"1024 bytes in one segment", "/" + strings.Repeat("a", api.MaxPathBytes-1), "segment of 1023 bytes"},
		{"20 segments", deep, ""},
		{"21 segments", deep + "/x", "21 segments"},
		{"empty", "", "is required"},
		{"relative", "notes.md", "must start with \"/\""},
		{"root only", "/", "ends with \"/\""},
		{"trailing slash", "/a/", "ends with \"/\""},
		{"double slash", "/a//b", "empty segment"},
		{"dot segment", "/a/./b", "\".\" segment"},
		{"dotdot segment", "/a/../b", "\"..\" segment"},
		{"leading dotdot", "/../etc/passwd", "\"..\" segment"},
		{"final dot", "/a/.", "\".\" segment"},
		{"NFD", "/cafe\u0301.md", "Normalization Form C"},
		{"NUL", "/a\x00b", "control character"},
		{"newline", "/a\nb", "control character"},
		{"DEL", "/a\x7fb", "control character"},
		{"C1 control", "/a\u0085b", "control character"},
		{"line separator", "/a\u2028b", "line separator"},
		{"paragraph separator", "/a\u2029b", "paragraph separator"},
		{"zero width space", "/a\u200bb", "format character"},
		{"BOM", "/\ufeffa", "format character"},
		{"bidi override", "/a\u202eb", "format character"},
		{"invalid UTF-8", "/a\xffb", "not valid UTF-8"},
		{"segment of 255 bytes", "/d/" + strings.Repeat("é", 127) + "a", ""},
		{"segment of 256 bytes", "/d/" + strings.Repeat("é", 128), "segment of 256 bytes"},
		{"the marker's name", "/" + MarkerName, "marker file"},
		{"the marker's name deeper", "/a/" + MarkerName + "/b", "marker file"},
		{"marker name as a prefix of a name", "/" + MarkerName + ".md", ""},
		{"a temporary file's name", "/a/" + TempPrefix + "x", "temporary files"},
		{"a temporary folder's name", "/" + TempPrefix + "/b", "temporary files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Path("path", tt.path)
			checkErr(t, err, tt.wantErr, api.InvalidRequest, "path: ")
		})
	}
}

func TestPathPrefix(t *testing.T) {
	tests := []struct {
		name, prefix string
		wantErr      string
	}{
		{"root", "/", ""},
		{"one level", "/notes/", ""},
		{"two levels", "/a/b/", ""},
		{"no trailing slash", "/notes", "must end with \"/\""},
		{"relative", "notes/", "must start with \"/\""},
		{"empty", "", "must not be empty"},
		{"double slash", "//", "empty segment"},
		{"dotdot", "/../", "\"..\" segment"},
		{"control", "/a\tb/", "control character"},
		{"NFD", "/cafe\u0301/", "Normalization Form C"},
		{"too long", "/" + strings.Repeat("a", api.MaxPathBytes) + "/", "limit is 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, PathPrefix("path_prefix", tt.prefix), tt.wantErr, api.InvalidRequest, "path_prefix: ")
		})
	}
}

func TestContent(t *testing.T) {
	if err := Content("content", ""); err != nil {
		t.Errorf("empty content refused: %v", err)
	}
	if err := Content("content", strings.Repeat("x", api.MaxContentBytes)); err != nil {
		t.Errorf("102,400 bytes refused: %v", err)
	}
	// Multi-byte characters count in bytes, not characters.
	if err := Content("content", strings.Repeat("é", api.MaxContentBytes/2)); err != nil {
		t.Errorf("102,400 bytes of two-byte characters refused: %v", err)
	}
	checkErr(t, Content("content", strings.Repeat("x", api.MaxContentBytes+1)), "102401 bytes", api.RequestTooLarge, "content: ")
	checkErr(t, Content("content", "a\xffb"), "not valid UTF-8", api.InvalidRequest, "content: ")
}

func TestName(t *testing.T) {
	checkErr(t, Name("name", "Team notes"), "", "", "")
	checkErr(t, Name("name", strings.Repeat("n", 255)), "", "", "")
	checkErr(t, Name("name", strings.Repeat("é", 255)), "", "", "") // characters, not bytes
	checkErr(t, Name("name", strings.Repeat("n", 256)), "256 characters", api.InvalidRequest, "name: ")
	checkErr(t, Name("name", ""), "is required", api.InvalidRequest, "name: ")
	checkErr(t, Name("name", "two\nlines"), "control character", api.InvalidRequest, "name: ")
	checkErr(t, Name("name", "tab\there"), "control character", api.InvalidRequest, "name: ")
}

func TestDescription(t *testing.T) {
	checkErr(t, Description("description", ""), "", "", "")
	checkErr(t, Description("description", "line one\nline two"), "", "", "")
	checkErr(t, Description("description", strings.Repeat("d", 1024)), "", "", "")
	checkErr(t, Description("description", strings.Repeat("d", 1025)), "1025 characters", api.InvalidRequest, "description: ")
}

func TestText(t *testing.T) {
	checkErr(t, Text("title", strings.Repeat("é", 10), 10), "", "", "") // characters, not bytes
	checkErr(t, Text("title", strings.Repeat("t", 11), 10), "11 characters long; the limit is 10", api.InvalidRequest, "title: ")
	checkErr(t, Text("title", "a\xffb", 10), "not valid UTF-8", api.InvalidRequest, "title: ")
}

func TestMetadata(t *testing.T) {
	full := map[string]string{}
	for i := range api.MaxMetadataPairs {
		full[string(rune('a'+i))] = "v"
	}
	checkErr(t, Metadata("metadata", full), "", "", "")
	over := map[string]string{"extra": "v"}
	for k, v := range full {
		over[k] = v
	}
	checkErr(t, Metadata("metadata", over), "17 key-value pairs", api.InvalidRequest, "metadata: ")
	checkErr(t, Metadata("metadata", map[string]string{"": "v"}), "empty key", api.InvalidRequest, "metadata: ")
	checkErr(t, Metadata("metadata", map[string]string{strings.Repeat("k", 64): "v"}), "", "", "")
	checkErr(t, Metadata("metadata", map[string]string{strings.Repeat("k", 65): "v"}), "65 characters", api.InvalidRequest, "metadata: ")
	checkErr(t, Metadata("metadata", map[string]string{"k": strings.Repeat("v", 512)}), "", "", "")
	checkErr(t, Metadata("metadata", map[string]string{"k": strings.Repeat("v", 513)}), "513 characters", api.InvalidRequest, "metadata: ")
	checkErr(t, Metadata("metadata", map[string]string{"k": ""}), "", "", "")
}

func TestSHA256(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	checkErr(t, SHA256("expected_content_sha256", good), "", "", "")
	checkErr(t, SHA256("expected_content_sha256", strings.ToUpper(good)), "lowercase hex", api.InvalidRequest, "expected_content_sha256: ")
	checkErr(t, SHA256("expected_content_sha256", good[:63]), "63 characters", api.InvalidRequest, "expected_content_sha256: ")
	checkErr(t, SHA256("expected_content_sha256", good[:63]+"g"), "lowercase hex", api.InvalidRequest, "expected_content_sha256: ")
}

// checkErr asserts err is nil when want is "", and otherwise an *api.Error
// of type typ whose message starts with prefix (the field name) and contains
// want.
func checkErr(t *testing.T, err error, want string, typ api.ErrorType, prefix string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want an *api.Error containing %q", err, want)
	}
	if ae.Type != typ {
		t.Errorf("type = %s, want %s", ae.Type, typ)
	}
	if !strings.HasPrefix(ae.Message, prefix) {
		t.Errorf("message %q does not start with the field name %q", ae.Message, prefix)
	}
	if !strings.Contains(ae.Message, want) {
		t.Errorf("message %q does not contain %q", ae.Message, want)
	}
}

// FuzzPath checks the promises the worker relies on when it maps a memory
// path to a file under a store's folder: an accepted path never leaves the
// folder, never has a ".." segment, and is already NFC (so the server and
// the folder can never hold two spellings of one name).
func FuzzPath(f *testing.F) {
	for _, s := range []string{"/a", "/a/b", "/../x", "/a/./b", "//", "/a/", "/cafe\u0301", "/é", "/a\u2028b", "/\x00", "/" + strings.Repeat("ab/", 30) + "c", "a/b", "/..", "/.../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if Path("path", p) != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || len(p) > api.MaxPathBytes || !utf8.ValidString(p) {
			t.Fatalf("accepted %q: not absolute, too long or not UTF-8", p)
		}
		if !norm.NFC.IsNormalString(p) {
			t.Fatalf("accepted non-NFC path %q", p)
		}
		if path.Clean(p) != p {
			t.Fatalf("accepted %q, which path.Clean rewrites to %q", p, path.Clean(p))
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("accepted %q with segment %q", p, seg)
			}
		}
		root := "/mnt/memory/store"
		joined := filepath.Join(root, filepath.FromSlash(p))
		if !strings.HasPrefix(joined, root+string(filepath.Separator)) {
			t.Fatalf("accepted %q escapes %s: %s", p, root, joined)
		}
		for _, r := range p {
			if forbiddenRune(r) != "" {
				t.Fatalf("accepted %q containing %U", p, r)
			}
		}
		// Accepted paths are accepted as prefixes too once a slash is added,
		// so every directory of a stored memory can be listed.
		if dir := path.Dir(p); dir != "/" && PathPrefix("path_prefix", dir+"/") != nil {
			t.Fatalf("memory %q accepted but its directory %q refused as a prefix", p, dir+"/")
		}
	})
}

func TestIDAndMissing(t *testing.T) {
	good := ids.New(ids.MemoryStore)
	checkErr(t, ID("resources[0].memory_store_id", ids.MemoryStore, "memory store", good), "", "", "")
	checkErr(t, ID("agent", ids.Agent, "agent", good), "is a memory store id, not an agent id", api.NotFound, "agent: ")
	checkErr(t, ID("", ids.Session, "session", "nonsense"), "session \"nonsense\" not found: session ids look like "+ids.Session, api.NotFound, "session")
	checkErr(t, Missing("environment_id", "environment", "env_x", "GET /v1/environments"), "no environment env_x: it does not exist or was deleted; check the id (GET /v1/environments lists them)", api.NotFound, "environment_id: ")
}
