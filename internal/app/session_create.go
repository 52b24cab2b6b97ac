package app

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/agent"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/validate"
)

// maxInitialEvents bounds the events a session is created with.
const maxInitialEvents = 50

// Create checks a new session — its agent and environment live, its
// memory stores attachable, its initial events ones the runtime accepts —
// and makes it with a queued work item, its stores mounted under
// mountPrefix. The environment's workers are woken, and the runtime
// reacts to the initial events before Create returns the session.
func (s *Sessions) Create(ctx context.Context, req api.CreateSessionRequest, mountPrefix string, by Caller) (api.Session, error) {
	if req.Agent.Type != "" {
		return api.Session{}, api.Errorf(api.InvalidRequest, "agent.type %q is not supported: name the agent by id, or as {\"type\":\"agent\",\"id\":\"agent_…\"}; memstore has no per-session overrides", req.Agent.Type)
	}
	ag, err := live(ctx, sessionAgent, req.Agent.ID, s.app.store.GetAgent, func(a api.Agent) *time.Time { return a.ArchivedAt })
	if err != nil {
		return api.Session{}, err
	}
	if req.Agent.Version != 0 && req.Agent.Version != ag.Version {
		return api.Session{}, api.Errorf(api.NotFound, "agent %s has no version %d; its current version is %d", ag.ID, req.Agent.Version, ag.Version)
	}

	env, err := live(ctx, sessionEnvironment, req.EnvironmentID, s.app.store.GetEnvironment, func(e storage.Environment) *time.Time { return e.ArchivedAt })
	if err != nil {
		return api.Session{}, err
	}

	if req.Title != nil {
		if err := validate.Text("title", *req.Title, maxSessionTitleChars); err != nil {
			return api.Session{}, err
		}
	}
	if err := validate.Metadata("metadata", req.Metadata); err != nil {
		return api.Session{}, err
	}
	if err := s.app.Vaults.CheckSessionVaults(ctx, req.VaultIDs); err != nil {
		return api.Session{}, err
	}
	if len(req.InitialEvents) > maxInitialEvents {
		return api.Session{}, api.Errorf(api.InvalidRequest, "initial_events has %d events; at most %d are allowed", len(req.InitialEvents), maxInitialEvents)
	}
	for i, e := range req.InitialEvents {
		if e.Type != api.EventUserMessage {
			return api.Session{}, api.Errorf(api.InvalidRequest, "initial_events[%d]: type %q is not accepted; a session starts from user.message events only", i, e.Type)
		}
	}

	res, err := s.resources(ctx, req.Resources, mountPrefix)
	if err != nil {
		return api.Session{}, err
	}

	resolved := ag.SessionAgent
	if resolved.Skills, err = s.app.Skills.ResolveAgentSkills(ctx, ag.ID, ag.Skills); err != nil {
		return api.Session{}, err
	}

	now := s.app.now()
	sess := api.Session{
		ID: ids.NewAt(ids.Session, now), Type: "session", EnvironmentID: env.ID, Title: req.Title, Metadata: req.Metadata,
		Agent:     resolved,
		Resources: res, Status: api.SessionIdle, CreatedAt: now, UpdatedAt: now, VaultIDs: req.VaultIDs,
	}
	for i := range sess.Resources {
		sess.Resources[i].CreatedAt, sess.Resources[i].UpdatedAt = now, now
		sess.Resources[i].ID = ids.NewAt(ids.Resource, now)
	}
	if err := agent.Check(storage.SessionView{Session: sess, WorkLive: true}, req.InitialEvents); err != nil {
		return api.Session{}, err
	}
	work := storage.Work{ID: ids.NewAt(ids.Work, now), CreatedAt: now}
	sess, err = s.app.store.CreateSession(ctx, sess, work, req.InitialEvents)
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrStoreArchived):
		// Checked above; only a delete or archive racing this request gets here.
		return api.Session{}, api.Errorf(api.Conflict, "resources: a memory store was deleted or archived while the session was being created; check the stores and create the session again")
	case err != nil:
		return api.Session{}, err
	}
	s.app.Work.Queued(env.ID)
	s.LogChanged(sess.ID)
	if len(req.InitialEvents) > 0 {
		s.React(ctx, sess.ID)
		id := sess.ID
		if sess, err = s.app.store.GetSession(ctx, id); errors.Is(err, storage.ErrNotFound) {
			return sess, validate.Missing("", "session", id, "GET /v1/sessions")
		} else if err != nil {
			return sess, err
		}
	}
	s.app.log.InfoContext(ctx, "session created", "session_id", sess.ID, "environment_id", env.ID,
		"work_id", work.ID, "agent_id", ag.ID, "memory_stores", len(res), by.attr())
	return sess, nil
}

// resources checks the memory stores a new session asks for and resolves
// them to attachments, each with its mount path under mountPrefix.
func (s *Sessions) resources(ctx context.Context, reqs []api.SessionResourceParams, mountPrefix string) ([]api.SessionResource, error) {
	var (
		out      []api.SessionResource
		names    []string
		storeIDs []string
		seen     = map[string]int{}
	)
	if len(reqs) > api.MaxSessionMemoryStores {
		return nil, api.Errorf(api.InvalidRequest, "resources: a session attaches at most %d memory stores; got %d", api.MaxSessionMemoryStores, len(reqs))
	}
	for i, rp := range reqs {
		if rp.Type != api.ResourceMemoryStore {
			if rp.Type == "" {
				return nil, api.Errorf(api.InvalidRequest, "resources[%d]: type is required; send {\"type\":\"memory_store\",\"memory_store_id\":\"memstore_…\"}", i)
			}
			return nil, api.Errorf(api.InvalidRequest, "resources[%d]: type %q is not accepted on a self-hosted environment; only memory_store resources are", i, rp.Type)
		}
		if rp.MemoryStoreID == "" {
			return nil, api.Errorf(api.InvalidRequest, "resources[%d].memory_store_id is required", i)
		}
		if j, dup := seen[rp.MemoryStoreID]; dup {
			return nil, api.Errorf(api.InvalidRequest, "resources[%d]: memory store %s is already attached as resources[%d]; attach each store once", i, rp.MemoryStoreID, j)
		}
		seen[rp.MemoryStoreID] = i
		access := rp.Access
		switch access {
		case "":
			access = api.AccessReadWrite
		case api.AccessReadWrite, api.AccessReadOnly:
		default:
			return nil, api.Errorf(api.InvalidRequest, "resources[%d].access must be %q or %q, got %q", i, api.AccessReadWrite, api.AccessReadOnly, rp.Access)
		}
		if rp.Instructions != nil {
			if err := validate.Text(fmt.Sprintf("resources[%d].instructions", i), *rp.Instructions, api.MaxResourceInstructions); err != nil {
				return nil, err
			}
		}
		field := fmt.Sprintf("resources[%d].memory_store_id", i)
		if err := validate.ID(field, ids.MemoryStore, "memory store", rp.MemoryStoreID); err != nil {
			return nil, err
		}
		store, err := s.app.store.GetMemoryStore(ctx, rp.MemoryStoreID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, validate.Missing(field, "memory store", rp.MemoryStoreID, "GET /v1/memory_stores")
		}
		if err != nil {
			return nil, err
		}
		if store.Archived() {
			return nil, api.Errorf(api.InvalidRequest, "resources[%d]: memory store %s is archived; archived stores cannot be attached to new sessions", i, store.ID)
		}
		out = append(out, api.SessionResource{
			Type: api.ResourceMemoryStore, MemoryStoreID: store.ID, Access: access,
			Name: store.Name, Description: store.Description, Instructions: rp.Instructions,
		})
		names = append(names, store.Name)
		storeIDs = append(storeIDs, store.ID)
	}
	for i, mp := range mountPaths(mountPrefix, names, storeIDs) {
		out[i].MountPath = mp
	}
	return out, nil
}

// reference is how a new session names an object it needs: the body's
// field, the object's kind, id prefix and listing, what the field is for
// (said when it is missing) and why an archived object is refused.
type reference struct {
	field, kind, prefix, list string
	need, archived            string
}

var (
	sessionAgent = reference{field: "agent", kind: "agent", prefix: ids.Agent, list: "GET /v1/agents",
		need: "send the id of an agent (create one with POST /v1/agents)", archived: "new sessions cannot use it"}
	sessionEnvironment = reference{field: "environment_id", kind: "environment", prefix: ids.Environment, list: "GET /v1/environments",
		need: "the self-hosted environment whose workers will serve the session", archived: "new sessions cannot start on it"}
)

// live gets the object ref names by id through get, refusing a missing
// id, a malformed one, one that names nothing, and an archived object
// (archivedAt), each with what to do.
func live[T any](ctx context.Context, ref reference, id string, get func(context.Context, string) (T, error), archivedAt func(T) *time.Time) (T, error) {
	var zero T
	if id == "" {
		return zero, api.Errorf(api.InvalidRequest, "%s is required: %s", ref.field, ref.need)
	}
	if err := validate.ID(ref.field, ref.prefix, ref.kind, id); err != nil {
		return zero, err
	}
	v, err := get(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return zero, validate.Missing(ref.field, ref.kind, id, ref.list)
	}
	if err != nil {
		return zero, err
	}
	if archivedAt(v) != nil {
		return zero, api.Errorf(api.InvalidRequest, "%s %s is archived; %s", ref.kind, id, ref.archived)
	}
	return v, nil
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
