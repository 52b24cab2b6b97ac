package server

import (
	"net/http"
	"slices"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/ids"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

// webhookRoutes serve the official SDK's Beta.Organizations.Webhooks, and
// memstore's own listing of an endpoint's deliveries.
func (s *Server) webhookRoutes() {
	s.mux.HandleFunc("POST /v1/organizations/webhooks", s.authed(s.createWebhook))
	s.mux.HandleFunc("GET /v1/organizations/webhooks", s.authed(s.listWebhooks))
	s.mux.HandleFunc("GET /v1/organizations/webhooks/{webhook}", s.authed(s.getWebhook))
	s.mux.HandleFunc("POST /v1/organizations/webhooks/{webhook}", s.authed(s.updateWebhook))
	s.mux.HandleFunc("DELETE /v1/organizations/webhooks/{webhook}", s.authed(s.deleteWebhook))
	s.mux.HandleFunc("POST /v1/organizations/webhooks/{webhook}/regenerate_signing_secret", s.authed(s.regenerateWebhookSecret))
	s.mux.HandleFunc("GET /v1/organizations/webhooks/{webhook}/deliveries", s.authed(s.listWebhookDeliveries))
}

const listWebhooks = "GET /v1/organizations/webhooks"

func webhookID(r *http.Request) (string, error) {
	id := r.PathValue("webhook")
	return id, checkID(ids.Webhook, "webhook endpoint", id)
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	var req api.WebhookEndpointParams
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	made, err := s.app.Webhooks.Create(r.Context(), req, p.Caller())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, made)
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	e, err := s.store.GetWebhookEndpoint(r.Context(), id)
	if err != nil {
		return orMissing(err, "webhook endpoint", id, listWebhooks)
	}
	writeJSON(w, http.StatusOK, e.Shown())
	return nil
}

// listWebhooks answers in the SDK's Page shape (data, has_more, first_id,
// last_id; after_id, before_id, limit, order). An organization has few
// endpoints, so they are read whole and paged here.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	q := r.URL.Query()
	limit, err := listLimitParam(q, api.MaxListLimit, false)
	if err != nil {
		return err
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return apiErrorf(invalidRequest, "order must be asc or desc, not %q", order)
	}
	all, err := s.store.ListWebhookEndpoints(r.Context(), storage.ListQuery{})
	if err != nil {
		return err
	}
	if order == "asc" {
		slices.Reverse(all)
	}
	if after := q.Get("after_id"); after != "" {
		i := slices.IndexFunc(all, func(e webhooks.Endpoint) bool { return e.ID == after })
		all = all[i+1:] // an unknown id (i = -1) starts at the beginning
	}
	if before := q.Get("before_id"); before != "" {
		if i := slices.IndexFunc(all, func(e webhooks.Endpoint) bool { return e.ID == before }); i >= 0 {
			all = all[:i]
		}
	}
	page := api.WebhookEndpointPage{Data: []api.WebhookEndpoint{}, HasMore: len(all) > limit}
	for _, e := range all[:min(limit, len(all))] {
		page.Data = append(page.Data, e.Shown())
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	var req api.WebhookEndpointParams
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	e, err := s.app.Webhooks.Update(r.Context(), id, req, p.Caller())
	if err != nil {
		return orMissing(err, "webhook endpoint", id, listWebhooks)
	}
	writeJSON(w, http.StatusOK, e.Shown())
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	if err := s.app.Webhooks.Delete(r.Context(), id, p.Caller()); err != nil {
		return orMissing(err, "webhook endpoint", id, listWebhooks)
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "webhook_endpoint_deleted"})
	return nil
}

// regenerateWebhookSecret replaces the signing secret at once: deliveries
// from then on, retries included, are signed with the new one.
func (s *Server) regenerateWebhookSecret(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	secret, err := s.app.Webhooks.RegenerateSecret(r.Context(), id, p.Caller())
	if err != nil {
		return orMissing(err, "webhook endpoint", id, listWebhooks)
	}
	writeJSON(w, http.StatusOK, api.WebhookSigningSecret{SigningSecret: secret})
	return nil
}

func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := requireAPIKey(p); err != nil {
		return err
	}
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	l, err := listParams(r.URL.Query(), "webhook_deliveries", api.MaxListLimit, false)
	if err != nil {
		return err
	}
	list, err := s.store.ListWebhookDeliveries(r.Context(), id, l.query(false))
	if err != nil {
		return orMissing(err, "webhook endpoint", id, listWebhooks)
	}
	writeJSON(w, http.StatusOK, cutPage(l, list, func(d storage.WebhookDelivery) string { return d.Delivery.EventID }, wireDelivery))
	return nil
}

// wireDelivery is a delivery as the API shows it: named by its event's id
// (the webhook-id its receiver saw), with every attempt.
func wireDelivery(d storage.WebhookDelivery) api.WebhookDelivery {
	out := api.WebhookDelivery{ID: d.Delivery.EventID, Type: "webhook_delivery", EventType: d.Delivery.EventType, EndpointID: d.Delivery.EndpointID,
		State: d.Delivery.State, CreatedAt: d.Delivery.CreatedAt, Attempts: make([]api.WebhookAttempt, len(d.Attempts))}
	for i, a := range d.Attempts {
		out.Attempts[i] = api.WebhookAttempt{AttemptedAt: a.AttemptedAt, StatusCode: a.StatusCode, LatencyMS: a.LatencyMS,
			ResponseExcerpt: a.ResponseExcerpt, Error: a.Error}
	}
	return out
}
