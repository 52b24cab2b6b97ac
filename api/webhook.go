package api

import "time"

// WebhookEndpoint is an organization webhook endpoint (the SDK's
// BetaOrganizationWebhookEndpoint). The signing secret is only in
// NewWebhookEndpoint, the answer to its creation.
type WebhookEndpoint struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	URL            string    `json:"url"`
	Name           string    `json:"name"`
	Description    string    `json:"description"`
	EnabledEvents  []string  `json:"enabled_events"`
	State          string    `json:"state"`
	DisabledReason string    `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// NewWebhookEndpoint answers a creation: the endpoint and its secret.
type NewWebhookEndpoint struct {
	WebhookEndpoint
	SigningSecret string `json:"signing_secret"`
}

// WebhookEndpointParams creates an endpoint (url and enabled_events
// required) or patches one (every field optional).
type WebhookEndpointParams struct {
	URL           *string  `json:"url,omitempty"`
	Name          *string  `json:"name,omitempty"`
	Description   *string  `json:"description,omitempty"`
	EnabledEvents []string `json:"enabled_events,omitempty"`
	State         *string  `json:"state,omitempty"`
}

// WebhookSigningSecret answers a secret regeneration.
type WebhookSigningSecret struct {
	SigningSecret string `json:"signing_secret"`
}

// WebhookEndpointPage is a page of endpoints in the SDK's Page shape.
type WebhookEndpointPage struct {
	Data    []WebhookEndpoint `json:"data"`
	HasMore bool              `json:"has_more"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
}

// WebhookDelivery is one event's delivery to one endpoint, with its
// attempts (memstore's own: the hosted API does not list deliveries). ID is
// the event's id, the webhook-id header every attempt carries.
type WebhookDelivery struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	EventType  string           `json:"event_type"`
	EndpointID string           `json:"webhook_endpoint_id"`
	State      string           `json:"state"`
	CreatedAt  time.Time        `json:"created_at"`
	Attempts   []WebhookAttempt `json:"attempts"`
}

// WebhookAttempt is one try of a delivery.
type WebhookAttempt struct {
	AttemptedAt time.Time `json:"attempted_at"`
	// StatusCode is the receiver's answer; 0 when none came (Error says
	// why).
	StatusCode      int    `json:"status_code"`
	LatencyMS       int64  `json:"latency_ms"`
	ResponseExcerpt string `json:"response_excerpt"`
	Error           string `json:"error"`
}
