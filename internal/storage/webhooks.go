package storage

import (
	"context"
	"time"

	"github.com/memstore/memstore/internal/webhooks"
)

// Webhooks persists webhook endpoints and the outbox of their deliveries.
// Every backend writes the events a change emits (package webhooks decides
// which) in the transaction of that change, one delivery per subscribed
// endpoint, so that a crash can neither lose nor invent one.
type Webhooks interface {
	CreateWebhookEndpoint(ctx context.Context, e webhooks.Endpoint) error
	GetWebhookEndpoint(ctx context.Context, id string) (webhooks.Endpoint, error)
	// ListWebhookEndpoints returns endpoints newest first.
	ListWebhookEndpoints(ctx context.Context, q ListQuery) ([]webhooks.Endpoint, error)
	// UpdateWebhookEndpoint applies fn to the stored endpoint and saves the
	// result in one transaction; an error from fn aborts with nothing saved.
	UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*webhooks.Endpoint) error) (webhooks.Endpoint, error)
	// DeleteWebhookEndpoint deletes an endpoint with its deliveries.
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	// ClaimDeliveries leases to token, at now, up to limit of the pending
	// deliveries of enabled endpoints that webhooks.Pick chooses, atomically:
	// two dispatchers (of one server or of several sharing the database)
	// never hold the same delivery.
	ClaimDeliveries(ctx context.Context, now time.Time, limit int, token string, p webhooks.Policy) ([]webhooks.Delivery, error)
	// FinishDeliveries records a round of deliveries claimed under token,
	// in one transaction: each attempt made, and what p.Finish makes of
	// it (settle the delivery, give it back, disable its endpoint). A
	// delivery gone meanwhile (its endpoint was deleted) is skipped.
	FinishDeliveries(ctx context.Context, token string, results []webhooks.Result, p webhooks.Policy) error
	// PruneWebhookDeliveries deletes the settled (delivered or failed)
	// deliveries created before before, with their attempts and the events
	// no delivery needs any more; it returns how many deliveries went.
	PruneWebhookDeliveries(ctx context.Context, before time.Time) (int64, error)
	// ListWebhookDeliveries lists an endpoint's deliveries newest first,
	// each with its attempts oldest first; After is the last delivery id
	// of the previous page.
	ListWebhookDeliveries(ctx context.Context, endpointID string, q ListQuery) ([]WebhookDelivery, error)
	// DeliveriesStored returns a channel closed once a change made through
	// this handle stores deliveries (its transaction commits) after the
	// call: the dispatcher's cue to claim them (see Outbox).
	DeliveriesStored() <-chan struct{}
}

// WebhookDelivery is a delivery as stored with every attempt made of it,
// oldest first.
type WebhookDelivery struct {
	Delivery webhooks.Delivery
	Attempts []webhooks.Attempt
}
