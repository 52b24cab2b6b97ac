package main

import (
	"context"
	"fmt"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["env"] = command{summary: "manage environments and their keys (create, list, get, archive, delete, key create)", run: noun("env", map[string]verb{
		"create":  {summary: "create a self-hosted environment", run: envCreate},
		"list":    {summary: "list environments", run: envList},
		"get":     {summary: "show an environment", run: envGet},
		"archive": {summary: "archive an environment (no new sessions)", run: envArchive},
		"delete":  {summary: "delete an environment without sessions", run: envDelete},
		"key": {summary: "environment keys: key create (-q prints the key alone)", sub: map[string]verb{
			"create": {summary: "mint an environment key for the workers (shown once)", run: envKeyCreate},
		}},
	})}
}

func envCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	desc := fs.String("description", "", "description")
	md := kvFlag{}
	fs.Var(md, "metadata", "metadata key=value (repeatable)")
	pos, err := cli.parse(fs, args, "[flags] <name>", 1, 1)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	req := api.CreateEnvironmentRequest{Name: pos[0], Config: &api.EnvironmentConfig{Type: api.EnvironmentConfigSelfHosted}, Metadata: md}
	if *desc != "" {
		req.Description = desc
	}
	e, err := c.CreateEnvironment(ctx, req)
	if err != nil {
		return err
	}
	return cli.print(e)
}

func envList(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	archived := fs.Bool("archived", false, "include archived environments")
	if _, err := cli.parse(fs, args, "[flags]", 0, 0); err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	out := []api.Environment{}
	for e, err := range c.ListAllEnvironments(ctx, api.EnvironmentListParams{IncludeArchived: *archived, Limit: api.MaxListLimit}) {
		if err != nil {
			return err
		}
		out = append(out, e)
	}
	return cli.print(out)
}

func envGet(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "environment-id", func(c *client.Client, id string) (any, error) { return c.GetEnvironment(ctx, id) })
}

func envArchive(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "environment-id", func(c *client.Client, id string) (any, error) { return c.ArchiveEnvironment(ctx, id) })
}

func envDelete(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "environment-id", func(c *client.Client, id string) (any, error) { return c.DeleteEnvironment(ctx, id) })
}

func envKeyCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	name := fs.String("name", "", "a name to recognise the key by")
	pos, err := cli.parse(fs, args, "[flags] <environment-id>", 1, 1)
	if err != nil {
		return err
	}
	c, err := cli.client()
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
