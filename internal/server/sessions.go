package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// Session limits.
const (
	maxSessionTitleChars = 1000
	maxInitialEvents     = 50
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

// MountSlug is the folder name of a store in a session (SPEC §4): the
// name lowercased, every run of characters other than a-z and 0-9 turned
// into one "-", with leading and trailing "-" trimmed; the store id when
// nothing is left.
func MountSlug(name, storeID string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	if slug := strings.Trim(b.String(), "-"); slug != "" {
		return slug
	}
	return storeID
}

// mountPaths gives each attached store its folder under prefix, in
// attachment order. Two stores whose names slug alike get "-2", "-3", …
// (the first keeps the bare slug), skipping any suffix already taken, so
// every folder of a session is distinct.
func mountPaths(prefix string, names, storeIDs []string) []string {
	used := map[string]bool{}
	out := make([]string, len(names))
	for i := range names {
		slug := MountSlug(names[i], storeIDs[i])
		cand := slug
		for n := 2; used[cand]; n++ {
			cand = fmt.Sprintf("%s-%d", slug, n)
		}
		used[cand] = true
		out[i] = path.Join(prefix, cand)
	}
	return out
}

// reference is how a new session names an object it needs: the body's
// field, the object's kind, id prefix and listing, what the field is for
// (said when it is missing) and why an archived object is refused.
type reference struct {
	field, kind, prefix, list string
	need, archived            string
}

var (
	sessionAgent = reference{field: "agent", kind: "agent", prefix: ids.Agent, list: listAgents,
		need: "send the id of an agent (create one with POST /v1/agents)", archived: "new sessions cannot use it"}
	sessionEnvironment = reference{field: "environment_id", kind: "environment", prefix: ids.Environment, list: listEnvironments,
		need: "the self-hosted environment whose workers will serve the session", archived: "new sessions cannot start on it"}
)

// live gets the object ref names by id through get, refusing a missing
// id, a malformed one, one that names nothing, and an archived object
// (archivedAt), each with what to do.
func live[T any](ctx context.Context, ref reference, id string, get func(context.Context, string) (T, error), archivedAt func(T) *time.Time) (T, error) {
	var zero T
	if id == "" {
		return zero, apiErrorf(invalidRequest, "%s is required: %s", ref.field, ref.need)
	}
	if err := checkIDIn(ref.field, ref.prefix, ref.kind, id); err != nil {
		return zero, err
	}
	v, err := get(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return zero, missing(ref.field, ref.kind, id, ref.list)
	}
	if err != nil {
		return zero, err
	}
	if archivedAt(v) != nil {
		return zero, apiErrorf(invalidRequest, "%s %s is archived; %s", ref.kind, id, ref.archived)
	}
	return v, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.CreateSessionRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	ctx := r.Context()

	if req.Agent.Type != "" {
		return apiErrorf(invalidRequest, "agent.type %q is not supported: name the agent by id, or as {\"type\":\"agent\",\"id\":\"agent_…\"}; memstore has no per-session overrides", req.Agent.Type)
	}
	ag, err := live(ctx, sessionAgent, req.Agent.ID, s.store.GetAgent, func(a api.Agent) *time.Time { return a.ArchivedAt })
	if err != nil {
		return err
	}
	if req.Agent.Version != 0 && req.Agent.Version != ag.Version {
		return apiErrorf(notFound, "agent %s has no version %d; its current version is %d", ag.ID, req.Agent.Version, ag.Version)
	}

	env, err := live(ctx, sessionEnvironment, req.EnvironmentID, s.store.GetEnvironment, func(e storage.Environment) *time.Time { return e.ArchivedAt })
	if err != nil {
		return err
	}

	if req.Title != nil {
		if err := validate.Text("title", *req.Title, maxSessionTitleChars); err != nil {
			return err
		}
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return err
	}
	if len(req.VaultIDs) > 0 {
		return apiErrorf(invalidRequest, "vault_ids: memstore has no vaults; leave vault_ids out")
	}
	if len(req.InitialEvents) > maxInitialEvents {
		return apiErrorf(invalidRequest, "initial_events has %d events; at most %d are allowed", len(req.InitialEvents), maxInitialEvents)
	}
	for i, e := range req.InitialEvents {
		if e.Type != api.EventUserMessage {
			return apiErrorf(invalidRequest, "initial_events[%d]: type %q is not accepted; a session starts from user.message events only", i, e.Type)
		}
	}

	res, err := s.sessionResources(ctx, req.Resources)
	if err != nil {
		return err
	}

	now := s.now()
	sess := api.Session{
		ID: ids.NewAt(ids.Session, now), Type: "session", EnvironmentID: env.ID, Title: req.Title, Metadata: req.Metadata,
		Agent:     ag.SessionAgent,
		Resources: res, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now,
	}
	for i := range sess.Resources {
		sess.Resources[i].CreatedAt, sess.Resources[i].UpdatedAt = now, now
		sess.Resources[i].ID = ids.NewAt(ids.Resource, now)
	}
	if err := agent.Check(storage.SessionView{Session: sess, WorkLive: true}, req.InitialEvents); err != nil {
		return err
	}
	work := storage.Work{ID: ids.NewAt(ids.Work, now), CreatedAt: now}
	sess, err = s.store.CreateSession(ctx, sess, work, req.InitialEvents)
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrStoreArchived):
		// Checked above; only a delete or archive racing this request gets here.
		return apiErrorf(api.Conflict, "resources: a memory store was deleted or archived while the session was being created; check the stores and create the session again")
	case err != nil:
		return err
	}
	s.app.Work.Queued(env.ID)
	s.app.Sessions.LogChanged(sess.ID)
	if len(req.InitialEvents) > 0 {
		s.app.Sessions.React(ctx, sess.ID)
		if sess, err = s.store.GetSession(ctx, sess.ID); err != nil {
			return orMissing(err, "session", sess.ID, listSessions)
		}
	}
	s.log.InfoContext(ctx, "session created", "session_id", sess.ID, "environment_id", env.ID,
		"work_id", work.ID, "agent_id", ag.ID, "memory_stores", len(res))
	writeJSON(w, http.StatusOK, s.wireSession(sess))
	return nil
}

// sessionResources validates the requested resources and resolves them to
// attachments with their snapshots and mount paths.
func (s *Server) sessionResources(ctx context.Context, reqs []api.SessionResourceParams) ([]api.SessionResource, error) {
	var (
		out      []api.SessionResource
		names    []string
		storeIDs []string
		seen     = map[string]int{}
	)
	if len(reqs) > api.MaxSessionMemoryStores {
		return nil, apiErrorf(invalidRequest, "resources: a session attaches at most %d memory stores; got %d", api.MaxSessionMemoryStores, len(reqs))
	}
	for i, rp := range reqs {
		if rp.Type != api.ResourceMemoryStore {
			if rp.Type == "" {
				return nil, apiErrorf(invalidRequest, "resources[%d]: type is required; send {\"type\":\"memory_store\",\"memory_store_id\":\"memstore_…\"}", i)
			}
			return nil, apiErrorf(invalidRequest, "resources[%d]: type %q is not accepted on a self-hosted environment; only memory_store resources are", i, rp.Type)
		}
		if rp.MemoryStoreID == "" {
			return nil, apiErrorf(invalidRequest, "resources[%d].memory_store_id is required", i)
		}
		if j, dup := seen[rp.MemoryStoreID]; dup {
			return nil, apiErrorf(invalidRequest, "resources[%d]: memory store %s is already attached as resources[%d]; attach each store once", i, rp.MemoryStoreID, j)
		}
		seen[rp.MemoryStoreID] = i
		access := rp.Access
		switch access {
		case "":
			access = api.AccessReadWrite
		case api.AccessReadWrite, api.AccessReadOnly:
		default:
			return nil, apiErrorf(invalidRequest, "resources[%d].access must be %q or %q, got %q", i, api.AccessReadWrite, api.AccessReadOnly, rp.Access)
		}
		if rp.Instructions != nil {
			if err := validate.Text(fmt.Sprintf("resources[%d].instructions", i), *rp.Instructions, api.MaxResourceInstructions); err != nil {
				return nil, err
			}
		}
		field := fmt.Sprintf("resources[%d].memory_store_id", i)
		if err := checkIDIn(field, ids.MemoryStore, "memory store", rp.MemoryStoreID); err != nil {
			return nil, err
		}
		store, err := s.store.GetMemoryStore(ctx, rp.MemoryStoreID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, missing(field, "memory store", rp.MemoryStoreID, listMemoryStores)
		}
		if err != nil {
			return nil, err
		}
		if store.Archived() {
			return nil, apiErrorf(invalidRequest, "resources[%d]: memory store %s is archived; archived stores cannot be attached to new sessions", i, store.ID)
		}
		out = append(out, api.SessionResource{
			Type: api.ResourceMemoryStore, MemoryStoreID: store.ID, Access: access,
			Name: store.Name, Description: store.Description, Instructions: rp.Instructions,
		})
		names = append(names, store.Name)
		storeIDs = append(storeIDs, store.ID)
	}
	for i, mp := range mountPaths(s.cfg.MountPrefix, names, storeIDs) {
		out[i].MountPath = mp
	}
	return out, nil
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
