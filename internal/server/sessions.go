package server

import (
	"net/http"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
)

func (s *Server) sessionRoutes() {
	s.mux.HandleFunc("POST /v1/sessions", s.authed(s.createSession))
	s.mux.HandleFunc("GET /v1/sessions", s.authed(s.listSessions))
	s.mux.HandleFunc("GET /v1/sessions/{session}", s.authed(s.getSession))
	s.mux.HandleFunc("POST /v1/sessions/{session}", s.authed(s.updateSession))
	s.mux.HandleFunc("DELETE /v1/sessions/{session}", s.authed(s.deleteSession))
	s.mux.HandleFunc("POST /v1/sessions/{session}/archive", s.authed(s.archiveSession))
}

func sessionID(r *http.Request) (string, error) {
	id := r.PathValue("session")
	return id, checkID(ids.Session, "session", id)
}

// loadSession reads {session} and checks that p may reach it.
func (s *Server) loadSession(r *http.Request, p Principal) (api.Session, error) {
	id, err := sessionID(r)
	if err != nil {
		return api.Session{}, err
	}
	sess, err := s.store.GetSession(r.Context(), id)
	if err != nil {
		return sess, orMissing(err, "session", id, listSessions)
	}
	return sess, s.requireSessionScope(r.Context(), p, sess)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateSessionRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	sess, err := s.app.Sessions.Create(r.Context(), req, s.cfg.MountPrefix, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireSession(sess))
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	sess, err := s.loadSession(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.wireSession(sess))
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	sq := storage.SessionQuery{AgentID: q.Get("agent_id"), EnvironmentID: q.Get("environment_id"), MemoryStoreID: q.Get("memory_store_id"), Statuses: arrayParam(q, "statuses")}
	var err error
	if sq.Asc, err = orderParam(q, false); err != nil {
		return err
	}
	for _, st := range sq.Statuses {
		switch st {
		case api.SessionRescheduling, api.SessionRunning, api.SessionIdle, api.SessionTerminated:
		default:
			return apiErrorf(invalidRequest, "statuses: %q is not a session status (rescheduling, running, idle, terminated)", st)
		}
	}
	kind := "sessions_desc"
	if sq.Asc {
		kind = "sessions_asc"
	}
	l, err := listParams(q, kind, api.MaxListLimit, false)
	if err != nil {
		return err
	}
	archived, err := boolParam(q, "include_archived")
	if err != nil {
		return err
	}
	sq.ListQuery = l.query(archived)
	list, err := s.store.ListSessions(r.Context(), sq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(x api.Session) string { return x.ID }, s.wireSession))
	return nil
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var req api.UpdateSessionRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	sess, err := s.app.Sessions.Update(r.Context(), id, req, p.Caller())
	if err != nil {
		return orMissing(err, "session", id, listSessions)
	}
	writeJSON(w, http.StatusOK, s.wireSession(sess))
	return nil
}

// archiveSession terminates a session (so its worker winds down, with its
// final sync) and hides it from default listings. Irreversible.
func (s *Server) archiveSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	sess, err := s.app.Sessions.Archive(r.Context(), id, p.Caller())
	if err != nil {
		return orMissing(err, "session", id, listSessions)
	}
	writeJSON(w, http.StatusOK, s.wireSession(sess))
	return nil
}

// deleteSession removes a session and its events; its work items stop and
// their sessions tokens stop working at once.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	if err := s.app.Sessions.Delete(r.Context(), id, p.Caller()); err != nil {
		return orMissing(err, "session", id, listSessions)
	}
	writeJSON(w, http.StatusOK, api.Deleted{ID: id, Type: api.SessionDeletedType})
	return nil
}

// sessionDeletedEvent is what a stream sends when its session is deleted
// under it (the log itself is gone).
func sessionDeletedEvent(now time.Time) api.Event {
	return api.Event{ID: ids.NewAt(ids.Event, now), Type: api.EventSessionDeleted, ProcessedAt: &now}
}
