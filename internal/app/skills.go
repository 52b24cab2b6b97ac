package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// The limits of one upload: the Agent Skills format's (name, description)
// and memstore's own on what a version may hold, so that a skill stays a
// small bundle of instructions and scripts kept in the database.
const (
	MaxSkillUploadBytes     = 8 << 20
	MaxSkillFiles           = 500
	MaxSkillPathBytes       = 512
	MaxSkillNameChars       = 64
	MaxSkillDescription     = 1024
	MaxSkillDisplayName     = 255
	skillInstructionsFile   = "SKILL.md"
	skillFrontMatterDivider = "---"
)

var (
	skillNamePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	xmlTagPattern    = regexp.MustCompile(`<[/!?]?[A-Za-z][^>]*>`)
)

// UploadedFile is one file of an upload, as the client named it
// ("pdf/SKILL.md").
type UploadedFile struct {
	Name    string
	Content []byte
}

// Skills creates skills and their versions from uploaded files. Every rule
// of an upload is checked before anything is stored, so a refused upload
// leaves nothing behind.
type Skills struct {
	app *App
}

// SkillBundle is an upload that passed every check: the skill's name and
// description from its SKILL.md, and its files relative to its folder.
type SkillBundle struct {
	Name        string
	Description string
	Files       []storage.SkillFile
}

// CheckSkillUpload validates an upload against the Agent Skills format:
// every file in one top-level folder, a SKILL.md at its root whose front
// matter has a valid name and description, no path that leaves the folder,
// no duplicates, within the size and count limits. A refusal is an
// *api.Error saying what to fix.
func CheckSkillUpload(files []UploadedFile) (SkillBundle, error) {
	if len(files) == 0 {
		return SkillBundle{}, api.Errorf(api.InvalidRequest, "files: no files uploaded; send the skill's folder as multipart parts named files, each with its path (for example my-skill/SKILL.md) as the filename")
	}
	if len(files) > MaxSkillFiles {
		return SkillBundle{}, api.Errorf(api.InvalidRequest, "files: %d files uploaded; a skill holds at most %d", len(files), MaxSkillFiles)
	}
	var (
		b     SkillBundle
		top   string
		total int
		seen  = map[string]bool{}
	)
	for _, f := range files {
		rel, folder, err := skillFilePath(f.Name)
		if err != nil {
			return SkillBundle{}, err
		}
		if top == "" {
			top = folder
		} else if folder != top {
			return SkillBundle{}, api.Errorf(api.InvalidRequest, "files: %q is in folder %q but %q is in %q; all files must be in one top-level folder", f.Name, folder, files[0].Name, top)
		}
		if seen[rel] {
			return SkillBundle{}, api.Errorf(api.InvalidRequest, "files: %q is uploaded twice; send each file once", f.Name)
		}
		seen[rel] = true
		total += len(f.Content)
		if total > MaxSkillUploadBytes {
			return SkillBundle{}, api.Errorf(api.RequestTooLarge, "files: the upload is over %d bytes; a skill's files together may hold at most that", MaxSkillUploadBytes)
		}
		b.Files = append(b.Files, storage.SkillFile{Path: rel, Content: f.Content})
	}
	i := slices.IndexFunc(b.Files, func(f storage.SkillFile) bool { return f.Path == skillInstructionsFile })
	if i < 0 {
		return SkillBundle{}, api.Errorf(api.InvalidRequest, "files: no %s at the root of folder %q; a skill's instructions go in %s/%s", skillInstructionsFile, top, top, skillInstructionsFile)
	}
	name, description, err := skillFrontMatter(b.Files[i].Content)
	if err != nil {
		return SkillBundle{}, err
	}
	b.Name, b.Description = name, description
	slices.SortFunc(b.Files, func(x, y storage.SkillFile) int { return strings.Compare(x.Path, y.Path) })
	return b, nil
}

// skillFilePath splits an uploaded name into its top-level folder and its
// path inside it, refusing any name that is absolute, climbs out with "..",
// or is not a clean relative path (links cannot be uploaded: a part is
// always a regular file's bytes).
func skillFilePath(name string) (rel, folder string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", api.Errorf(api.InvalidRequest, "files: %q %s; name each file by its path inside the skill's folder, like my-skill/scripts/run.py", name, why)
	}
	switch {
	case name == "":
		return bad("has no filename")
	case len(name) > MaxSkillPathBytes:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxSkillPathBytes))
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\\"):
		return bad("holds a backslash, a NUL or invalid UTF-8")
	case strings.HasPrefix(name, "/"):
		return bad("is an absolute path")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return bad("leaves the skill's folder")
		}
		if seg == "" || seg == "." {
			return bad("is not a clean path (empty or . segments)")
		}
	}
	folder, rel, ok := strings.Cut(name, "/")
	if !ok {
		return bad("is not inside a folder")
	}
	if path.Clean(name) != name {
		return bad("is not a clean path")
	}
	return rel, folder, nil
}

// skillFrontMatter reads name and description from the YAML front matter
// that opens a SKILL.md, and checks them as the Agent Skills format does.
func skillFrontMatter(content []byte) (name, description string, err error) {
	text := strings.ReplaceAll(string(content), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, skillFrontMatterDivider+"\n")
	if !ok {
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: does not start with front matter; begin it with a line ---, then name: and description:, then ---")
	}
	yamlText, _, ok := strings.Cut(rest, "\n"+skillFrontMatterDivider)
	if !ok {
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: the front matter is not closed; end it with a line ---")
	}
	var fm struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(yamlText), &fm); err != nil {
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: the front matter is not valid YAML: %v", err)
	}
	name, description = strings.TrimSpace(fm.Name), strings.TrimSpace(fm.Description)
	switch {
	case name == "":
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: the front matter has no name; add name: my-skill (lowercase letters, digits and hyphens)")
	case utf8.RuneCountInString(name) > MaxSkillNameChars:
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: name is %d characters; the limit is %d", utf8.RuneCountInString(name), MaxSkillNameChars)
	case !skillNamePattern.MatchString(name):
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: name %q may hold only lowercase letters, digits and single hyphens between them", name)
	case strings.Contains(name, "anthropic") || strings.Contains(name, "claude"):
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: name %q holds a reserved word (anthropic, claude); choose another", name)
	case description == "":
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: the front matter has no description; add description: saying what the skill does and when to use it")
	case utf8.RuneCountInString(description) > MaxSkillDescription:
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: description is %d characters; the limit is %d", utf8.RuneCountInString(description), MaxSkillDescription)
	case xmlTagPattern.MatchString(description):
		return "", "", api.Errorf(api.InvalidRequest, "SKILL.md: description holds an XML tag; describe the skill in plain text")
	}
	return name, description, nil
}

// Create stores a new skill whose first version is files. displayName,
// when empty, is the SKILL.md name.
func (s *Skills) Create(ctx context.Context, displayName string, files []UploadedFile, by Caller) (storage.SkillRow, error) {
	if utf8.RuneCountInString(displayName) > MaxSkillDisplayName || strings.ContainsAny(displayName, "\n\r") {
		return storage.SkillRow{}, api.Errorf(api.InvalidRequest, "display_name: one line of at most %d characters", MaxSkillDisplayName)
	}
	b, err := CheckSkillUpload(files)
	if err != nil {
		return storage.SkillRow{}, err
	}
	if displayName == "" {
		displayName = b.Name
	}
	now := s.app.now()
	sk := storage.SkillRow{ID: ids.NewAt(ids.Skill, now), Name: b.Name, DisplayName: displayName, CreatedBy: by.Actor}
	v := storage.SkillVersionRow{ID: ids.NewAt(ids.SkillVersion, now), Name: b.Name, Description: b.Description, CreatedBy: by.Actor, Files: b.Files}
	sk, err = s.app.store.CreateSkill(ctx, sk, v)
	if err != nil {
		return storage.SkillRow{}, err
	}
	s.app.log.InfoContext(ctx, "skill created", "skill_id", sk.ID, "skill_version_id", v.ID, "name", b.Name, "files", len(b.Files), by.attr())
	return sk, nil
}

// CreateVersion adds files as a new version of skill skillID. Its
// SKILL.md must keep the skill's name: the name is the folder agents find
// the skill in.
func (s *Skills) CreateVersion(ctx context.Context, skillID string, files []UploadedFile, by Caller) (storage.SkillVersionRow, error) {
	b, err := CheckSkillUpload(files)
	if err != nil {
		return storage.SkillVersionRow{}, err
	}
	sk, err := s.app.store.GetSkill(ctx, skillID)
	if err != nil {
		return storage.SkillVersionRow{}, err
	}
	if b.Name != sk.Name {
		return storage.SkillVersionRow{}, api.Errorf(api.InvalidRequest, "SKILL.md: name is %q but this skill is %q; a skill keeps its name in every version (create a new skill for a new name)", b.Name, sk.Name)
	}
	v := storage.SkillVersionRow{ID: ids.NewAt(ids.SkillVersion, s.app.now()), SkillID: skillID, Name: b.Name, Description: b.Description, CreatedBy: by.Actor, Files: b.Files}
	v, err = s.app.store.CreateSkillVersion(ctx, v)
	if err != nil {
		return storage.SkillVersionRow{}, err
	}
	s.app.log.InfoContext(ctx, "skill version created", "skill_id", skillID, "skill_version_id", v.ID, "files", len(b.Files), by.attr())
	return v, nil
}

// ResolveVersion returns the version that version names: an id, or
// "latest" (or nothing) for the skill's newest.
func (s *Skills) ResolveVersion(ctx context.Context, skillID, version string) (storage.SkillVersionRow, error) {
	if version == "" || version == "latest" {
		sk, err := s.app.store.GetSkill(ctx, skillID)
		if err != nil {
			return storage.SkillVersionRow{}, err
		}
		version = sk.LatestVersionID
	}
	return s.app.store.GetSkillVersion(ctx, skillID, version)
}

// DeleteVersion deletes one version; the skill's only version cannot go
// (delete the skill instead).
func (s *Skills) DeleteVersion(ctx context.Context, skillID, versionID string, by Caller) error {
	err := s.app.store.DeleteSkillVersion(ctx, skillID, versionID)
	if errors.Is(err, storage.ErrLastSkillVersion) {
		return api.Errorf(api.InvalidRequest, "version %s is the only version of skill %s; a skill always has one: delete the skill instead (DELETE /v1/skills/%s)", versionID, skillID, skillID)
	}
	if err == nil {
		s.app.log.InfoContext(ctx, "skill version deleted", "skill_id", skillID, "skill_version_id", versionID, by.attr())
	}
	return err
}

// Delete deletes a skill with all its versions.
func (s *Skills) Delete(ctx context.Context, skillID string, by Caller) error {
	err := s.app.store.DeleteSkill(ctx, skillID)
	if err == nil {
		s.app.log.InfoContext(ctx, "skill deleted", "skill_id", skillID, by.attr())
	}
	return err
}

// MaxAgentSkills bounds the skills one agent names.
const MaxAgentSkills = 20

// agentSkill is an entry of an agent's skills, as the SDK sends it.
type agentSkill struct {
	Type    string `json:"type"`
	SkillID string `json:"skill_id"`
	Version string `json:"version,omitempty"`
}

// sessionSkill is an entry of a session's agent's skills: pinned to a
// concrete version, with that version's name (its folder, skills/<name>)
// and description, which the runtime tells the model.
type sessionSkill struct {
	agentSkill
	Name        string `json:"name"`
	Description string `json:"description"`
}

// CheckAgentSkills validates an agent's skills entries: each names a
// custom skill of this server, and the version it pins (if any) exists.
// An anthropic skill is refused: its files are Anthropic's, and a
// self-hosted server has no way to provide them. The entries are returned
// as stored: type, skill_id and the version as given ("latest" or none
// follows the skill's newest).
func (s *Skills) CheckAgentSkills(ctx context.Context, entries []json.RawMessage) ([]json.RawMessage, error) {
	if len(entries) > MaxAgentSkills {
		return nil, api.Errorf(api.InvalidRequest, "skills: %d entries; an agent may have at most %d", len(entries), MaxAgentSkills)
	}
	out := make([]json.RawMessage, 0, len(entries))
	seen := map[string]bool{}
	for i, raw := range entries {
		field := fmt.Sprintf("skills[%d]", i)
		var e agentSkill
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, api.Errorf(api.InvalidRequest, "%s must be an object like {\"type\":\"custom\",\"skill_id\":\"skill_…\",\"version\":\"latest\"}", field)
		}
		switch e.Type {
		case "custom":
		case "anthropic":
			return nil, api.Errorf(api.InvalidRequest, "%s: anthropic skills (%q) are provided by Anthropic's API; a self-hosted memstore server cannot provide them. Upload the skill's files as a custom skill (POST /v1/skills) and reference it with type custom", field, e.SkillID)
		default:
			return nil, api.Errorf(api.InvalidRequest, "%s.type must be \"custom\", not %q", field, e.Type)
		}
		if e.SkillID == "" {
			return nil, api.Errorf(api.InvalidRequest, "%s.skill_id is required: the id of a skill (GET /v1/skills lists them)", field)
		}
		if seen[e.SkillID] {
			return nil, api.Errorf(api.InvalidRequest, "%s: skill %s is listed twice; name each skill once", field, e.SkillID)
		}
		seen[e.SkillID] = true
		if _, err := s.ResolveVersion(ctx, e.SkillID, e.Version); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return nil, api.Errorf(api.InvalidRequest, "%s: skill %s has no version %q: the skill or the version does not exist; GET /v1/skills/%s/versions lists them", field, e.SkillID, cmp.Or(e.Version, "latest"), e.SkillID)
			}
			return nil, err
		}
		b, _ := json.Marshal(e) // a struct of strings always encodes
		out = append(out, b)
	}
	return out, nil
}

// ResolveAgentSkills pins each of a new session's skills entries to a
// concrete version, adding its name and description: "latest" or no version becomes the skill's newest at
// this moment, so the session keeps the files it started with even when a
// version is uploaded while it runs, and its worker downloads exactly what
// the session's agent shows. An entry whose skill or version was deleted
// since the agent was created is refused, saying which and what to do.
func (s *Skills) ResolveAgentSkills(ctx context.Context, agentID string, entries []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(entries))
	for i, raw := range entries {
		var e agentSkill
		if err := json.Unmarshal(raw, &e); err != nil || e.Type != "custom" {
			// Stored entries were checked at the agent's creation; one of
			// another shape is kept as it is, never guessed at.
			out = append(out, raw)
			continue
		}
		v, err := s.ResolveVersion(ctx, e.SkillID, e.Version)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, api.Errorf(api.InvalidRequest, "agent %s: skills[%d]: skill %s has no version %q any more (it or the version was deleted); create an agent whose skills exist (POST /v1/agents) and start the session with it", agentID, i, e.SkillID, cmp.Or(e.Version, "latest"))
		}
		if err != nil {
			return nil, err
		}
		e.Version = v.ID
		b, _ := json.Marshal(sessionSkill{agentSkill: e, Name: v.Name, Description: v.Description}) // a struct of strings always encodes
		out = append(out, b)
	}
	return out, nil
}
