package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// maxContentBytes is the API's limit on one memory's content.
const maxContentBytes = api.MaxContentBytes

// ownMemories is how many memories the store a run makes for itself starts
// with, so that the first gets and updates have something to read.
const ownMemories = 20

// eventSessions is how many sessions event.append writes to; followers are
// spread over them.
const eventSessions = 2

// fixture is what a run works on: its stores and the control-plane objects
// the session and work operations need. What the run made for itself is
// removed by tearDown; a seeded data set stays.
type fixture struct {
	admin  *client.Client
	worker *client.Client // the work environment's key
	stores []*storeState
	// ownStore is set when the run made its single store for itself.
	ownStore bool

	agentID       string
	eventsEnvID   string
	workEnvID     string
	workKeyID     string
	eventSessions []string

	mu            sync.Mutex
	claimSessions []string // sessions work.claim made, deleted at the end
}

// storeState is one store and the memories the run knows in it.
type storeState struct {
	id       string
	mu       sync.Mutex
	memories []string
	// cursor is the newest change-feed sequence any worker has seen.
	cursor atomic.Int64
}

func (s *storeState) add(id string) {
	s.mu.Lock()
	s.memories = append(s.memories, id)
	s.mu.Unlock()
}

// pick is a random known memory of the store ("" when it has none).
func (s *storeState) pick(r *rand.Rand) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.memories) == 0 {
		return ""
	}
	return s.memories[r.IntN(len(s.memories))]
}

func (fx *fixture) storeIDs() []string {
	out := make([]string, len(fx.stores))
	for i, s := range fx.stores {
		out[i] = s.id
	}
	return out
}

// setUp makes the stores (seeded or the run's own) and the agent,
// environments, key and sessions the session operations use. A failure
// removes what was made so far.
func setUp(ctx context.Context, cfg Config) (_ *fixture, err error) {
	fx := &fixture{admin: cfg.Client}
	defer func() {
		if err != nil {
			fx.tearDown(cfg)
		}
	}()
	stamp := time.Now().UTC().Format("20060102-150405")
	if cfg.ReuseSeed > 0 {
		if err := fx.findSeeded(ctx, cfg.ReuseSeed); err != nil {
			return nil, err
		}
	} else if cfg.Seed == nil {
		fx.ownStore = true
		if err := fx.makeStores(ctx, cfg, Shape{Stores: 1, Memories: ownMemories, Versions: 1, ContentBytes: cfg.ContentBytes}, "bench-"+stamp); err != nil {
			return nil, err
		}
	} else if err := fx.makeStores(ctx, cfg, *cfg.Seed, SeedName(time.Now())); err != nil {
		return nil, err
	}
	for _, s := range fx.stores {
		snap, err := fx.admin.Snapshot(ctx, s.id, "")
		if err != nil {
			return nil, fmt.Errorf("read the change-feed position of store %s: %w", s.id, err)
		}
		s.cursor.Store(snap.Sequence)
		snap.Close()
	}

	agent, err := fx.admin.CreateAgent(ctx, api.CreateAgentRequest{Name: "bench-" + stamp, Model: api.ModelConfig{ID: api.ScriptedModel}})
	if err != nil {
		return nil, fmt.Errorf("create the bench agent: %w", err)
	}
	fx.agentID = agent.ID
	// Two environments: the event sessions' work items stay queued in one,
	// while work.claim drains the other.
	env, err := fx.admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "bench-events-" + stamp})
	if err != nil {
		return nil, fmt.Errorf("create the bench environments: %w", err)
	}
	fx.eventsEnvID = env.ID
	env, err = fx.admin.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: "bench-work-" + stamp})
	if err != nil {
		return nil, fmt.Errorf("create the bench environments: %w", err)
	}
	fx.workEnvID = env.ID
	key, err := fx.admin.CreateEnvironmentKey(ctx, env.ID, api.CreateEnvironmentKeyRequest{Name: "memstore bench"})
	if err != nil {
		return nil, fmt.Errorf("create the bench environment key: %w", err)
	}
	fx.workKeyID = key.ID
	fx.worker = fx.admin.With(client.WithBearerToken(key.Key), client.WithWorkerID("memstore-bench"))
	for range eventSessions {
		s, err := fx.admin.CreateSession(ctx, api.CreateSessionRequest{Agent: api.AgentRef{ID: agent.ID}, EnvironmentID: fx.eventsEnvID, Title: ptr("memstore bench events")})
		if err != nil {
			return nil, fmt.Errorf("create the bench sessions: %w", err)
		}
		fx.eventSessions = append(fx.eventSessions, s.ID)
	}
	return fx, nil
}

// SeedPrefix starts the names of the stores --seed makes; --reuse-seed
// finds them by it.
const SeedPrefix = "bench-seed-"

// SeedName is the name of the seed made at t; store i of n is named
// SeedStoreName(SeedName(t), i, n).
func SeedName(t time.Time) string { return SeedPrefix + t.UTC().Format("20060102-150405") }

// SeedStoreName is the name of store i (from 0) of the n a seed makes.
func SeedStoreName(seed string, i, n int) string {
	if n == 1 {
		return seed
	}
	return fmt.Sprintf("%s-%d", seed, i+1)
}

// SeedPath is the path of the n-th memory (from 0) of a seeded store.
func SeedPath(n int) string { return fmt.Sprintf("/seed/%04d/m%06d.md", n/1000, n) }

// SeedDescription is the description of a seeded store.
const SeedDescription = "made by memstore bench"

// findSeeded takes up to n stores an earlier seed left, with their
// memories.
func (fx *fixture) findSeeded(ctx context.Context, n int) error {
	for st, err := range fx.admin.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{Limit: 100}) {
		if err != nil {
			return fmt.Errorf("list the seeded stores: %w", err)
		}
		if !strings.HasPrefix(st.Name, SeedPrefix) {
			continue
		}
		s := &storeState{id: st.ID}
		for m, err := range fx.admin.ListAllMemories(ctx, st.ID, client.ListMemoriesParams{Limit: 100}) {
			if err != nil {
				return fmt.Errorf("list the memories of seeded store %s: %w", st.ID, err)
			}
			if m.Memory != nil {
				s.add(m.Memory.ID)
			}
		}
		// An interrupted seed can leave stores empty (a direct seed makes
		// them as it goes, an API seed all first): measuring on them would
		// measure only refusals.
		if len(s.memories) == 0 {
			continue
		}
		fx.stores = append(fx.stores, s)
		if len(fx.stores) == n {
			break
		}
	}
	if len(fx.stores) == 0 {
		return fmt.Errorf("no store with memories made by an earlier --seed (named %s…) on this server: seed one first", SeedPrefix)
	}
	return nil
}

// makeStores creates shape.Stores stores and writes their memories with
// cfg.Concurrency writers, reporting progress as the "seed" phase.
func (fx *fixture) makeStores(ctx context.Context, cfg Config, shape Shape, name string) error {
	for i := range shape.Stores {
		n := SeedStoreName(name, i, shape.Stores)
		st, err := fx.admin.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: n, Description: ptr(SeedDescription)})
		if err != nil {
			return fmt.Errorf("create store %s: %w", n, err)
		}
		fx.stores = append(fx.stores, &storeState{id: st.ID})
	}
	total := int64(shape.Stores) * int64(shape.Memories) * int64(shape.Versions)
	var done atomic.Int64
	start := time.Now()
	stop := StartProgress(cfg.Progress, func() Progress {
		return Progress{Phase: "seed", Elapsed: time.Since(start), Done: done.Load(), Total: total}
	})
	defer stop()

	type job struct {
		store *storeState
		n     int
	}
	jobs := make(chan job)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				path := SeedPath(j.n)
				m, err := fx.admin.CreateMemory(ctx, j.store.id, api.CreateMemoryRequest{Path: path, Content: Content(shape.ContentBytes, path, 1)})
				for v := 2; err == nil && v <= shape.Versions; v++ {
					c := Content(shape.ContentBytes, path, v)
					_, err = fx.admin.UpdateMemory(ctx, j.store.id, m.ID, api.UpdateMemoryRequest{Content: &c})
					done.Add(1)
				}
				if err != nil {
					once.Do(func() { first = fmt.Errorf("seed %s in store %s: %w", path, j.store.id, err); cancel() })
					continue
				}
				done.Add(1)
				j.store.add(m.ID)
			}
		}()
	}
feed:
	for _, s := range fx.stores {
		for n := range shape.Memories {
			select {
			case jobs <- job{s, n}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// tearDown removes what the run made for itself; it carries on past a
// failure and returns the first, so one refusal leaves as little behind as
// possible. It runs even when the run was interrupted.
func (fx *fixture) tearDown(cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	fx.mu.Lock()
	sessions := append(append([]string(nil), fx.claimSessions...), fx.eventSessions...)
	fx.mu.Unlock()
	start := time.Now()
	var removed atomic.Int64
	stop := StartProgress(cfg.Progress, func() Progress {
		return Progress{Phase: "cleanup", Elapsed: time.Since(start), Done: removed.Load(), Total: int64(len(sessions))}
	})
	defer stop()
	for _, id := range sessions {
		_, err := fx.admin.DeleteSession(ctx, id)
		if client.IsStatus(err, 404) {
			err = nil
		}
		note("delete session "+id, err)
		removed.Add(1)
	}
	if fx.workKeyID != "" {
		_, err := fx.admin.RevokeEnvironmentKey(ctx, fx.workEnvID, fx.workKeyID)
		note("revoke the bench environment key", err)
	}
	for _, env := range []string{fx.eventsEnvID, fx.workEnvID} {
		if env == "" {
			continue
		}
		if _, err := fx.admin.DeleteEnvironment(ctx, env); err != nil {
			_, err = fx.admin.ArchiveEnvironment(ctx, env)
			note("remove environment "+env, err)
		}
	}
	if fx.agentID != "" {
		_, err := fx.admin.ArchiveAgent(ctx, fx.agentID)
		note("archive agent "+fx.agentID, err)
	}
	if fx.ownStore {
		for _, s := range fx.stores {
			_, err := fx.admin.DeleteMemoryStore(ctx, s.id)
			note("delete store "+s.id, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean up what bench made: %w", errors.Join(errs...))
	}
	return nil
}

// follow reads a session's event stream until ctx ends, recording for each
// bench message the delay since its send (carried in its text). A dropped
// stream is resumed where it stopped. It calls opened once its stream is
// first open.
func (fx *fixture) follow(ctx context.Context, sessionID string, rec *recorder, opened func()) {
	defer opened()
	last := ""
	for ctx.Err() == nil {
		s, err := fx.admin.StreamEvents(ctx, sessionID, client.StreamEventsParams{LastEventID: last})
		if err == nil {
			opened()
		}
		if err != nil {
			if ctx.Err() == nil {
				rec.record(OpEventFanout, 0, err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for s.Next() {
			e := s.Event()
			if sent, ok := sentAt(e); ok {
				rec.record(OpEventFanout, time.Since(sent), nil)
			}
		}
		last = s.LastEventID()
		if err := s.Err(); err != nil && ctx.Err() == nil {
			rec.record(OpEventFanout, 0, err)
		}
		s.Close()
	}
}

// benchMessage is how an event.append's text starts; the send time in
// Unix nanoseconds follows.
const benchMessage = "memstore bench "

func sentAt(e api.Event) (time.Time, bool) {
	if e.Type != api.EventUserMessage {
		return time.Time{}, false
	}
	rest, ok := strings.CutPrefix(e.Text(), benchMessage)
	if !ok {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Content is n bytes of text for version v of path: a header line that
// makes every version differ, padded with a repeated sentence.
func Content(n int, path string, v int) string {
	var b strings.Builder
	b.Grow(n)
	fmt.Fprintf(&b, "# %s v%d %d\n", path, v, rand.Uint64())
	for b.Len() < n {
		b.WriteString("The quick agent remembers what it learned. ")
	}
	return b.String()[:n]
}

func ptr[T any](v T) *T { return &v }
