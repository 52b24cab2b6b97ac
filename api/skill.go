package api

import "time"

// Skill is a skill as the official SDK's Beta.Skills reads it.
type Skill struct {
	ID              string      `json:"id"`
	Type            string      `json:"type"` // "skill"
	DisplayName     string      `json:"display_name"`
	LatestVersionID string      `json:"latest_version_id"`
	Source          SkillSource `json:"source"`
	CreatedAt       time.Time   `json:"created_at"`
	UpdatedAt       time.Time   `json:"updated_at"`
}

// SkillSource says where a skill comes from; a memstore server holds only
// "custom" skills, the ones its users upload.
type SkillSource struct {
	Type string `json:"type"`
}

// SkillVersion is one immutable version of a skill (Beta.Skills.Versions).
// Name is the skill's slug, the folder its files live in.
type SkillVersion struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"` // "skill_version"
	SkillID     string    `json:"skill_id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// DeletedSkill and DeletedSkillVersion answer the deletes.
type DeletedSkill struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "skill_deleted"
}

type DeletedSkillVersion struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "skill_version_deleted"
}
