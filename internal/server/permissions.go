package server

import (
	"context"
	"errors"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
)

// Who may call what (SPEC §6): the scopes of environment keys and sessions
// tokens. An API key may do everything.

func kindName(k storage.CredentialKind) string { return strings.ReplaceAll(string(k), "_", " ") }

// requireEnvironmentScope admits an API key, or an environment key of env.
func requireEnvironmentScope(p Principal, env string) error {
	switch {
	case p.Kind == storage.APIKey:
		return nil
	case p.Kind == storage.EnvironmentKey && p.EnvironmentID == env:
		return nil
	case p.Kind == storage.EnvironmentKey:
		return apiErrorf(permission, "this environment key belongs to environment %s, not %s; use that environment's key or an API key", p.EnvironmentID, env)
	default:
		return apiErrorf(permission, "a %s cannot call this endpoint; use the environment key of %s or an API key", kindName(p.Kind), env)
	}
}

// tokenWork returns the work item a sessions token was minted for, if the
// token still works: its item is not stopped and it is the item's current
// claim. (A deleted session revokes its tokens, so they never get here.)
func (s *Server) tokenWork(ctx context.Context, p Principal) (storage.Work, error) {
	w, err := s.store.GetWork(ctx, p.EnvironmentID, p.WorkID)
	if errors.Is(err, storage.ErrNotFound) {
		return w, apiErrorf(permission, "this sessions token's work item %s no longer exists; the token no longer grants access", p.WorkID)
	}
	if err != nil {
		return w, err
	}
	if w.State == api.WorkStopped {
		return w, apiErrorf(permission, "work item %s is stopped, so the sessions token minted for it no longer works; a new claim of the session brings a new token", w.ID)
	}
	if w.TokenID != p.ID {
		return w, apiErrorf(permission, "this sessions token belongs to an earlier claim of work item %s (its lease lapsed or it was reclaimed); it no longer works", w.ID)
	}
	return w, nil
}

// requireSessionScope admits an API key, an environment key of the
// session's environment, or a live sessions token of that session.
func (s *Server) requireSessionScope(ctx context.Context, p Principal, sess api.Session) error {
	switch p.Kind {
	case storage.APIKey:
		return nil
	case storage.EnvironmentKey:
		if p.EnvironmentID != sess.EnvironmentID {
			return apiErrorf(permission, "this environment key belongs to environment %s; session %s runs on %s", p.EnvironmentID, sess.ID, sess.EnvironmentID)
		}
		return nil
	case storage.SessionsToken:
		if p.SessionID != sess.ID {
			return apiErrorf(permission, "this sessions token reaches only its own session %s, not %s", p.SessionID, sess.ID)
		}
		_, err := s.tokenWork(ctx, p)
		return err
	}
	return apiErrorf(permission, "a %s cannot reach sessions", kindName(p.Kind))
}

// memoryStoreAccess decides whether p may use memory store storeID (write
// says whether the request changes it), for the memory-store endpoints:
// an API key may do everything; an environment key nothing; a sessions
// token only the stores attached to its session, writing only where the
// attachment is read_write, and only while its work item runs.
func (s *Server) memoryStoreAccess(ctx context.Context, p Principal, storeID string, write bool) error {
	switch p.Kind {
	case storage.APIKey:
		return nil
	case storage.EnvironmentKey:
		return apiErrorf(permission, "an environment key cannot reach memory stores; the worker uses the sessions token from the work secret, and operators an API key")
	case storage.SessionsToken:
	default:
		return apiErrorf(permission, "a %s cannot reach memory stores", kindName(p.Kind))
	}
	if _, err := s.tokenWork(ctx, p); err != nil {
		return err
	}
	sess, err := s.store.GetSession(ctx, p.SessionID)
	if errors.Is(err, storage.ErrNotFound) {
		return apiErrorf(permission, "this sessions token's session %s is deleted; the token no longer works", p.SessionID)
	}
	if err != nil {
		return err
	}
	for _, r := range sess.Resources {
		if r.Type != api.ResourceMemoryStore || r.MemoryStoreID != storeID {
			continue
		}
		if write && r.Access != api.AccessReadWrite {
			return apiErrorf(permission, "memory store %s is attached to session %s read_only; this sessions token may read it but not change it", storeID, sess.ID)
		}
		return nil
	}
	return apiErrorf(permission, "memory store %s is not attached to session %s; a sessions token reaches only its session's stores", storeID, sess.ID)
}
