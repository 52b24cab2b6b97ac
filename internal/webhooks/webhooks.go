// Package webhooks holds the rules of memstore's webhooks, with no I/O of
// their own: which event a change emits and under which name (the official
// SDK's union names), which endpoints receive it, which delivery goes next
// (one at a time per endpoint and session, oldest first), and what a failed
// attempt leads to (exponential backoff for a bounded time, then the
// endpoint is disabled with a reason). Backends call these rules inside the
// transaction of the change, so an event is stored exactly when its change
// is; package dispatcher sends what they stored.
package webhooks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
)

// Event types memstore emits, named as the SDK's BetaWebhookEventDataUnion
// names them.
const (
	SessionCreated           = "session.created"
	SessionUpdated           = "session.updated"
	SessionArchived          = "session.archived"
	SessionDeleted           = "session.deleted"
	SessionStatusRunStarted  = "session.status_run_started"
	SessionStatusIdled       = "session.status_idled"
	SessionRequiresAction    = "session.requires_action"
	SessionStatusTerminated  = "session.status_terminated"
	SessionStatusRescheduled = "session.status_rescheduled"
	EnvironmentCreated       = "environment.created"
	EnvironmentUpdated       = "environment.updated"
	EnvironmentArchived      = "environment.archived"
	EnvironmentDeleted       = "environment.deleted"
	MemoryStoreCreated       = "memory_store.created"
	MemoryStoreArchived      = "memory_store.archived"
	MemoryStoreDeleted       = "memory_store.deleted"
	AgentCreated             = "agent.created"
	AgentUpdated             = "agent.updated"
	AgentArchived            = "agent.archived"
)

// Types lists every event type an endpoint may subscribe to, sorted: the
// ones memstore emits. A subscription to anything else would never fire,
// so it is refused with this list.
var Types = []string{
	AgentArchived, AgentCreated, AgentUpdated,
	EnvironmentArchived, EnvironmentCreated, EnvironmentDeleted, EnvironmentUpdated,
	MemoryStoreArchived, MemoryStoreCreated, MemoryStoreDeleted,
	SessionArchived, SessionCreated, SessionDeleted, SessionRequiresAction,
	SessionStatusIdled, SessionStatusRescheduled, SessionStatusRunStarted,
	SessionStatusTerminated, SessionUpdated,
}

// OrganizationID and WorkspaceID fill the envelope's organization_id and
// workspace_id: a memstore server is one organization with one workspace.
const (
	OrganizationID = "org_memstore"
	WorkspaceID    = "wrkspc_default"
)

// Event is one outbox entry: what happened to which object. OrderKey groups
// the events that must reach an endpoint in order (a session's id for all
// its events).
type Event struct {
	ID        string
	Type      string
	ObjectID  string
	OrderKey  string
	CreatedAt time.Time
}

// Of builds the event of type typ about objectID; its id and time are
// filled in by the backend that stores it.
func Of(typ, objectID string) Event {
	return Event{Type: typ, ObjectID: objectID, OrderKey: objectID}
}

// Envelope is the JSON body of a delivery, in the SDK's UnwrapWebhookEvent
// shape.
type Envelope struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	Data      Data      `json:"data"`
}

// Data is the envelope's data: the object the event is about.
type Data struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	WorkspaceID    string `json:"workspace_id"`
}

// Payload renders e as the body every delivery of it carries.
func Payload(e Event) []byte {
	b, err := json.Marshal(Envelope{ID: e.ID, Type: "event", CreatedAt: e.CreatedAt.UTC(), Data: Data{
		Type: e.Type, ID: e.ObjectID, OrganizationID: OrganizationID, WorkspaceID: WorkspaceID,
	}})
	if err != nil {
		panic(fmt.Sprintf("webhooks: marshal envelope: %v", err)) // only strings and a time
	}
	return b
}

// ForSessionEvent returns the webhook events a session log event emits: the
// status changes.
func ForSessionEvent(sessionID string, e api.Event) []Event {
	switch e.Type {
	case api.EventSessionStatusRunning:
		return []Event{Of(SessionStatusRunStarted, sessionID)}
	case api.EventSessionStatusIdle:
		out := []Event{Of(SessionStatusIdled, sessionID)}
		if e.StopReason != nil && e.StopReason.Type == api.StopRequiresAction {
			out = append(out, Of(SessionRequiresAction, sessionID))
		}
		return out
	case api.EventSessionStatusTerminated:
		return []Event{Of(SessionStatusTerminated, sessionID)}
	case api.EventSessionStatusRescheduled:
		return []Event{Of(SessionStatusRescheduled, sessionID)}
	}
	return nil
}

// ForUpdate returns the event of an update of an object that may archive
// it: archived when archivedAt goes from nil to set, updated otherwise.
func ForUpdate(updated, archived, objectID string, wasArchived, isArchived bool) Event {
	if !wasArchived && isArchived {
		return Of(archived, objectID)
	}
	return Of(updated, objectID)
}

// CheckTypes refuses an empty subscription and any type memstore does not
// emit, naming the valid ones.
func CheckTypes(types []string) error {
	if len(types) == 0 {
		return fmt.Errorf("enabled_events must list at least one event type; valid types: %s", strings.Join(Types, ", "))
	}
	for _, t := range types {
		if !slices.Contains(Types, t) {
			return fmt.Errorf("enabled_events: unknown event type %q; valid types: %s", t, strings.Join(Types, ", "))
		}
	}
	return nil
}

// Endpoint states.
const (
	StateEnabled  = "enabled"
	StateDisabled = "disabled"
)

// Endpoint is a webhook endpoint as stored: its wire form and the secret
// deliveries are signed with (never shown again after it is made).
type Endpoint struct {
	api.WebhookEndpoint
	Secret string
}

// Shown is e as the API and the console show it: never its secret, and
// always a list of events.
func (e Endpoint) Shown() api.WebhookEndpoint {
	out := e.WebhookEndpoint
	out.Type = "webhook_endpoint"
	if out.EnabledEvents == nil {
		out.EnabledEvents = []string{}
	}
	return out
}

// Disable disables e by memstore's own decision, saying why, at at. An
// operator's update that enables it again clears the reason.
func (e *Endpoint) Disable(reason string, at time.Time) {
	e.State, e.DisabledReason, e.UpdatedAt = StateDisabled, reason, at
}

// Recipients returns the ids of the endpoints that receive an event of type
// typ now: the enabled ones subscribed to it. Events that happen while an
// endpoint is disabled are never delivered to it.
func Recipients(endpoints []Endpoint, typ string) []string {
	var out []string
	for _, e := range endpoints {
		if e.State == StateEnabled && slices.Contains(e.EnabledEvents, typ) {
			out = append(out, e.ID)
		}
	}
	return out
}
