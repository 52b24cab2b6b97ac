package storage

import (
	"context"
	"errors"
	"time"
)

// Skills persists skills: named bundles of files (a SKILL.md and what it
// refers to) that agents use. A skill is a sequence of immutable versions;
// its files are kept in the database, so every server that shares it
// serves the same bytes and a backup holds them. Which uploads are valid is
// decided before they reach storage (internal/app); storage keeps them
// whole or not at all.
type Skills interface {
	// CreateSkill stores a skill with its first version and that
	// version's files, in one transaction.
	CreateSkill(ctx context.Context, s SkillRow, first SkillVersionRow) (SkillRow, error)
	// CreateSkillVersion adds a version to skill v.SkillID and makes it the
	// latest; ErrNotFound when the skill is gone.
	CreateSkillVersion(ctx context.Context, v SkillVersionRow) (SkillVersionRow, error)
	GetSkill(ctx context.Context, id string) (SkillRow, error)
	// ListSkills returns skills newest first; After is the last id of the
	// previous page.
	ListSkills(ctx context.Context, q ListQuery) ([]SkillRow, error)
	// DeleteSkill deletes a skill with every version and file of it.
	DeleteSkill(ctx context.Context, id string) error
	// GetSkillVersion returns version id of skill skillID, without files.
	GetSkillVersion(ctx context.Context, skillID, id string) (SkillVersionRow, error)
	// ListSkillVersions returns a skill's versions newest first;
	// ErrNotFound when the skill does not exist.
	ListSkillVersions(ctx context.Context, skillID string, q ListQuery) ([]SkillVersionRow, error)
	// SkillVersionFiles returns a version's files ordered by path.
	SkillVersionFiles(ctx context.Context, skillID, id string) ([]SkillFile, error)
	// DeleteSkillVersion deletes a version and its files; the skill's
	// latest becomes the newest version left. ErrLastSkillVersion when it
	// is the skill's only version: a skill always has one.
	DeleteSkillVersion(ctx context.Context, skillID, id string) error
}

// ErrLastSkillVersion refuses to delete the only version of a skill.
var ErrLastSkillVersion = errors.New("storage: the skill's only version")

// SkillRow is a skill as stored. Name is the slug every version shares
// (the SKILL.md front matter name); DisplayName is a free label.
type SkillRow struct {
	ID              string
	Name            string
	DisplayName     string
	LatestVersionID string
	CreatedBy       Actor
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// SkillVersionRow is one immutable version of a skill. Files is set when
// the version is created; reads return it empty (SkillVersionFiles reads
// them).
type SkillVersionRow struct {
	ID          string
	SkillID     string
	Name        string
	Description string
	CreatedBy   Actor
	CreatedAt   time.Time
	Files       []SkillFile
}

// SkillFile is one file of a version, its path relative to the skill's
// folder ("SKILL.md", "scripts/run.py").
type SkillFile struct {
	Path    string
	Content []byte
}
