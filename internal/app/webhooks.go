package app

import (
	"context"
	"slices"
	"strings"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/egress"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/validate"
	"github.com/memstore/memstore/internal/webhooks"
	"github.com/memstore/memstore/internal/webhooks/dispatcher"
)

const (
	maxWebhookDescriptionChars = 1024
	maxWebhookURLBytes         = 2048
)

// Webhooks creates and changes webhook endpoints under one set of rules
// (where a URL may point, which events exist), and owns the dispatcher
// that sends their deliveries (App.RunWebhooks).
type Webhooks struct {
	app      *App
	egress   egress.Policy
	dispatch *dispatcher.Dispatcher
}

func newWebhooks(a *App) *Webhooks {
	w := &Webhooks{app: a, egress: a.egress()}
	w.dispatch = dispatcher.New(dispatcher.Config{Store: a.store, Logger: a.log, Now: a.now, Policy: a.cfg.Webhooks.Policy, Egress: w.egress, Metrics: a.metrics})
	return w
}

// check validates the fields a creation or an update sets.
func (w *Webhooks) check(ctx context.Context, req api.WebhookEndpointParams) error {
	if req.URL != nil {
		if len(*req.URL) > maxWebhookURLBytes {
			return api.Errorf(api.InvalidRequest, "url is %d bytes; the limit is %d", len(*req.URL), maxWebhookURLBytes)
		}
		if err := w.egress.CheckURL(ctx, "url", *req.URL); err != nil {
			return api.Errorf(api.InvalidRequest, "%v", err)
		}
	}
	if req.EnabledEvents != nil {
		if err := webhooks.CheckTypes(req.EnabledEvents); err != nil {
			return api.Errorf(api.InvalidRequest, "%v", err)
		}
	}
	if req.Name != nil && *req.Name != "" {
		if err := validate.Name("name", *req.Name); err != nil {
			return err
		}
	}
	if req.Description != nil {
		if err := validate.Text("description", *req.Description, maxWebhookDescriptionChars); err != nil {
			return err
		}
	}
	if req.State != nil && *req.State != webhooks.StateEnabled && *req.State != webhooks.StateDisabled {
		return api.Errorf(api.InvalidRequest, "state must be %q or %q, not %q", webhooks.StateEnabled, webhooks.StateDisabled, *req.State)
	}
	return nil
}

// Create validates and stores an endpoint with a new signing secret; the
// returned object is the only place the secret is shown. A refusal is an
// *api.Error.
func (w *Webhooks) Create(ctx context.Context, req api.WebhookEndpointParams, by Caller) (api.NewWebhookEndpoint, error) {
	if req.URL == nil {
		return api.NewWebhookEndpoint{}, api.Errorf(api.InvalidRequest, "url is required: the HTTPS URL deliveries are sent to")
	}
	if req.EnabledEvents == nil {
		return api.NewWebhookEndpoint{}, api.Errorf(api.InvalidRequest, "enabled_events is required; valid types: %s", strings.Join(webhooks.Types, ", "))
	}
	if req.State != nil {
		return api.NewWebhookEndpoint{}, api.Errorf(api.InvalidRequest, "state cannot be set at creation: an endpoint starts enabled; update it to disable it")
	}
	if err := w.check(ctx, req); err != nil {
		return api.NewWebhookEndpoint{}, err
	}
	now := w.app.now()
	e := webhooks.Endpoint{WebhookEndpoint: api.WebhookEndpoint{ID: ids.NewAt(ids.Webhook, now), URL: *req.URL,
		EnabledEvents: slices.Clone(req.EnabledEvents), State: webhooks.StateEnabled, CreatedAt: now, UpdatedAt: now},
		Secret: dispatcher.NewSecret()}
	if req.Name != nil {
		e.Name = *req.Name
	}
	if req.Description != nil {
		e.Description = *req.Description
	}
	e.WebhookEndpoint = e.Shown()
	if err := w.app.store.CreateWebhookEndpoint(ctx, e); err != nil {
		return api.NewWebhookEndpoint{}, err
	}
	w.app.log.InfoContext(ctx, "webhook endpoint created", "webhook_endpoint_id", e.ID, "url", e.URL, "enabled_events", e.EnabledEvents, by.attr())
	return api.NewWebhookEndpoint{WebhookEndpoint: e.WebhookEndpoint, SigningSecret: e.Secret}, nil
}

// Update validates and applies the fields req sets. Setting state either
// way clears the disabled reason: it explains only a disabling memstore
// did by itself. An unknown endpoint is storage.ErrNotFound.
func (w *Webhooks) Update(ctx context.Context, id string, req api.WebhookEndpointParams, by Caller) (webhooks.Endpoint, error) {
	if err := w.check(ctx, req); err != nil {
		return webhooks.Endpoint{}, err
	}
	e, err := w.app.store.UpdateWebhookEndpoint(ctx, id, func(e *webhooks.Endpoint) error {
		if req.URL != nil {
			e.URL = *req.URL
		}
		if req.Name != nil {
			e.Name = *req.Name
		}
		if req.Description != nil {
			e.Description = *req.Description
		}
		if req.EnabledEvents != nil {
			e.EnabledEvents = slices.Clone(req.EnabledEvents)
		}
		if req.State != nil {
			e.State, e.DisabledReason = *req.State, ""
		}
		e.UpdatedAt = w.app.now()
		return nil
	})
	if err != nil {
		return e, err
	}
	w.app.log.InfoContext(ctx, "webhook endpoint updated", "webhook_endpoint_id", id, by.attr())
	return e, nil
}

// Delete removes an endpoint and its deliveries; none is sent after. An
// unknown endpoint is storage.ErrNotFound.
func (w *Webhooks) Delete(ctx context.Context, id string, by Caller) error {
	if err := w.app.store.DeleteWebhookEndpoint(ctx, id); err != nil {
		return err
	}
	w.app.log.InfoContext(ctx, "webhook endpoint deleted", "webhook_endpoint_id", id, by.attr())
	return nil
}

// RegenerateSecret replaces an endpoint's signing secret at once:
// deliveries from then on, retries included, are signed with the new one,
// returned here only. An unknown endpoint is storage.ErrNotFound.
func (w *Webhooks) RegenerateSecret(ctx context.Context, id string, by Caller) (string, error) {
	secret := dispatcher.NewSecret()
	if _, err := w.app.store.UpdateWebhookEndpoint(ctx, id, func(e *webhooks.Endpoint) error {
		e.Secret, e.UpdatedAt = secret, w.app.now()
		return nil
	}); err != nil {
		return "", err
	}
	w.app.log.InfoContext(ctx, "webhook signing secret regenerated", "webhook_endpoint_id", id, by.attr())
	return secret, nil
}
