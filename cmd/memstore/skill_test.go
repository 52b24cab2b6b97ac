package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memstore/memstore/api"
)

func writeSkillFolder(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func zipFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(b)
	}
	return out
}

// A folder becomes a skill, a changed folder its second version; versions
// list newest first, a download holds exactly the version asked for, and
// an agent names the skill pinned to a version.
func TestCLISkillCreateVersionsDownload(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	cli := func(want int, args ...string) string { return memstoreCLI(t, want, append(args, conn...)...) }
	dir := filepath.Join(t.TempDir(), "pdf-tools")
	md := "---\nname: pdf-tools\ndescription: Fills PDF forms.\n---\n"
	writeSkillFolder(t, dir, map[string]string{"SKILL.md": md + "first\n", "scripts/fill.py": "print(1)\n"})

	skill := strings.TrimSpace(cli(0, "skill", "create", dir, "-q"))
	writeSkillFolder(t, dir, map[string]string{"SKILL.md": md + "second\n"})
	var second api.SkillVersion
	decodeOut(t, cli(0, "skill", "create", dir, "--skill", skill), &second)

	var versions []api.SkillVersion
	decodeOut(t, cli(0, "skill", "versions", skill), &versions)
	if len(versions) != 2 || versions[0].ID != second.ID || versions[1].Name != "pdf-tools" {
		t.Fatalf("versions = %+v", versions)
	}
	first := versions[1].ID
	out := filepath.Join(t.TempDir(), "first.zip")
	cli(0, "skill", "download", skill, "--version", first, "--to", out)
	if got := zipFiles(t, out); len(got) != 2 || got["pdf-tools/SKILL.md"] != md+"first\n" || got["pdf-tools/scripts/fill.py"] != "print(1)\n" {
		t.Fatalf("the first version's archive holds %v", got)
	}
	// An existing file is never overwritten.
	if errOut := memstoreCLIErr(t, 1, append([]string{"skill", "download", skill, "--to", out}, conn...)...); !strings.Contains(errOut, "already exists") {
		t.Fatalf("download over an existing file: %s", errOut)
	}
	if got := zipFiles(t, out); got["pdf-tools/SKILL.md"] != md+"first\n" {
		t.Fatalf("the existing archive changed: %v", got)
	}

	var list []api.Skill
	decodeOut(t, cli(0, "skill", "list"), &list)
	if len(list) != 1 || list[0].ID != skill || list[0].LatestVersionID != second.ID || list[0].DisplayName != "pdf-tools" {
		t.Fatalf("skill list = %+v", list)
	}

	var agent api.Agent
	decodeOut(t, cli(0, "agent", "create", "forms", "--skill", skill+"@"+first), &agent)
	var entry map[string]string
	if len(agent.Skills) != 1 || json.Unmarshal(agent.Skills[0], &entry) != nil || entry["skill_id"] != skill || entry["version"] != first {
		t.Fatalf("the agent's skills = %s", agent.Skills)
	}
}

// A folder the server refuses (no SKILL.md) or that holds a link is not
// uploaded, and the error says what to do; no skill is stored.
func TestCLISkillCreateRefusals(t *testing.T) {
	rs, _ := cliServer(t)
	conn := []string{"--base-url", rs.baseURL, "--api-key", rs.adminKey}
	noMD := filepath.Join(t.TempDir(), "notes")
	writeSkillFolder(t, noMD, map[string]string{"README.md": "hi"})
	if errOut := memstoreCLIErr(t, 1, append([]string{"skill", "create", noMD}, conn...)...); !strings.Contains(errOut, "no SKILL.md") {
		t.Fatalf("a folder without SKILL.md: %s", errOut)
	}
	linked := filepath.Join(t.TempDir(), "linked")
	writeSkillFolder(t, linked, map[string]string{"SKILL.md": "---\nname: linked\ndescription: x\n---\n"})
	if err := os.Symlink("/etc/hostname", filepath.Join(linked, "host")); err != nil {
		t.Fatal(err)
	}
	if errOut := memstoreCLIErr(t, 1, append([]string{"skill", "create", linked}, conn...)...); !strings.Contains(errOut, "not a regular file") {
		t.Fatalf("a folder with a link: %s", errOut)
	}
	if out := memstoreCLI(t, 0, append([]string{"skill", "list"}, conn...)...); strings.TrimSpace(out) != "[]" {
		t.Fatalf("skills after the refusals: %s", out)
	}
}

// memstoreCLIErr runs the CLI in-process, checks its exit code and
// returns what it wrote to standard error.
func memstoreCLIErr(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errb strings.Builder
	if code := run(t.Context(), args, testStreams(&out, &errb)); code != want {
		t.Fatalf("memstore %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return errb.String()
}
