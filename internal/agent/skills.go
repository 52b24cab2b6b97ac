package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// sessionSkill is what the runtime reads of a session's skills entry: the
// server pins each to a version at session creation and adds that
// version's name and description.
type sessionSkill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// skillsSection tells the model which skills it has and where each one's
// instructions are, so that it reads a skill's SKILL.md when a task calls
// for it instead of working without it. The worker puts every skill in
// skills/<name>/ of the session's working directory before the first tool
// call. "" when the agent has no skills.
func skillsSection(entries []json.RawMessage) string {
	var skills []sessionSkill
	for _, raw := range entries {
		var s sessionSkill
		if json.Unmarshal(raw, &s) == nil && s.Name != "" {
			skills = append(skills, s)
		}
	}
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Skills\n\nYou have skills: folders of instructions and scripts for particular tasks, in skills/ of your working directory (read only). When a task matches a skill's description, read its SKILL.md first and follow it; it may point to other files in its folder.\n")
	for _, s := range skills {
		fmt.Fprintf(&b, "\n- %s: %s\n  Instructions: skills/%s/SKILL.md", s.Name, s.Description, s.Name)
	}
	return b.String()
}
