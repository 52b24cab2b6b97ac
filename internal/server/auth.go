package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/storage"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	storage.Credential
}

// Caller is p as the service layer knows it: the actor its writes are
// attributed to, and the credential its log lines name.
func (p Principal) Caller() app.Caller {
	return app.Caller{Actor: p.Actor(), LogKey: "credential_id", LogID: p.ID}
}

// Actor is who a write made by p is attributed to in the version history.
func (p Principal) Actor() storage.Actor {
	if p.Kind == storage.SessionsToken {
		return storage.Actor{Kind: storage.ActorSession, ID: p.SessionID}
	}
	return storage.Actor{Kind: storage.ActorAPIKey, ID: p.ID}
}

// credentialFrom reads the secret from x-api-key or Authorization: Bearer.
func credentialFrom(r *http.Request) string { return credentialFromHeader(r.Header) }

// credentialFromHeader is credentialFrom over a request's headers alone
// (the MCP tools see no more).
func credentialFromHeader(hd http.Header) string {
	if k := strings.TrimSpace(hd.Get("x-api-key")); k != "" {
		return k
	}
	if h := hd.Get("Authorization"); h != "" {
		if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
	}
	return ""
}

// authenticate resolves the request's credential. It answers 401 with a
// message that says what to send when the credential is missing or unknown.
func (s *Server) authenticate(r *http.Request) (Principal, error) {
	return s.authenticateSecret(r.Context(), credentialFrom(r))
}

// authenticateSecret is authenticate for a secret already read.
func (s *Server) authenticateSecret(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, apiErrorf(api.Authentication, "missing credentials: send an API key in the x-api-key header (or Authorization: Bearer <token>); `memstore serve` prints the admin key on first start and writes it to <data>/admin.key")
	}
	c, err := s.app.Credentials.Verify(ctx, secret)
	if errors.Is(err, storage.ErrNotFound) {
		return Principal{}, apiErrorf(api.Authentication, "invalid credentials: the key or token is unknown or revoked; check for a typo or mint a new one")
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{Credential: c}, nil
}

// handler is the signature of every authenticated endpoint: it returns an
// error to be answered with the envelope.
type handler func(w http.ResponseWriter, r *http.Request, p Principal) error

// authed wraps h with authentication.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err == nil {
			noteCredential(r, p)
			err = h(w, r, p)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}
}

// requireAPIKey refuses every credential but a workspace API key.
func requireAPIKey(p Principal) error {
	if p.Kind == storage.APIKey {
		return nil
	}
	return apiErrorf(permission, "this endpoint needs a workspace API key (x-api-key), not the %s that was sent", kindName(p.Kind))
}
