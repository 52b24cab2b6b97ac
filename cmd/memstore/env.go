package main

import (
	"context"
	"fmt"
	"iter"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newEnvCommand(s streams) *cobra.Command {
	return newAPINoun(s, "env", "manage environments and their keys (create, list, get, archive, delete, key create|list|revoke)", func(cli *cliContext) []*cobra.Command {
		ids := envIDs(cli)
		return []*cobra.Command{
			describedCreate(cli, "create a self-hosted environment", "description", `  ENV=$(memstore env create "build farm" --metadata team=infra -q)`,
				func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (*api.Environment, error) {
					return c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: name, Description: desc, Metadata: md,
						Config: &api.EnvironmentConfig{Type: api.EnvironmentConfigSelfHosted}})
				}),
			listVerb(cli, "list environments", "environments", "  memstore env list --output table",
				func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.Environment, error] {
					return c.ListAllEnvironments(ctx, api.EnvironmentListParams{IncludeArchived: archived, Limit: api.MaxListLimit})
				}),
			idVerb(cli, "get", "environment-id", "show an environment", "  memstore env get $ENV", ids, (*client.Client).GetEnvironment),
			idVerb(cli, "archive", "environment-id", "archive an environment (no new sessions; its keys may no longer poll)", "  memstore env archive $ENV", ids, (*client.Client).ArchiveEnvironment),
			idVerb(cli, "delete", "environment-id", "delete an environment without sessions", "  memstore env delete $ENV", ids, (*client.Client).DeleteEnvironment),
			newNoun("key", "environment keys: key create (-q prints the key alone), key list, key revoke",
				envKeyCreateVerb(cli, ids), envKeyListVerb(cli, ids), envKeyRevokeVerb(cli, ids)),
		}
	})
}

// envIDs completes an environment id.
func envIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.Environment, error) {
		p, err := c.ListEnvironments(ctx, api.EnvironmentListParams{Limit: api.MaxListLimit})
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(e api.Environment) (string, string) { return e.ID, e.Name })
}

func envKeyCreateVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var name string
	cmd := verb("create <environment-id>", "mint an environment key for the workers (shown once)", `  KEY=$(memstore env key create $ENV --name ci -q)`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			k, err := c.CreateEnvironmentKey(ctx, args[0], api.CreateEnvironmentKeyRequest{Name: name})
			if err != nil {
				return err
			}
			fmt.Fprintln(cli.stderr, "The key is shown only now: give it to the workers of this environment (--environment-key or ANTHROPIC_ENVIRONMENT_KEY).")
			if cli.quiet {
				// What a script wants from a new key is the key.
				_, err := fmt.Fprintln(cli.stdout, k.Key)
				return err
			}
			return cli.print(k)
		})
	cmd.Flags().StringVar(&name, "name", "", "a name to recognise the key by")
	cmd.ValidArgsFunction = ids
	return cmd
}

func envKeyListVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("list <environment-id>", "list an environment's live keys (never their secrets)", "  memstore env key list $ENV",
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			return printAll(cli, c.ListAllEnvironmentKeys(ctx, args[0], api.EnvironmentKeyListParams{Limit: api.MaxListLimit}))
		})
	cmd.ValidArgsFunction = ids
	return cmd
}

func envKeyRevokeVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("revoke <environment-id> <key-id>", "revoke an environment key at once, everywhere", "  memstore env key revoke $ENV $KEY_ID",
		argCount(2, 2), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			gone, err := c.RevokeEnvironmentKey(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			return cli.print(gone)
		})
	cmd.ValidArgsFunction = ids
	return cmd
}
