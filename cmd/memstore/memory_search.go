package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/client"
)

// memorySearchVerb is `memory search`: the store's memories holding every
// word of the query, best first, each with a snippet.
func memorySearchVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var prefix string
	var limit int
	cmd := verb("search <memory-store-id> <query>...", "find a store's memories by the words they hold, best first", `  memstore memory search $STORE deploy checklist
  memstore memory search $STORE "on-call" --prefix /runbooks/ --limit 5`,
		argCount(2, -1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			page, err := c.SearchMemories(ctx, args[0], strings.Join(args[1:], " "), client.SearchParams{PathPrefix: prefix, Limit: limit})
			if err != nil {
				return err
			}
			return cli.print(page.Data)
		})
	cmd.Flags().StringVar(&prefix, "prefix", "", "only paths under this folder (ends in /)")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many memories (1-100)")
	cmd.ValidArgsFunction = ids
	return cmd
}
