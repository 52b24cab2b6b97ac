package console

import (
	"errors"
	"net/http"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/webhooks"
)

type webhooksView struct {
	Endpoints []api.WebhookEndpoint
	// Types are the event types an endpoint may subscribe to.
	Types []string
	// New is an endpoint just created, with its secret: shown this once.
	New   *api.NewWebhookEndpoint
	Error string
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, q *request) error {
	return c.showWebhooks(w, r, q, http.StatusOK, webhooksView{})
}

func (c *Console) showWebhooks(w http.ResponseWriter, r *http.Request, q *request, status int, v webhooksView) error {
	eps, err := c.store.ListWebhookEndpoints(r.Context(), storage.ListQuery{})
	if err != nil {
		return err
	}
	for _, e := range eps {
		v.Endpoints = append(v.Endpoints, e.WebhookEndpoint)
	}
	v.Types = webhooks.Types
	return c.render(w, r, q, status, "webhooks", "Webhooks", v)
}

// createWebhook creates an endpoint through the API's own rules
// (where it may point, which events exist) and shows its secret once.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request, q *request) error {
	if err := r.ParseForm(); err != nil {
		return err
	}
	url, name := r.PostFormValue("url"), r.PostFormValue("name")
	req := api.WebhookEndpointParams{URL: &url, EnabledEvents: r.PostForm["events"]}
	if req.EnabledEvents == nil {
		req.EnabledEvents = []string{}
	}
	if name != "" {
		req.Name = &name
	}
	made, err := c.app.Webhooks.Create(r.Context(), req, q.Caller())
	var refused *api.Error
	if errors.As(err, &refused) {
		return c.showWebhooks(w, r, q, http.StatusBadRequest, webhooksView{Error: "Nothing was created: " + refused.Message})
	}
	if err != nil {
		return err
	}
	return c.showWebhooks(w, r, q, http.StatusOK, webhooksView{New: &made})
}
