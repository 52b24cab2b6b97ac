package console

import (
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

// skillsPage lists skills newest first, a page at a time. Skills are
// uploaded with the CLI or the API (a folder is not something a browser
// form sends well); the console shows what there is.
func (c *Console) skillsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	query := storage.ListQuery{Limit: api.MaxListLimit + 1, After: r.URL.Query().Get("after")}
	if query.After != "" && !ids.Valid(ids.Skill, query.After) {
		return badRequest("this page link is not valid any more; start from the first page")
	}
	skills, err := c.store.ListSkills(r.Context(), query)
	if err != nil {
		return err
	}
	next := ""
	if len(skills) > api.MaxListLimit {
		skills = skills[:api.MaxListLimit]
		next = skills[len(skills)-1].ID
	}
	return c.render(w, r, q, http.StatusOK, "skills", "Skills", struct {
		Skills []storage.SkillRow
		Next   string
	}{skills, next})
}

// skillView is one skill with its versions, and one version (the latest
// unless ?version= names another) with its files and SKILL.md.
type skillView struct {
	Skill    storage.SkillRow
	Versions []storage.SkillVersionRow
	Shown    storage.SkillVersionRow
	Files    []storage.SkillFile
	SkillMD  string
}

// skillVersionsShown bounds the versions a skill's page lists.
const skillVersionsShown = 100

func (c *Console) skillPage(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("skill")
	if !ids.Valid(ids.Skill, id) {
		return notFound("%q is not a skill id; pick one from the list", id)
	}
	var (
		v   skillView
		err error
	)
	v.Skill, err = c.store.GetSkill(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return notFound("skill %s does not exist (it may have been deleted); pick one from the list", id)
	}
	if err != nil {
		return err
	}
	if v.Versions, err = c.store.ListSkillVersions(r.Context(), id, storage.ListQuery{Limit: skillVersionsShown}); err != nil {
		return err
	}
	version := r.URL.Query().Get("version")
	if version == "" {
		version = v.Skill.LatestVersionID
	}
	v.Shown, err = c.store.GetSkillVersion(r.Context(), id, version)
	if errors.Is(err, storage.ErrNotFound) {
		return notFound("skill %s has no version %q (it may have been deleted); pick one from the skill's versions", id, version)
	}
	if err != nil {
		return err
	}
	if v.Files, err = c.store.SkillVersionFiles(r.Context(), id, v.Shown.ID); err != nil {
		return err
	}
	for _, f := range v.Files {
		if f.Path == "SKILL.md" {
			v.SkillMD = string(f.Content)
		}
	}
	return c.render(w, r, q, http.StatusOK, "skill", v.Skill.DisplayName, v)
}
