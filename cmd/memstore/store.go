package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["store"] = command{summary: "manage memory stores (create, list, get, archive, delete)", run: noun("store", map[string]verb{
		"create":  {summary: "create a memory store", run: storeCreate},
		"list":    {summary: "list memory stores", run: storeList},
		"get":     {summary: "show a memory store", run: storeGet},
		"archive": {summary: "archive a store: read-only, not attachable to new sessions", run: storeArchive},
		"delete":  {summary: "delete a store with all its memories and versions", run: storeDelete},
	})}
	commands["memory"] = command{summary: "manage the memories of a store (create, list, get, update, delete, versions)", run: noun("memory", map[string]verb{
		"create":   {summary: "create a memory at a path", run: memoryCreate},
		"list":     {summary: "list a store's memories", run: memoryList},
		"get":      {summary: "print a memory's content (--json: the whole memory)", run: memoryGet},
		"update":   {summary: "change a memory's content or path", run: memoryUpdate},
		"delete":   {summary: "delete a memory", run: memoryDelete},
		"versions": {summary: "list a store's versions, newest first", run: memoryVersions},
	})}
}

func storeCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	desc := fs.String("description", "", "description (shown to agents)")
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
	req := api.CreateMemoryStoreRequest{Name: pos[0], Metadata: md}
	if *desc != "" {
		req.Description = desc
	}
	s, err := c.CreateMemoryStore(ctx, req)
	if err != nil {
		return err
	}
	return cli.print(s)
}

func storeList(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	archived := fs.Bool("archived", false, "include archived stores")
	if _, err := cli.parse(fs, args, "[flags]", 0, 0); err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	out := []api.MemoryStore{}
	for s, err := range c.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{IncludeArchived: *archived, Limit: api.MaxListLimit}) {
		if err != nil {
			return err
		}
		out = append(out, s)
	}
	return cli.print(out)
}

func storeGet(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "memory-store-id", func(c *client.Client, id string) (any, error) { return c.GetMemoryStore(ctx, id) })
}

func storeArchive(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "memory-store-id", func(c *client.Client, id string) (any, error) { return c.ArchiveMemoryStore(ctx, id) })
}

func storeDelete(ctx context.Context, cli *cliContext, args []string) error {
	return byID(cli, args, "memory-store-id", func(c *client.Client, id string) (any, error) { return c.DeleteMemoryStore(ctx, id) })
}

func memoryCreate(ctx context.Context, cli *cliContext, args []string) error {
	pos, err := cli.parse(cli.flags(), args, "[flags] <memory-store-id> <path> <content | @file | ->", 3, 3)
	if err != nil {
		return err
	}
	content, err := textArg(pos[2], stdin)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	m, err := c.CreateMemory(ctx, pos[0], api.CreateMemoryRequest{Path: pos[1], Content: content})
	if err != nil {
		return err
	}
	return cli.print(m)
}

func memoryList(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	prefix := fs.String("prefix", "", "only paths under this folder (ends in /)")
	depth := fs.Int("depth", 0, "1: only the folder's children, deeper paths rolled up into prefixes")
	pos, err := cli.parse(fs, args, "[flags] <memory-store-id>", 1, 1)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	out := []api.MemoryListItem{}
	for it, err := range c.ListAllMemories(ctx, pos[0], client.ListMemoriesParams{PathPrefix: *prefix, Depth: *depth, Limit: api.MaxListLimit}) {
		if err != nil {
			return err
		}
		out = append(out, it)
	}
	return cli.print(out)
}

func memoryGet(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	asJSON := fs.Bool("json", false, "print the whole memory as JSON instead of its content")
	pos, err := cli.parse(fs, args, "[flags] <memory-store-id> <memory-id>", 2, 2)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	m, err := c.GetMemory(ctx, pos[0], pos[1], client.GetMemoryParams{View: api.ViewFull})
	if err != nil {
		return err
	}
	if *asJSON || m.Content == nil {
		return cli.print(m)
	}
	_, err = fmt.Fprint(cli.stdout, *m.Content)
	return err
}

func memoryUpdate(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	content := fs.String("content", "", "new content: the text, @file, or - for standard input")
	path := fs.String("path", "", "new path (a rename keeps the memory's id)")
	ifSHA := fs.String("if-sha256", "", "only if the stored content still has this SHA-256")
	pos, err := cli.parse(fs, args, "[flags] <memory-store-id> <memory-id>", 2, 2)
	if err != nil {
		return err
	}
	var req api.UpdateMemoryRequest
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "content":
			req.Content = content
		case "path":
			req.Path = path
		}
	})
	if req.Content == nil && req.Path == nil {
		return fmt.Errorf("nothing to change: pass --content and/or --path")
	}
	if req.Content != nil {
		text, err := textArg(*req.Content, stdin)
		if err != nil {
			return err
		}
		req.Content = &text
	}
	if *ifSHA != "" {
		req.Precondition = &api.Precondition{Type: "content_sha256", ContentSHA256: *ifSHA}
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	m, err := c.UpdateMemory(ctx, pos[0], pos[1], req)
	if err != nil {
		return err
	}
	return cli.print(m)
}

func memoryDelete(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	ifSHA := fs.String("if-sha256", "", "only if the stored content still has this SHA-256")
	pos, err := cli.parse(fs, args, "[flags] <memory-store-id> <memory-id>", 2, 2)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	d, err := c.DeleteMemory(ctx, pos[0], pos[1], client.DeleteMemoryParams{ExpectedContentSHA256: *ifSHA})
	if err != nil {
		return err
	}
	return cli.print(d)
}

func memoryVersions(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	memory := fs.String("memory", "", "only versions of this memory id")
	session := fs.String("session", "", "only versions written by this session")
	pos, err := cli.parse(fs, args, "[flags] <memory-store-id>", 1, 1)
	if err != nil {
		return err
	}
	c, err := cli.client()
	if err != nil {
		return err
	}
	out := []api.MemoryVersion{}
	for v, err := range c.ListAllMemoryVersions(ctx, pos[0], client.ListMemoryVersionsParams{MemoryID: *memory, SessionID: *session, Limit: api.MaxListLimit}) {
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	return cli.print(out)
}
