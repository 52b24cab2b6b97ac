package main

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newStoreCommand(s streams) *cobra.Command {
	return newAPINoun(s, "store", "manage memory stores (create, list, get, archive, delete, export, import, retention)", func(cli *cliContext) []*cobra.Command {
		ids := storeIDs(cli)
		return []*cobra.Command{
			describedCreate(cli, "create a memory store", "description (shown to agents)",
				`  STORE=$(memstore store create "Team Notes" --description "what the team knows" -q)`,
				func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (*api.MemoryStore, error) {
					return c.CreateMemoryStore(ctx, api.CreateMemoryStoreRequest{Name: name, Description: desc, Metadata: md})
				}),
			listVerb(cli, "list memory stores", "stores", "  memstore store list --output table",
				func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[api.MemoryStore, error] {
					return c.ListAllMemoryStores(ctx, client.ListMemoryStoresParams{IncludeArchived: archived, Limit: api.MaxListLimit})
				}),
			idVerb(cli, "get", "memory-store-id", "show a memory store", "  memstore store get $STORE", ids, (*client.Client).GetMemoryStore),
			idVerb(cli, "archive", "memory-store-id", "archive a store: read-only, not attachable to new sessions", "  memstore store archive $STORE", ids, (*client.Client).ArchiveMemoryStore),
			idVerb(cli, "delete", "memory-store-id", "delete a store with all its memories and versions", "  memstore store delete $STORE", ids, (*client.Client).DeleteMemoryStore),
			storeExportVerb(cli, ids),
			storeRetentionVerb(cli, ids),
			storeImportVerb(cli, ids),
		}
	})
}

// storeIDs completes a memory store id.
func storeIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.MemoryStore, error) {
		p, err := c.ListMemoryStores(ctx, client.ListMemoryStoresParams{Limit: api.MaxListLimit})
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(s api.MemoryStore) (string, string) { return s.ID, s.Name })
}

func newMemoryCommand(s streams) *cobra.Command {
	return newAPINoun(s, "memory", "manage the memories of a store (create, list, get, update, delete, search, versions, version get, diff)", func(cli *cliContext) []*cobra.Command {
		ids := storeIDs(cli)
		return []*cobra.Command{
			memoryCreateVerb(cli, ids),
			memoryListVerb(cli, ids),
			memoryGetVerb(cli, ids),
			memoryUpdateVerb(cli, ids),
			memoryDeleteVerb(cli, ids),
			memorySearchVerb(cli, ids),
			memoryVersionsVerb(cli, ids),
			newNoun("version", "one version of a memory: version get", memoryVersionGetVerb(cli, ids)),
			memoryDiffVerb(cli, ids),
		}
	})
}

func memoryCreateVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("create <memory-store-id> <path> <content | @file | ->", "create a memory at a path",
		`  memstore memory create $STORE /todo.md "ship the release"
  memstore memory create $STORE /notes.md @notes.md
  echo hello | memstore memory create $STORE /hello.md -`,
		argCount(3, 3), func(ctx context.Context, args []string) error {
			content, err := textArg(args[2], cli.stdin)
			if err != nil {
				return err
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			m, err := c.CreateMemory(ctx, args[0], api.CreateMemoryRequest{Path: args[1], Content: content})
			if err != nil {
				return err
			}
			return cli.print(m)
		})
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryListVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var prefix string
	var depth int
	cmd := verb("list <memory-store-id>", "list a store's memories", `  memstore memory list $STORE
  memstore memory list $STORE --prefix /decisions/ --depth 1`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			return printAll(cli, c.ListAllMemories(ctx, args[0], client.ListMemoriesParams{PathPrefix: prefix, Depth: depth, Limit: api.MaxListLimit}))
		})
	cmd.Flags().StringVar(&prefix, "prefix", "", "only paths under this folder (ends in /)")
	cmd.Flags().IntVar(&depth, "depth", 0, "1: only the folder's children, deeper paths rolled up into prefixes")
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryGetVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var asJSON bool
	var byPath string
	cmd := verb("get <memory-store-id> (<memory-id> | --path PATH)", "print a memory's content (--json: the whole memory)", `  memstore memory get $STORE $MEMORY
  memstore memory get $STORE --path /todo.md
  memstore memory get $STORE --path /todo.md --json`,
		argCount(1, 2), func(ctx context.Context, args []string) error {
			if (byPath == "") == (len(args) == 1) {
				return usageError{Err: errors.New("give the memory's id or --path, one of the two")}
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			var m *api.Memory
			if byPath != "" {
				m, err = memoryByPath(ctx, c, args[0], byPath)
			} else {
				m, err = c.GetMemory(ctx, args[0], args[1], client.GetMemoryParams{View: api.ViewFull})
			}
			if err != nil {
				return err
			}
			if asJSON || m.Content == nil {
				return cli.print(m)
			}
			return printContent(cli.stdout, *m.Content)
		})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole memory (in the --output format) instead of its content")
	cmd.Flags().StringVar(&byPath, "path", "", "the memory at this path, instead of an id")
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryUpdateVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var content, path, ifSHA string
	var cmd *cobra.Command
	cmd = verb("update <memory-store-id> <memory-id>", "change a memory's content or path", `  memstore memory update $STORE $MEMORY --content @todo.md
  memstore memory update $STORE $MEMORY --path /done/todo.md --if-sha256 $SHA`,
		argCount(2, 2), func(ctx context.Context, args []string) error {
			var req api.UpdateMemoryRequest
			if cmd.Flags().Changed("content") {
				text, err := textArg(content, cli.stdin)
				if err != nil {
					return err
				}
				req.Content = &text
			}
			if cmd.Flags().Changed("path") {
				req.Path = &path
			}
			if req.Content == nil && req.Path == nil {
				return fmt.Errorf("nothing to change: pass --content and/or --path")
			}
			if ifSHA != "" {
				req.Precondition = &api.Precondition{Type: "content_sha256", ContentSHA256: ifSHA}
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			m, err := c.UpdateMemory(ctx, args[0], args[1], req)
			if err != nil {
				return err
			}
			return cli.print(m)
		})
	cmd.Flags().StringVar(&content, "content", "", "new content: the text, @file, or - for standard input")
	cmd.Flags().StringVar(&path, "path", "", "new path (a rename keeps the memory's id)")
	cmd.Flags().StringVar(&ifSHA, "if-sha256", "", "only if the stored content still has this SHA-256")
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryDeleteVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var ifSHA string
	cmd := verb("delete <memory-store-id> <memory-id>", "delete a memory", "  memstore memory delete $STORE $MEMORY",
		argCount(2, 2), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			d, err := c.DeleteMemory(ctx, args[0], args[1], client.DeleteMemoryParams{ExpectedContentSHA256: ifSHA})
			if err != nil {
				return err
			}
			return cli.print(d)
		})
	cmd.Flags().StringVar(&ifSHA, "if-sha256", "", "only if the stored content still has this SHA-256")
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryVersionsVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var memory, session, byPath string
	cmd := verb("versions <memory-store-id>", "list a store's versions, newest first", `  memstore memory versions $STORE
  memstore memory versions $STORE --memory $MEMORY
  memstore memory versions $STORE --path /todo.md`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			if memory != "" && byPath != "" {
				return usageError{Err: errors.New("--memory and --path both choose the memory: give one")}
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			p := client.ListMemoryVersionsParams{MemoryID: memory, SessionID: session, Limit: api.MaxListLimit}
			if byPath == "" {
				return printAll(cli, c.ListAllMemoryVersions(ctx, args[0], p))
			}
			vs, err := memoryVersionsOfPath(ctx, c, args[0], byPath, p)
			if err != nil {
				return err
			}
			return cli.print(vs)
		})
	cmd.Flags().StringVar(&memory, "memory", "", "only versions of this memory id")
	cmd.Flags().StringVar(&session, "session", "", "only versions written by this session")
	cmd.Flags().StringVar(&byPath, "path", "", "only versions of the memories that were ever at this path (renamed or deleted ones included)")
	cmd.ValidArgsFunction = ids
	return cmd
}
