package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newWebhookCommand(s streams) *cobra.Command {
	return newAPINoun(s, "webhook", "manage webhook endpoints (create, list, get, update, delete, rotate-secret, deliveries)", func(cli *cliContext) []*cobra.Command {
		ids := webhookIDs(cli)
		return []*cobra.Command{
			webhookCreateVerb(cli),
			verb("list", "list webhook endpoints", "  memstore webhook list --output table", noArgs, func(ctx context.Context, _ []string) error {
				c, err := cli.client()
				if err != nil {
					return err
				}
				return printAll(cli, allWebhooks(ctx, c))
			}),
			idVerb(cli, "get", "webhook-id", "show a webhook endpoint", "  memstore webhook get $HOOK", ids, (*client.Client).GetWebhook),
			webhookUpdateVerb(cli, ids),
			idVerb(cli, "delete", "webhook-id", "delete a webhook endpoint and its deliveries", "  memstore webhook delete $HOOK", ids,
				func(c *client.Client, ctx context.Context, id string) (map[string]string, error) {
					return map[string]string{"id": id, "type": "webhook_endpoint_deleted"}, c.DeleteWebhook(ctx, id)
				}),
			idVerb(cli, "rotate-secret", "webhook-id", "replace an endpoint's signing secret (prints the new one, shown once)", "  memstore webhook rotate-secret $HOOK", ids,
				(*client.Client).RegenerateWebhookSecret),
			idVerb(cli, "deliveries", "webhook-id", "list an endpoint's newest deliveries with every attempt (status, latency, response excerpt)", "  memstore webhook deliveries $HOOK", ids,
				func(c *client.Client, ctx context.Context, id string) ([]api.WebhookDelivery, error) {
					page, err := c.ListWebhookDeliveries(ctx, id, api.MaxListLimit)
					if err != nil {
						return nil, err
					}
					return page.Data, nil
				}),
		}
	})
}

// webhookIDs completes a webhook endpoint id.
func webhookIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.WebhookEndpoint, error) {
		p, err := c.ListWebhooks(ctx, "", api.MaxListLimit)
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(e api.WebhookEndpoint) (string, string) { return e.ID, e.URL })
}

// allWebhooks yields every endpoint, page after page.
func allWebhooks(ctx context.Context, c *client.Client) func(yield func(api.WebhookEndpoint, error) bool) {
	return func(yield func(api.WebhookEndpoint, error) bool) {
		after := ""
		for {
			page, err := c.ListWebhooks(ctx, after, api.MaxListLimit)
			if err != nil {
				yield(api.WebhookEndpoint{}, err)
				return
			}
			for _, e := range page.Data {
				if !yield(e, nil) {
					return
				}
			}
			if !page.HasMore || page.LastID == nil {
				return
			}
			after = *page.LastID
		}
	}
}

// webhookFields registers the flags create and update share; a flag left
// unset stays nil, so an update changes only what it names.
func webhookFields(fs *pflag.FlagSet, p *api.WebhookEndpointParams) {
	fs.Func("url", "the HTTPS URL deliveries are POSTed to", func(s string) error { p.URL = &s; return nil })
	fs.Func("name", "a short label", func(s string) error { p.Name = &s; return nil })
	fs.Func("description", "notes about the endpoint", func(s string) error { p.Description = &s; return nil })
	fs.StringSliceVar(&p.EnabledEvents, "events", nil, "event types to deliver, comma-separated (session.status_run_started, …)")
}

func webhookCreateVerb(cli *cliContext) *cobra.Command {
	var p api.WebhookEndpointParams
	cmd := verb("create", "create an endpoint for --url delivering --events; prints its signing secret, shown once",
		`  memstore webhook create --url https://hooks.example.com/memstore --events session.status_run_started,session.status_idled`,
		noArgs, func(ctx context.Context, _ []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			made, err := c.CreateWebhook(ctx, p)
			if err != nil {
				return err
			}
			fmt.Fprintln(cli.stderr, "The signing secret is shown only now: give it to the receiver (memstore worker webhook --webhook-secret, or the SDK's Unwrap).")
			return cli.print(made)
		})
	webhookFields(cmd.Flags(), &p)
	return cmd
}

func webhookUpdateVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var p api.WebhookEndpointParams
	cmd := verb("update <webhook-id>", "change an endpoint's --url, --events, --name, --description or --state enabled|disabled",
		"  memstore webhook update $HOOK --state enabled    # after memstore disabled it", argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			e, err := c.UpdateWebhook(ctx, args[0], p)
			if err != nil {
				return err
			}
			return cli.print(e)
		})
	webhookFields(cmd.Flags(), &p)
	cmd.Flags().Func("state", "enabled or disabled (enabling clears the reason memstore disabled it for)", func(s string) error { p.State = &s; return nil })
	cmd.ValidArgsFunction = ids
	return cmd
}
