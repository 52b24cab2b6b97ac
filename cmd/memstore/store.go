package main

import (
	"context"
	"flag"
	"fmt"
	"iter"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func init() {
	commands["store"] = command{summary: "manage memory stores (create, list, get, archive, delete, export, import)", run: noun("store", map[string]verb{
		"export": {summary: "write a store's memories into a .tar.gz or .zip", run: storeExport},
		"import": {summary: "create or update memories from archives or files (--dry-run shows the plan)", run: storeImport},
		"create": describedCreate("create a memory store", "description (shown to agents)",
			func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (*api.MemoryStore, error) {
				return c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: name, Description: desc, Metadata: md})
			}),
		"list": listVerb("list memory stores", "stores", func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.MemoryStore, error] {
			return c.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{IncludeArchived: archived, Limit: api.MaxListLimit})
		}),
		"get":     idVerb("show a memory store", "memory-store-id", (*client.Client).GetMemoryStore),
		"archive": idVerb("archive a store: read-only, not attachable to new sessions", "memory-store-id", (*client.Client).ArchiveMemoryStore),
		"delete":  idVerb("delete a store with all its memories and versions", "memory-store-id", (*client.Client).DeleteMemoryStore),
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
	pos, c, err := cli.connect(fs, args, "[flags] <memory-store-id>", 1, 1)
	if err != nil {
		return err
	}
	return printAll(cli, c.ListAllMemories(ctx, pos[0], client.ListMemoriesParams{PathPrefix: *prefix, Depth: *depth, Limit: api.MaxListLimit}))
}

func memoryGet(ctx context.Context, cli *cliContext, args []string) error {
	fs := cli.flags()
	asJSON := fs.Bool("json", false, "print the whole memory as JSON instead of its content")
	pos, c, err := cli.connect(fs, args, "[flags] <memory-store-id> <memory-id>", 2, 2)
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
	pos, c, err := cli.connect(fs, args, "[flags] <memory-store-id> <memory-id>", 2, 2)
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
	pos, c, err := cli.connect(fs, args, "[flags] <memory-store-id>", 1, 1)
	if err != nil {
		return err
	}
	return printAll(cli, c.ListAllMemoryVersions(ctx, pos[0], client.ListMemoryVersionsParams{MemoryID: *memory, SessionID: *session, Limit: api.MaxListLimit}))
}
