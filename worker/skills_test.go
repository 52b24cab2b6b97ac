package worker

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/testlog"
)

// skillFixture is a fixture whose agent is pinned to the FIRST of two
// versions of skill pdf-tools, whose SKILL.md bodies differ.
func skillFixture(t *testing.T) (f *fixture, skillID, first string) {
	t.Helper()
	srv := startServer(t, "")
	admin := srv.Admin(t)
	ctx := context.Background()
	md := func(body string) []byte {
		return []byte("---\nname: pdf-tools\ndescription: Fills PDF forms.\n---\n" + body)
	}
	sk, err := admin.CreateSkill(ctx, "", []client.SkillFile{
		{Path: "pdf-tools/SKILL.md", Content: md("FIRST-VERSION instructions\n")},
		{Path: "pdf-tools/scripts/fill.py", Content: []byte("print('v1')\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateSkillVersion(ctx, sk.ID, []client.SkillFile{{Path: "pdf-tools/SKILL.md", Content: md("SECOND-VERSION instructions\n")}}); err != nil {
		t.Fatal(err)
	}
	pin, _ := json.Marshal(map[string]string{"type": "custom", "skill_id": sk.ID, "version": sk.LatestVersionID})
	req := api.CreateAgentRequest{Name: "forms", Model: api.ModelConfig{ID: api.ScriptedModel}, Skills: []json.RawMessage{pin}}
	return newFixtureWith(t, srv, req), sk.ID, sk.LatestVersionID
}

// The worker brings the pinned first version into the session's room
// before the first tool call, where bash reads it, and removes exactly
// that folder when the item ends: with the room kept (KeepWorkdirs), what
// the agent wrote there stays and the skill does not.
func TestWorkerBringsThePinnedSkillVersion(t *testing.T) {
	f, skillID, first := skillFixture(t)
	logs := &testlog.Buffer{}
	cfg := f.config(logs)
	cfg.KeepWorkdirs = true
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "cat skills/pdf-tools/SKILL.md skills/pdf-tools/scripts/fill.py"}),
		toolCall("bash", map[string]any{"command": "echo mine > notes.txt"}),
	))
	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := toolResults(f.events(sess.ID))
	if len(got) != 2 || got[0].isError || !strings.Contains(got[0].text, "FIRST-VERSION instructions") || !strings.Contains(got[0].text, "print('v1')") {
		t.Fatalf("bash read %+v; want the first version's SKILL.md and script", got)
	}
	if strings.Contains(got[0].text, "SECOND-VERSION") {
		t.Fatalf("bash read the second version: %q", got[0].text)
	}
	room := filepath.Join(cfg.Workdir, sess.ID+roomSuffix)
	if _, err := os.Lstat(filepath.Join(room, "skills")); !os.IsNotExist(err) {
		t.Fatalf("the skills folder is still in the kept room (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(room, "notes.txt")); err != nil || string(b) != "mine\n" {
		t.Fatalf("the agent's own file in the kept room: %q, %v", b, err)
	}
	logs.Line("skill brought into the session's room", "skill_id="+skillID, "skill_version_id="+first)
}

// Under the sandbox the shell reads the skill but cannot change it.
func TestSandboxedShellSeesSkillsReadOnly(t *testing.T) {
	f, _, _ := skillFixture(t)
	cfg := f.sandboxConfig(&testlog.Buffer{})
	sess := f.session(script(api.ScriptEndTerminate,
		toolCall("bash", map[string]any{"command": "head -c 200 skills/pdf-tools/SKILL.md"}),
		toolCall("bash", map[string]any{"command": "echo changed > skills/pdf-tools/SKILL.md"}),
		toolCall("bash", map[string]any{"command": "touch skills/pdf-tools/new.txt"}),
	))
	stop := runWorker(t, f.worker(cfg))
	waitFor(t, "the session to end and its item to stop", func() bool {
		return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := toolResults(f.events(sess.ID))
	if len(got) != 3 || got[0].isError || !strings.Contains(got[0].text, "FIRST-VERSION") {
		t.Fatalf("results = %+v", got)
	}
	for _, r := range got[1:] {
		if !r.isError || !strings.Contains(r.text, "Read-only file system") {
			t.Errorf("a write into the skill = %+v; want Read-only file system", r)
		}
	}
}

// hostileZip is an archive a misbehaving server might send: a member that
// climbs out of the skill's folder and a symbolic link, beside a plain
// SKILL.md.
func hostileZip(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(h *zip.FileHeader, content string) {
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	add(&zip.FileHeader{Name: "pdf-tools/SKILL.md"}, "---\nname: pdf-tools\ndescription: x\n---\n")
	add(&zip.FileHeader{Name: "pdf-tools/../../../escaped.txt"}, "out")
	link := &zip.FileHeader{Name: "pdf-tools/link"}
	link.SetMode(fs.ModeSymlink | 0o777)
	add(link, "/etc")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A server that answers the download with a hostile archive (or names the
// skill so that its folder would be elsewhere) gets nothing written: the
// session runs without the skill, the log says why, and the workdir
// holds nothing but what the agent made.
func TestHostileSkillArchiveWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		mw   func(http.Handler) http.Handler
		why  string
	}{
		{"climbing member and link", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/content") {
					w.Header().Set("Content-Type", "application/zip")
					w.Write(hostileZip(t))
					return
				}
				h.ServeHTTP(w, r)
			})
		}, "skill archive refused"},
		{"climbing skill name", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/versions/") && !strings.HasSuffix(r.URL.Path, "/content") {
					json.NewEncoder(w).Encode(api.SkillVersion{ID: "skillver_x", Type: "skill_version", Name: "../../escaped"})
					return
				}
				h.ServeHTTP(w, r)
			})
		}, "not a plain folder name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, skillID, _ := skillFixture(t)
			logs := &testlog.Buffer{}
			cfg := f.config(logs)
			cfg.KeepWorkdirs = true
			f.srv.Wrap(tc.mw)
			sess := f.session(script(api.ScriptEndTerminate, toolCall("bash", map[string]any{"command": "ls -A; ls -A skills 2>&1"})))
			stop := runWorker(t, f.worker(cfg))
			waitFor(t, "the session to end and its item to stop", func() bool {
				return f.getSession(sess.ID).Status == api.SessionTerminated && f.sessionWork(sess.ID).State == api.WorkStopped
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := toolResults(f.events(sess.ID))
			if len(got) != 1 || !strings.Contains(got[0].text, "No such file or directory") {
				t.Fatalf("the agent found a skills folder: %+v", got)
			}
			logs.Line("could not be brought", "skill_id="+skillID, tc.why)
			// Under the workdir's parent (beside the server's database) is only
			// the kept room, empty.
			var found []string
			filepath.WalkDir(filepath.Dir(cfg.Workdir), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), "memstore.db") {
					found = append(found, p)
				}
				return nil
			})
			if len(found) != 0 {
				t.Fatalf("files written by the worker: %v", found)
			}
		})
	}
}
