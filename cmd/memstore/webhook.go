package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["webhook"] = command{summary: "manage webhook endpoints (create, list, get, update, delete, rotate-secret, deliveries)", run: noun("webhook", map[string]verb{
		"create":        {summary: "create an endpoint: --url and --events (comma-separated); prints its signing secret, shown once", run: webhookCreate},
		"list":          {summary: "list webhook endpoints", run: webhookList},
		"get":           idVerb("show a webhook endpoint", "webhook-id", (*client.Client).GetWebhook),
		"update":        {summary: "change an endpoint's --url, --events, --name, --description or --state enabled|disabled", run: webhookUpdate},
		"delete":        {summary: "delete a webhook endpoint", run: webhookDelete},
		"rotate-secret": idVerb("replace an endpoint's signing secret (prints the new one, shown once)", "webhook-id", (*client.Client).RegenerateWebhookSecret),
		"deliveries":    {summary: "list an endpoint's deliveries with every attempt (status, latency, response excerpt)", run: webhookDeliveries},
	})}
}

// webhookFields registers the flags create and update share; a flag left
// unset is nil.
func webhookFields(fs interface {
	Func(name, usage string, fn func(string) error)
}) *api.WebhookEndpointParams {
	var p api.WebhookEndpointParams
	str := func(dst **string) func(string) error { return func(s string) error { *dst = &s; return nil } }
	fs.Func("url", "the HTTPS URL deliveries are POSTed to", str(&p.URL))
	fs.Func("name", "a short label", str(&p.Name))
	fs.Func("description", "notes about the endpoint", str(&p.Description))
	fs.Func("events", "event types to deliver, comma-separated (session.status_run_started, …)", func(s string) error {
		p.EnabledEvents = strings.Split(s, ",")
		return nil
	})
	return &p
}

func webhookCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	p := webhookFields(fs)
	_, c, err := cli.connect(fs, args, "[flags] --url URL --events TYPE[,TYPE…]", 0, 0)
	if err != nil {
		return err
	}
	made, err := c.CreateWebhook(ctx, *p)
	if err != nil {
		return err
	}
	fmt.Fprintln(cli.stderr, "The signing secret is shown only now: give it to the receiver (memstore worker webhook --webhook-secret, or the SDK's Unwrap).")
	return cli.print(made)
}

func webhookList(ctx context.Context, cli *cliContext, args []string) error {
	_, c, err := cli.connect(cli.flags(), args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var all []api.WebhookEndpoint
	after := ""
	for {
		page, err := c.ListWebhooks(ctx, after, api.MaxListLimit)
		if err != nil {
			return err
		}
		all = append(all, page.Data...)
		if !page.HasMore || page.LastID == nil {
			return cli.print(all)
		}
		after = *page.LastID
	}
}

func webhookUpdate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	p := webhookFields(fs)
	fs.Func("state", "enabled or disabled (enabling clears the reason memstore disabled it for)", func(s string) error { p.State = &s; return nil })
	pos, c, err := cli.connect(fs, args, "[flags] <webhook-id>", 1, 1)
	if err != nil {
		return err
	}
	e, err := c.UpdateWebhook(ctx, pos[0], *p)
	if err != nil {
		return err
	}
	return cli.print(e)
}

func webhookDelete(ctx context.Context, cli *cliContext, args []string) error {
	pos, c, err := cli.connect(cli.flags(), args, "[flags] <webhook-id>", 1, 1)
	if err != nil {
		return err
	}
	if err := c.DeleteWebhook(ctx, pos[0]); err != nil {
		return err
	}
	return cli.print(map[string]string{"id": pos[0], "type": "webhook_endpoint_deleted"})
}

func webhookDeliveries(ctx context.Context, cli *cliContext, args []string) error {
	pos, c, err := cli.connect(cli.flags(), args, "[flags] <webhook-id>", 1, 1)
	if err != nil {
		return err
	}
	page, err := c.ListWebhookDeliveries(ctx, pos[0], api.MaxListLimit)
	if err != nil {
		return err
	}
	return cli.print(page.Data)
}

// workerWebhook is `memstore worker webhook`: a worker that webhooks wake
// instead of a poll loop. It listens on --listen for the deliveries of an
// endpoint subscribed to session.status_run_started.
func workerWebhook(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("worker webhook", stderr)
	var f workerFlags
	f.register(fs)
	listen := fs.String("listen", "127.0.0.1:8090", "address to receive webhook deliveries on")
	secret := fs.String("webhook-secret", envOr("MEMSTORE_WEBHOOK_SECRET", ""), "the endpoint's signing secret (whsec_…) (env MEMSTORE_WEBHOOK_SECRET)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; every setting is a flag", fs.Arg(0))
	}
	w, err := f.newWorker(stderr, "", nil)
	if err != nil {
		return err
	}
	h, err := w.NewWebhookHandler(*secret)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick a free address with --listen)", *listen, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "worker webhook listening on %s\n", ln.Addr())
	onForceQuit(ctx, w.Abandon)
	runErr := h.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return runErr
}
