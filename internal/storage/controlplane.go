package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
)

// ControlPlane persists environments, their work queue, agents, sessions
// and events (SPEC §3, §4). Environments, work items and queue counts are
// rows of storage's own (Environment, Work, QueueStats); agents, sessions
// and events are the API's documents (see the package doc for why).
type ControlPlane interface {
	Environments
	Agents
	Sessions
	Events
	WorkQueue
}

// Environments persists environments.
type Environments interface {
	CreateEnvironment(ctx context.Context, e Environment) error
	GetEnvironment(ctx context.Context, id string) (Environment, error)
	// ListEnvironments returns environments newest first.
	ListEnvironments(ctx context.Context, q ListQuery) ([]Environment, error)
	// UpdateEnvironment applies fn to the stored environment and saves the
	// result, in one transaction; an error from fn aborts with nothing saved.
	UpdateEnvironment(ctx context.Context, id string, fn func(*Environment) error) (Environment, error)
	// DeleteEnvironment deletes an environment with no sessions, its work
	// items, and revokes its environment keys. ErrEnvironmentInUse when
	// sessions still use it.
	DeleteEnvironment(ctx context.Context, id string) error
}

// Agents persists agents.
type Agents interface {
	CreateAgent(ctx context.Context, a api.Agent) error
	GetAgent(ctx context.Context, id string) (api.Agent, error)
	// ListAgents returns agents newest first.
	ListAgents(ctx context.Context, q ListQuery) ([]api.Agent, error)
	UpdateAgent(ctx context.Context, id string, fn func(*api.Agent) error) (api.Agent, error)
}

// Sessions persists sessions with their resources.
type Sessions interface {
	// CreateSession stores a session, its resources and its first work item,
	// and appends initial, all in one transaction. Every attached memory store must still exist
	// (ErrNotFound) and not be archived (ErrStoreArchived) when it commits,
	// so a store deleted meanwhile is never left attached to a live
	// session.
	CreateSession(ctx context.Context, s api.Session, work Work, initial []api.Event) (api.Session, error)
	GetSession(ctx context.Context, id string) (api.Session, error)
	// ListSessions returns sessions newest first (oldest first with Asc).
	ListSessions(ctx context.Context, q SessionQuery) ([]api.Session, error)
	UpdateSession(ctx context.Context, id string, fn func(*api.Session) error) (api.Session, error)
	// DeleteSession deletes a session with its events and resources, stops
	// its work items and revokes their sessions tokens.
	DeleteSession(ctx context.Context, id string) error
}

// Events persists each session's event log.
type Events interface {
	// AppendEvents appends events to a session's log in one transaction.
	// guard, when not nil, sees the session as that transaction does and
	// may refuse the append: its error is returned as is and nothing is
	// stored. Each event gets an id, a processed_at from the store's clock
	// (nudged a microsecond past the previous event's when the clock has not
	// moved, so that it strictly increases along the log) and the next
	// sequence number; a status event also sets the session's status, and a
	// span.model_request_end adds its model_usage to the session's usage. It
	// returns the stored copies of events.
	AppendEvents(ctx context.Context, sessionID string, events []api.Event, guard AppendGuard) ([]api.Event, error)
	// AppendSteps appends, in one transaction, what step returns for the
	// session as that transaction sees it (round 0), then asks again with
	// those events in the view (round 1, …) until step returns none or
	// MaxStepRounds have run, and returns the view as it is afterwards.
	// A runtime's steps that follow one another with nothing slow between
	// them (session.status_running, an answer, session.status_idle) so cost
	// one transaction, and its next step is decided from the view returned
	// without reading the session again. An error from step refuses the
	// whole append (nothing is stored) and is returned as is. Events are
	// stamped as AppendEvents stamps them.
	AppendSteps(ctx context.Context, sessionID string, step AppendStep) (SessionView, error)
	// ViewSession returns a session with its whole log, as an agent runtime
	// reads it.
	ViewSession(ctx context.Context, sessionID string) (SessionView, error)
	// ListEvents lists a session's events in sequence order.
	ListEvents(ctx context.Context, sessionID string, q EventQuery) ([]StoredEvent, error)
	// EventSeq returns the sequence number of one event of a session
	// (Last-Event-ID resumption).
	EventSeq(ctx context.Context, sessionID, eventID string) (int64, error)
}

// WorkQueue persists each environment's work items and their leases. The
// rules (what may be claimed, what an ack, a heartbeat, a stop or a lapsed
// lease does) are package workqueue's; a backend loads, locks and saves
// the rows they decide over.
type WorkQueue interface {
	// EnsureWork queues a work item for a session that is neither
	// terminated nor served by a live (not stopped) item. It returns the
	// new item and true, or false when nothing was needed.
	EnsureWork(ctx context.Context, sessionID string, w Work) (Work, bool, error)
	// ExpireLeases settles an environment's lapsed leases: an item whose
	// lease ran out goes back to the queue (its token stops working), except
	// a stopping one, which is stopped. It returns every item it settled, in
	// its new state (queued or stopped).
	ExpireLeases(ctx context.Context, environmentID string) ([]Work, error)
	// ClaimWork settles c.EnvironmentID's lapsed leases as ExpireLeases
	// does, then claims its oldest claimable item for c.WorkerID,
	// atomically (two concurrent claims never get the same item), minting
	// c.Token (stored under c.TokenHash) as its sessions token: one
	// transaction at one reading of the clock. settled lists the items the
	// expiry settled, with the claim or with ErrNoWork (nothing claimable).
	// It reads the environment in that transaction: a missing one is
	// ErrNotFound and an archived one ErrEnvironmentArchived, and neither
	// hands out anything. A backend that keeps the polls of every server
	// (PollLog) notes c's poll in the same statement.
	ClaimWork(ctx context.Context, c Claim) (claimed Work, settled []Work, err error)
	// AckWork confirms a claim: queued → starting. Acking an item already
	// acknowledged returns it unchanged. ErrWorkNotClaimed, ErrWorkStopped.
	AckWork(ctx context.Context, environmentID, workID string) (Work, error)
	// HeartbeatWork renews a lease. A LeaseMismatchError when the
	// expectation is stale (not checked while stopping) or the token is not
	// the current holder's. A stopped item is returned unchanged.
	HeartbeatWork(ctx context.Context, h Heartbeat) (Work, error)
	// StopWork stops an item: force → stopped; otherwise an item with a
	// worker → stopping, one without → stopped. ErrWorkStopped when it
	// already is.
	StopWork(ctx context.Context, environmentID, workID string, force bool) (Work, error)
	GetWork(ctx context.Context, environmentID, workID string) (Work, error)
	// ListWork returns an environment's work items newest first.
	ListWork(ctx context.Context, environmentID string, q ListQuery) ([]Work, error)
	// SessionWork returns every work item a session ever had, in any
	// state (a recovery asks whether one still holds a lease).
	SessionWork(ctx context.Context, sessionID string) ([]Work, error)
	UpdateWork(ctx context.Context, environmentID, workID string, fn func(*Work) error) (Work, error)
	// WorkStats counts an environment's queue.
	WorkStats(ctx context.Context, environmentID string) (QueueStats, error)
}

// ListQuery pages a list ordered by id: After is the last id of the
// previous page (exclusive), Limit the page size.
type ListQuery struct {
	After           string
	Limit           int
	IncludeArchived bool
}

// SessionQuery filters and pages ListSessions.
type SessionQuery struct {
	ListQuery
	Asc           bool
	AgentID       string
	EnvironmentID string
	MemoryStoreID string
	Statuses      []string
}

// SessionFilter is q as the condition and the id order of a query of the
// sessions table, in SQL both backends run (sessions are found by store
// through session_resources). arg adds a query argument and returns its
// placeholder.
func SessionFilter(q SessionQuery, arg func(any) string) (where, order string) {
	conds := []string{"1 = 1"}
	order = "DESC"
	if q.Asc {
		order = "ASC"
	}
	if q.After != "" {
		op := "<"
		if q.Asc {
			op = ">"
		}
		conds = append(conds, "id "+op+" "+arg(q.After))
	}
	if !q.IncludeArchived {
		conds = append(conds, "archived_at IS NULL")
	}
	if q.AgentID != "" {
		conds = append(conds, "agent_id = "+arg(q.AgentID))
	}
	if q.EnvironmentID != "" {
		conds = append(conds, "environment_id = "+arg(q.EnvironmentID))
	}
	if q.MemoryStoreID != "" {
		conds = append(conds, "id IN (SELECT session_id FROM session_resources WHERE memory_store_id = "+arg(q.MemoryStoreID)+")")
	}
	if len(q.Statuses) > 0 {
		conds = append(conds, "status IN "+inArgs(q.Statuses, arg))
	}
	return strings.Join(conds, " AND "), order
}

// inArgs is the "(…)" of an IN over vals, one argument each.
func inArgs(vals []string, arg func(any) string) string {
	marks := make([]string, len(vals))
	for i, v := range vals {
		marks[i] = arg(v)
	}
	return "(" + strings.Join(marks, ", ") + ")"
}

// EventQuery pages ListEvents: events with AfterSeq < seq (or seq <
// BeforeSeq with Desc), of Types when set.
type EventQuery struct {
	AfterSeq  int64
	BeforeSeq int64 // 0: no bound
	Desc      bool
	Limit     int
	Types     []string
}

// EventFilter is q over the log of sessionID as the condition and the seq
// order of a query of the session_events table, in SQL both backends run.
// arg adds a query argument and returns its placeholder.
func EventFilter(sessionID string, q EventQuery, arg func(any) string) (where, order string) {
	conds := []string{"session_id = " + arg(sessionID), "seq > " + arg(q.AfterSeq)}
	if q.BeforeSeq > 0 {
		conds = append(conds, "seq < "+arg(q.BeforeSeq))
	}
	if len(q.Types) > 0 {
		conds = append(conds, "type IN "+inArgs(q.Types, arg))
	}
	order = "ASC"
	if q.Desc {
		order = "DESC"
	}
	return strings.Join(conds, " AND "), order
}

// StoredEvent is an event with its position in the session's log.
type StoredEvent struct {
	Seq   int64
	Event api.Event
}

// Environment is an environment row. ConfigType is how its sessions run
// (memstore runs only self-hosted ones).
type Environment struct {
	ID          string
	Name        string
	Description *string // nil: none
	ConfigType  string
	Scope       string
	Metadata    map[string]string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ArchivedAt  *time.Time
}

// Work is a work item row: what the API shows of the item and the lease
// bookkeeping it does not (who holds the item, until when, with which
// token). State is one of the API's work states (api.WorkQueued, …), the
// values the schema allows.
type Work struct {
	ID            string
	EnvironmentID string
	// SessionID is the session the item serves.
	SessionID string
	State     string
	Metadata  map[string]string
	CreatedAt time.Time
	// QueuedAt is when the item (re)entered the queue: claims go oldest
	// first.
	QueuedAt time.Time
	// ClaimedAt and WorkerID describe the current claim (nil and "" while
	// queued and unclaimed).
	ClaimedAt *time.Time
	WorkerID  string
	// LeaseExpiresAt is when the current claim or lease lapses;
	// LeaseTTLSeconds the TTL last granted.
	LeaseExpiresAt  *time.Time
	LeaseTTLSeconds int64
	// TokenID is the credential id of the current claim's sessions token.
	TokenID string
	// When the item was acknowledged, started (first heartbeat), last
	// renewed, asked to stop and stopped; nil until then.
	AcknowledgedAt    *time.Time
	StartedAt         *time.Time
	LatestHeartbeatAt *time.Time
	StopRequestedAt   *time.Time
	StoppedAt         *time.Time
}

// QueueStats counts an environment's queued items: Depth those nobody
// claimed, Pending those claimed but not yet acknowledged, OldestQueuedAt
// when the oldest of either entered the queue (nil for an empty queue).
type QueueStats struct {
	Depth          int64
	Pending        int64
	OldestQueuedAt *time.Time
}

// Claim asks ClaimWork for an item.
type Claim struct {
	EnvironmentID string
	WorkerID      string
	// ReclaimOlderThan, when positive, also offers items claimed but not
	// acknowledged for at least that long.
	ReclaimOlderThan time.Duration
	// ClaimTTL is how long the claim holds before an ack or heartbeat.
	ClaimTTL time.Duration
	// Token is the sessions token credential to mint for the claim (ID set;
	// Kind, EnvironmentID, SessionID and WorkID are filled in), stored under
	// TokenHash.
	Token     Credential
	TokenHash string
	// PolledAt, when not zero, is when WorkerID polled, for a backend
	// that keeps the polls (PollLog) to note; zero for a poll's later
	// rounds, which wait in the same request.
	PolledAt time.Time
}

// Heartbeat asks HeartbeatWork to renew a lease.
type Heartbeat struct {
	EnvironmentID string
	WorkID        string
	// Expected is the last_heartbeat the worker saw (api.NoHeartbeat first).
	Expected string
	// TTL is the lease to grant from now.
	TTL time.Duration
	// TokenID is the sessions token the beat was sent with; "" for an API
	// key or environment key. A token of an earlier claim never renews.
	TokenID string
}

// HeartbeatToken renders a heartbeat time as the last_heartbeat token.
func HeartbeatToken(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// SessionView is what an agent runtime sees of a session: the session, its
// whole event log (oldest first), the sequence number of the log's last
// event (0 for an empty log) and whether a live work item serves it.
type SessionView struct {
	Session  api.Session
	Log      []api.Event
	Seq      int64
	WorkLive bool
}

// AppendGuard decides, inside an append's transaction, whether the append
// may go ahead given the session as it is then. It is how a client event is
// refused atomically with the log it was checked against, and how an agent
// runtime appends a reaction only if the log still calls for it. It may run
// on another goroutine, in a transaction shared with appends to other
// sessions whose rows stay locked meanwhile: it must decide from v alone,
// never wait, and never call the store.
type AppendGuard func(v SessionView) error

// AppendStep says what to append to a session in round round of one
// AppendSteps, seeing the view as the transaction does (with the events of
// earlier rounds in its Log; its Seq stays the log's before the append,
// since the events are stored together after the last round). It may be called again for a transaction retried, so it
// must decide from its arguments alone; like an AppendGuard it may run on
// another goroutine while other sessions' rows are locked, so it never
// waits and never calls the store.
type AppendStep func(v SessionView, round int) ([]api.Event, error)

// Control-plane errors, translated by the HTTP layer.
var (
	ErrNoWork           = errors.New("storage: no claimable work")
	ErrWorkStopped      = errors.New("storage: work item is stopped")
	ErrWorkNotClaimed   = errors.New("storage: work item is not claimed")
	ErrEnvironmentInUse = errors.New("storage: environment has sessions")
	// ErrEnvironmentArchived refuses a claim: an archived environment's
	// queue hands out nothing.
	ErrEnvironmentArchived = errors.New("storage: environment is archived")
)

// LeaseMismatchError refuses a heartbeat whose expectation is stale: Current
// is the lease as stored (the 412's details.current_state).
type LeaseMismatchError struct {
	Current Work
}

func (e *LeaseMismatchError) Error() string {
	return fmt.Sprintf("storage: heartbeat precondition failed for %s (state %s)", e.Current.ID, e.Current.State)
}

// SessionResourceRow is one row of a session's resources, as a backend
// reads a page's resources in one query.
type SessionResourceRow struct {
	SessionID string
	Resource  api.SessionResource
}

// AttachResources gives each session of a page its resources, in the order
// rows lists them (a backend reads them ordered by position).
func AttachResources(sessions []api.Session, rows []SessionResourceRow) {
	byID := make(map[string][]api.SessionResource, len(sessions))
	for _, r := range rows {
		byID[r.SessionID] = append(byID[r.SessionID], r.Resource)
	}
	for i := range sessions {
		sessions[i].Resources = byID[sessions[i].ID]
	}
}
