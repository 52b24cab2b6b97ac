package server_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
)

// skillFiles turns path → content into the SDK's upload parts, each named
// by its path.
func skillFiles(files map[string]string) []io.Reader {
	var out []io.Reader
	for _, name := range slices.Sorted(maps.Keys(files)) {
		out = append(out, anthropic.File(strings.NewReader(files[name]), name, "application/octet-stream"))
	}
	return out
}

func skillMD(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
}

// download reads a version's archive through the SDK and returns its
// members, path → content.
func download(t *testing.T, c anthropic.Client, skillID, version string) map[string]string {
	t.Helper()
	res, err := c.Beta.Skills.Versions.Download(context.Background(), version, anthropic.BetaSkillVersionDownloadParams{SkillID: skillID})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("the download is not a zip archive (%s): %v", res.Header.Get("Content-Type"), err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(b)
	}
	return out
}

func TestSkillsThroughTheOfficialSDK(t *testing.T) {
	ctx := context.Background()
	s := newSDKServer(t)
	c := s.client

	v1Files := map[string]string{
		"pdf-tools/SKILL.md":        skillMD("pdf-tools", "Fills PDF forms. Use when a task mentions a PDF form.", "Run scripts/fill.py.\n"),
		"pdf-tools/scripts/fill.py": "print('v1')\n",
	}
	sk, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(v1Files)})
	if err != nil {
		t.Fatal(err)
	}
	fieldsPresent(t, "skill", sk)
	if sk.DisplayName != "pdf-tools" || sk.Source.Type != anthropic.BetaSkillSourceTypeCustom || sk.LatestVersionID == "" {
		t.Fatalf("created skill = %s; want display_name from SKILL.md, source custom, a latest version", sk.RawJSON())
	}
	first := sk.LatestVersionID

	v2Files := map[string]string{
		"pdf-tools/SKILL.md":        skillMD("pdf-tools", "Fills PDF forms, now with signatures.", "Run scripts/sign.py.\n"),
		"pdf-tools/scripts/sign.py": "print('v2')\n",
	}
	second, err := c.Beta.Skills.Versions.New(ctx, sk.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles(v2Files)})
	if err != nil {
		t.Fatal(err)
	}
	fieldsPresent(t, "skill version", second)
	if second.SkillID != sk.ID || second.Name != "pdf-tools" || second.Description != "Fills PDF forms, now with signatures." || second.ID == first {
		t.Fatalf("second version = %s", second.RawJSON())
	}
	got, err := c.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{})
	if err != nil || got.LatestVersionID != second.ID {
		t.Fatalf("skill after a second version: %v, %v; want latest_version_id %s", got, err, second.ID)
	}

	page, err := c.Beta.Skills.Versions.List(ctx, sk.ID, anthropic.BetaSkillVersionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].ID != second.ID || page.Data[1].ID != first || page.Data[1].Description != "Fills PDF forms. Use when a task mentions a PDF form." {
		t.Fatalf("versions = %s; want the second then the first", page.RawJSON())
	}
	v, err := c.Beta.Skills.Versions.Get(ctx, first, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || v.ID != first || v.Name != "pdf-tools" {
		t.Fatalf("get first version: %v, %v", v, err)
	}
	latest, err := c.Beta.Skills.Versions.Get(ctx, "latest", anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	if err != nil || latest.ID != second.ID {
		t.Fatalf("get latest: %v, %v; want %s", latest, err, second.ID)
	}

	// Each archive holds exactly its version's files, under the skill's name.
	if got := download(t, c, sk.ID, first); !maps.Equal(got, v1Files) {
		t.Fatalf("first version's archive = %v; want %v", got, v1Files)
	}
	if got := download(t, c, sk.ID, second.ID); !maps.Equal(got, v2Files) {
		t.Fatalf("second version's archive = %v; want %v", got, v2Files)
	}

	list, err := c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != sk.ID {
		t.Fatalf("list skills: %v, %v", list, err)
	}

	// A display name given wins over the SKILL.md name.
	named, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{DisplayName: param.NewOpt("Spreadsheets"),
		Files: skillFiles(map[string]string{"xlsx/SKILL.md": skillMD("xlsx", "Edits spreadsheets.", "")})})
	if err != nil || named.DisplayName != "Spreadsheets" {
		t.Fatalf("skill with display_name: %v, %v", named, err)
	}

	// The only version cannot go; deleting the newer one makes the first latest.
	if _, err := c.Beta.Skills.Versions.Delete(ctx, second.ID, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Skills.Versions.Delete(ctx, first, anthropic.BetaSkillVersionDeleteParams{SkillID: sk.ID})
	if e := sdkError(t, err, 400, api.InvalidRequest); !strings.Contains(e.Message, "delete the skill instead") {
		t.Fatalf("deleting the only version: %s", e.Message)
	}
	if got, _ := c.Beta.Skills.Get(ctx, sk.ID, anthropic.BetaSkillGetParams{}); got.LatestVersionID != first {
		t.Fatalf("latest after deleting the second version = %s, want %s", got.LatestVersionID, first)
	}
	if _, err := c.Beta.Skills.Delete(ctx, sk.ID, anthropic.BetaSkillDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Skills.Versions.Get(ctx, first, anthropic.BetaSkillVersionGetParams{SkillID: sk.ID})
	sdkError(t, err, 404, api.NotFound)
}

func TestSkillUploadsRefusedStoreNothing(t *testing.T) {
	ctx := context.Background()
	s := newSDKServer(t)
	c := s.client
	base, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(map[string]string{"base/SKILL.md": skillMD("base", "A base skill.", "")})})
	if err != nil {
		t.Fatal(err)
	}
	good := skillMD("demo", "A demo skill.", "")
	big := strings.Repeat("x", app.MaxSkillUploadBytes/2+1)
	cases := []struct {
		name   string
		files  map[string]string
		status int
		want   string
	}{
		{"no SKILL.md", map[string]string{"demo/README.md": "hi"}, 400, "no SKILL.md"},
		{"SKILL.md not at the folder's root", map[string]string{"demo/sub/SKILL.md": good}, 400, "no SKILL.md"},
		{"a path leaving its folder", map[string]string{"demo/SKILL.md": good, "demo/../../etc/passwd": "x"}, 400, "leaves the skill's folder"},
		{"an absolute path", map[string]string{"demo/SKILL.md": good, "/etc/passwd": "x"}, 400, "absolute path"},
		{"two top-level folders", map[string]string{"demo/SKILL.md": good, "other/x.txt": "x"}, 400, "one top-level folder"},
		{"a file outside any folder", map[string]string{"SKILL.md": good}, 400, "not inside a folder"},
		{"no front matter", map[string]string{"demo/SKILL.md": "# Demo\n"}, 400, "front matter"},
		{"no description", map[string]string{"demo/SKILL.md": "---\nname: demo\n---\n"}, 400, "no description"},
		{"a name with capitals", map[string]string{"demo/SKILL.md": skillMD("Demo_Skill", "d", "")}, 400, "lowercase letters"},
		{"a name over 64 characters", map[string]string{"demo/SKILL.md": skillMD(strings.Repeat("a", 65), "d", "")}, 400, "limit is 64"},
		{"a description over 1024 characters", map[string]string{"demo/SKILL.md": skillMD("demo", strings.Repeat("d", 1025), "")}, 400, "limit is 1024"},
		{"an XML tag in the description", map[string]string{"demo/SKILL.md": skillMD("demo", "Use <system>this</system>", "")}, 400, "XML tag"},
		{"over the size limit", map[string]string{"demo/SKILL.md": good, "demo/a.bin": big, "demo/b.bin": big}, 413, "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(tc.files)})
			typ := api.InvalidRequest
			if tc.status == 413 {
				typ = api.RequestTooLarge
			}
			if e := sdkError(t, err, tc.status, typ); !strings.Contains(e.Message, tc.want) {
				t.Fatalf("message %q; want it to say %q", e.Message, tc.want)
			}
			// The same files as a new version of an existing skill are
			// refused the same way (a name mismatch aside).
			_, err = c.Beta.Skills.Versions.New(ctx, base.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles(tc.files)})
			if err == nil {
				t.Fatal("the refused files were accepted as a version")
			}
		})
	}
	t.Run("a duplicate file", func(t *testing.T) {
		files := []io.Reader{
			anthropic.File(strings.NewReader(good), "demo/SKILL.md", "text/markdown"),
			anthropic.File(strings.NewReader("again"), "demo/SKILL.md", "text/markdown"),
		}
		_, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: files})
		if e := sdkError(t, err, 400, api.InvalidRequest); !strings.Contains(e.Message, "twice") {
			t.Fatalf("message %q", e.Message)
		}
	})
	t.Run("too many files", func(t *testing.T) {
		files := map[string]string{"demo/SKILL.md": good}
		for i := range app.MaxSkillFiles {
			files["demo/f/"+strings.Repeat("x", 1)+string(rune('a'+i%26))+strings.Repeat("y", i/26)] = "x"
		}
		_, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(files)})
		if e := sdkError(t, err, 400, api.InvalidRequest); !strings.Contains(e.Message, "at most 500") {
			t.Fatalf("message %q", e.Message)
		}
	})
	t.Run("a version renaming the skill", func(t *testing.T) {
		_, err := c.Beta.Skills.Versions.New(ctx, base.ID, anthropic.BetaSkillVersionNewParams{Files: skillFiles(map[string]string{"demo/SKILL.md": good})})
		if e := sdkError(t, err, 400, api.InvalidRequest); !strings.Contains(e.Message, "keeps its name") {
			t.Fatalf("message %q", e.Message)
		}
	})

	// Nothing of any refused upload was stored.
	list, err := c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != base.ID {
		t.Fatalf("skills after the refusals: %s, %v; want only the base skill", list.RawJSON(), err)
	}
	versions, err := c.Beta.Skills.Versions.List(ctx, base.ID, anthropic.BetaSkillVersionListParams{})
	if err != nil || len(versions.Data) != 1 || versions.Data[0].ID != base.LatestVersionID {
		t.Fatalf("versions of the base skill after the refusals: %s, %v; want its first only", versions.RawJSON(), err)
	}

	// A body that is not multipart is a clear 400.
	req, _ := http.NewRequest("POST", s.url+"/v1/skills", strings.NewReader(`{"files":[]}`))
	req.Header.Set("x-api-key", s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("JSON body: status %d, want 400", res.StatusCode)
	}
}

func TestAgentSkillsAreChecked(t *testing.T) {
	ctx := context.Background()
	s := newSDKServer(t)
	c := s.client
	sk, err := c.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(map[string]string{"notes/SKILL.md": skillMD("notes", "Takes notes.", "")})})
	if err != nil {
		t.Fatal(err)
	}
	newAgent := func(skills ...anthropic.BetaManagedAgentsSkillParamsUnion) (*anthropic.BetaManagedAgentsAgent, error) {
		return c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "with-skills", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: api.ScriptedModel}, Skills: skills})
	}
	custom := func(id, version string) anthropic.BetaManagedAgentsSkillParamsUnion {
		p := &anthropic.BetaManagedAgentsCustomSkillParams{SkillID: id}
		if version != "" {
			p.Version = param.NewOpt(version)
		}
		return anthropic.BetaManagedAgentsSkillParamsUnion{OfCustom: p}
	}

	agent, err := newAgent(custom(sk.ID, sk.LatestVersionID))
	if err != nil {
		t.Fatal(err)
	}
	if len(agent.Skills) != 1 || agent.Skills[0].SkillID != sk.ID || agent.Skills[0].Version != sk.LatestVersionID {
		t.Fatalf("agent's skills = %s; want the pinned version", agent.RawJSON())
	}

	refusals := []struct {
		name  string
		skill anthropic.BetaManagedAgentsSkillParamsUnion
		want  string
	}{
		{"an anthropic skill", anthropic.BetaManagedAgentsSkillParamsUnion{OfAnthropic: &anthropic.BetaManagedAgentsAnthropicSkillParams{SkillID: "pdf"}}, "self-hosted memstore server cannot provide"},
		{"a missing skill", custom("skill_01JZZZZZZZZZZZZZZZZZZZZZZZ", ""), "does not exist"},
		{"a missing version", custom(sk.ID, "skillver_01JZZZZZZZZZZZZZZZZZZZZZZZ"), "does not exist"},
	}
	for _, tc := range refusals {
		_, err := newAgent(tc.skill)
		if e := sdkError(t, err, 400, api.InvalidRequest); !strings.Contains(e.Message, tc.want) {
			t.Fatalf("%s: message %q; want it to say %q", tc.name, e.Message, tc.want)
		}
	}
	agents, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	if err != nil || len(agents.Data) != 1 || agents.Data[0].ID != agent.ID {
		t.Fatalf("agents after the refusals: %v, %v; want only the first", agents, err)
	}
}
