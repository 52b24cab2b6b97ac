package main

import (
	"context"
	"fmt"
	"iter"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["env"] = command{summary: "manage environments and their keys (create, list, get, archive, delete, key create|list|revoke)", run: noun("env", map[string]verb{
		"create": describedCreate("create a self-hosted environment", "description",
			func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (*api.Environment, error) {
				return c.CreateEnvironment(ctx, api.CreateEnvironmentRequest{Name: name, Description: desc, Metadata: md,
					Config: &api.EnvironmentConfig{Type: api.EnvironmentConfigSelfHosted}})
			}),
		"list": listVerb("list environments", "environments", func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.Environment, error] {
			return c.ListAllEnvironments(ctx, api.EnvironmentListParams{IncludeArchived: archived, Limit: api.MaxListLimit})
		}),
		"get":     idVerb("show an environment", "environment-id", (*client.Client).GetEnvironment),
		"archive": idVerb("archive an environment (no new sessions; its keys may no longer poll)", "environment-id", (*client.Client).ArchiveEnvironment),
		"delete":  idVerb("delete an environment without sessions", "environment-id", (*client.Client).DeleteEnvironment),
		"key": {summary: "environment keys: key create (-q prints the key alone), key list, key revoke", sub: map[string]verb{
			"create": {summary: "mint an environment key for the workers (shown once)", run: envKeyCreate},
			"list":   {summary: "list an environment's live keys (never their secrets)", run: envKeyList},
			"revoke": {summary: "revoke an environment key at once, everywhere", run: envKeyRevoke},
		}},
	})}
}

func envKeyCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	name := fs.String("name", "", "a name to recognise the key by")
	pos, c, err := cli.connect(fs, args, "[flags] <environment-id>", 1, 1)
	if err != nil {
		return err
	}
	k, err := c.CreateEnvironmentKey(ctx, pos[0], api.CreateEnvironmentKeyRequest{Name: *name})
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
}

func envKeyList(ctx context.Context, cli *cliContext, args []string) error {
	pos, c, err := cli.connect(cli.flags(), args, "[flags] <environment-id>", 1, 1)
	if err != nil {
		return err
	}
	return printAll(cli, c.ListAllEnvironmentKeys(ctx, pos[0], api.EnvironmentKeyListParams{Limit: api.MaxListLimit}))
}

func envKeyRevoke(ctx context.Context, cli *cliContext, args []string) error {
	pos, c, err := cli.connect(cli.flags(), args, "[flags] <environment-id> <key-id>", 2, 2)
	if err != nil {
		return err
	}
	gone, err := c.RevokeEnvironmentKey(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	return cli.print(gone)
}
