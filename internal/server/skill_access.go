package server

import (
	"context"
	"errors"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// skillReadAccess decides whether p may read skill skillID and download
// its versions: an API key always; the environment key of an environment
// with a live session whose agent names the skill; a sessions token whose
// session's agent names it, while its work item runs. The last two are
// what a worker (ours or the official SDK's) serves a session with.
func (s *Server) skillReadAccess(ctx context.Context, p Principal, skillID string) error {
	switch p.Kind {
	case storage.APIKey:
		return nil
	case storage.EnvironmentKey:
		ok, err := s.app.Skills.EnvironmentUsesSkill(ctx, p.EnvironmentID, skillID)
		if err != nil {
			return err
		}
		if !ok {
			return apiErrorf(permission, "this environment key reaches only the skills of its environment's sessions' agents, and no live session of environment %s has an agent with skill %s; read it with a workspace API key (x-api-key)", p.EnvironmentID, skillID)
		}
		return nil
	case storage.SessionsToken:
		if _, err := s.tokenWork(ctx, p); err != nil {
			return err
		}
		sess, err := s.store.GetSession(ctx, p.SessionID)
		if errors.Is(err, storage.ErrNotFound) {
			return apiErrorf(permission, "this sessions token's session %s no longer exists; the token no longer grants access", p.SessionID)
		}
		if err != nil {
			return err
		}
		if !app.SessionNamesSkill(sess, skillID) {
			return apiErrorf(permission, "this sessions token reaches only the skills of its session's agent, and session %s's agent has no skill %s", p.SessionID, skillID)
		}
		return nil
	}
	return apiErrorf(permission, "a %s cannot read skills; use a workspace API key (x-api-key)", kindName(p.Kind))
}
