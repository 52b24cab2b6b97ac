package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Work item states, in lifecycle order.
const (
	WorkQueued   = "queued"   // waiting to be claimed by a poll
	WorkStarting = "starting" // claimed and acknowledged, no heartbeat yet
	WorkActive   = "active"   // a worker holds the lease
	WorkStopping = "stopping" // a graceful stop was asked; the worker sees it on its next heartbeat
	WorkStopped  = "stopped"  // final
)

// NoHeartbeat is the expected_last_heartbeat a worker sends on the first
// heartbeat of a lease.
const NoHeartbeat = "NO_HEARTBEAT"

// Work queue limits.
const (
	// MaxPollBlockMS caps the long-poll of GET …/work/poll.
	MaxPollBlockMS = 999
	// DefaultLeaseTTLSeconds is the lease granted when a heartbeat does not
	// ask for another; MinLeaseTTLSeconds and MaxLeaseTTLSeconds bound
	// desired_ttl_seconds.
	DefaultLeaseTTLSeconds = 60
	MinLeaseTTLSeconds     = 5
	MaxLeaseTTLSeconds     = 600
	// WorkersPollingWindow is how far back GET …/work/stats counts workers.
	WorkersPollingWindow = 30 * time.Second
)

// Work is one unit of work in an environment's queue: serve one session.
// Secret is set only in the poll response that claims the item.
type Work struct {
	Type              string            `json:"type"` // "work"
	ID                string            `json:"id"`
	EnvironmentID     string            `json:"environment_id"`
	Data              WorkData          `json:"data"`
	State             string            `json:"state"`
	Secret            *string           `json:"secret"`
	Metadata          map[string]string `json:"metadata"`
	CreatedAt         time.Time         `json:"created_at"`
	AcknowledgedAt    *time.Time        `json:"acknowledged_at"`
	StartedAt         *time.Time        `json:"started_at"`
	LatestHeartbeatAt *time.Time        `json:"latest_heartbeat_at"`
	StopRequestedAt   *time.Time        `json:"stop_requested_at"`
	StoppedAt         *time.Time        `json:"stopped_at"`
}

// WorkData names what the work is about: {type:"session", id:"sesn_…"}.
type WorkData struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// WorkSecret is the decoded payload of Work.Secret: the credential the worker
// uses for everything about this item, and where to send it.
type WorkSecret struct {
	SessionsToken string `json:"sessions_token"`
	APIBaseURL    string `json:"api_base_url"`
}

// Encode returns the wire form: URL-safe base64 without padding of the JSON.
func (s WorkSecret) Encode() string {
	b, _ := json.Marshal(s)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeWorkSecret parses the wire form. Padding is tolerated, as other
// encoders add it.
func DecodeWorkSecret(secret string) (WorkSecret, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(secret, "="))
	if err != nil {
		return WorkSecret{}, fmt.Errorf("work secret is not URL-safe base64: %w", err)
	}
	var s WorkSecret
	if err := json.Unmarshal(raw, &s); err != nil {
		return WorkSecret{}, fmt.Errorf("work secret is not a JSON object: %w", err)
	}
	return s, nil
}

// WorkHeartbeat is the response of POST …/work/{id}/heartbeat. LastHeartbeat
// is the token to send as expected_last_heartbeat next time.
type WorkHeartbeat struct {
	Type          string `json:"type"` // "work_heartbeat"
	LastHeartbeat string `json:"last_heartbeat"`
	LeaseExtended bool   `json:"lease_extended"`
	State         string `json:"state"`
	TTLSeconds    int64  `json:"ttl_seconds"`
}

// HeartbeatPreconditionFailed is error_code in the details of the 412 that a
// stale heartbeat gets.
const HeartbeatPreconditionFailed = "heartbeat_precondition_failed"

// WorkLeaseState is the lease as the server holds it, sent in a 412's
// error.details.current_state. LastHeartbeat is nil when there has been none.
type WorkLeaseState struct {
	State         string  `json:"state"`
	TTLSeconds    int64   `json:"ttl_seconds"`
	LastHeartbeat *string `json:"last_heartbeat"`
	LeaseExtended bool    `json:"lease_extended"`
}

// HeartbeatPreconditionDetails is error.details of a stale heartbeat's 412.
type HeartbeatPreconditionDetails struct {
	ErrorCode    string         `json:"error_code"` // HeartbeatPreconditionFailed
	CurrentState WorkLeaseState `json:"current_state"`
}

// Map converts the details to the generic Error.Details form.
func (d HeartbeatPreconditionDetails) Map() map[string]any {
	var m map[string]any
	b, _ := json.Marshal(d)
	json.Unmarshal(b, &m)
	return m
}

// WorkQueueStats is the response of GET …/work/stats. Depth counts queued
// items, Pending claimed items not yet acknowledged; OldestQueuedAt is the
// creation time of the oldest of either; WorkersPolling counts distinct
// Anthropic-Worker-ID values seen polling in the last 30 seconds.
type WorkQueueStats struct {
	Type           string     `json:"type"` // "work_queue_stats"
	Depth          int64      `json:"depth"`
	Pending        int64      `json:"pending"`
	OldestQueuedAt *time.Time `json:"oldest_queued_at"`
	WorkersPolling int64      `json:"workers_polling"`
}

// StopWorkRequest is the body of POST …/work/{id}/stop.
type StopWorkRequest struct {
	Force bool `json:"force,omitempty"`
}

// UpdateWorkRequest is the body of POST …/work/{id}: a metadata merge where a
// key mapped to null (or "") is deleted.
type UpdateWorkRequest struct {
	Metadata map[string]*string `json:"metadata"`
}

// WorkPollParams are the query parameters of GET …/work/poll; WorkerID goes
// in the Anthropic-Worker-ID header.
type WorkPollParams struct {
	BlockMS            int
	ReclaimOlderThanMS int64
	WorkerID           string
}

// Query encodes the parameters; zero values are left out.
func (p WorkPollParams) Query() url.Values {
	q := url.Values{}
	if p.BlockMS > 0 {
		q.Set("block_ms", fmt.Sprint(p.BlockMS))
	}
	if p.ReclaimOlderThanMS > 0 {
		q.Set("reclaim_older_than_ms", fmt.Sprint(p.ReclaimOlderThanMS))
	}
	return q
}

// WorkHeartbeatParams are the query parameters of POST …/work/{id}/heartbeat.
type WorkHeartbeatParams struct {
	ExpectedLastHeartbeat string // NoHeartbeat on the first beat
	DesiredTTLSeconds     int64
}

// Query encodes the parameters; zero values are left out.
func (p WorkHeartbeatParams) Query() url.Values {
	q := url.Values{}
	if p.ExpectedLastHeartbeat != "" {
		q.Set("expected_last_heartbeat", p.ExpectedLastHeartbeat)
	}
	if p.DesiredTTLSeconds > 0 {
		q.Set("desired_ttl_seconds", fmt.Sprint(p.DesiredTTLSeconds))
	}
	return q
}

// WorkListParams are the query parameters of GET …/work.
type WorkListParams struct {
	Limit int
	Page  string
}

// Query encodes the parameters; zero values are left out.
func (p WorkListParams) Query() url.Values {
	q := url.Values{}
	setLimitPage(q, p.Limit, p.Page)
	return q
}
