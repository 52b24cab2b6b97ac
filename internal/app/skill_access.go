package app

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// A worker downloads a session's skills with the credential it serves the
// session with — the environment key, or the sessions token of the work
// secret (the official worker's choice) — never a workspace API key. These
// answer whether such a credential reaches a skill: only when the skill is
// one a session it may serve was given.

// liveSessionStatuses are the sessions a worker may still serve.
var liveSessionStatuses = []string{api.SessionRescheduling, api.SessionRunning, api.SessionIdle}

// SessionNamesSkill reports whether the session's agent names skill skillID.
func SessionNamesSkill(sess api.Session, skillID string) bool {
	return slices.ContainsFunc(sess.Agent.Skills, func(raw json.RawMessage) bool {
		var e agentSkill
		return json.Unmarshal(raw, &e) == nil && e.SkillID == skillID
	})
}

// EnvironmentUsesSkill reports whether a session of environment envID that
// is not terminated has an agent naming skill skillID.
func (s *Skills) EnvironmentUsesSkill(ctx context.Context, envID, skillID string) (bool, error) {
	q := storage.SessionQuery{EnvironmentID: envID, Statuses: liveSessionStatuses, ListQuery: storage.ListQuery{Limit: api.MaxListLimit}}
	for {
		page, err := s.app.store.ListSessions(ctx, q)
		if err != nil {
			return false, err
		}
		for _, sess := range page {
			if SessionNamesSkill(sess, skillID) {
				return true, nil
			}
		}
		if len(page) < q.Limit {
			return false, nil
		}
		q.After = page[len(page)-1].ID
	}
}
