package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/internal/retention"
)

// storeRetentionVerb sets a store's version retention: the policy in
// serve --version-retention's form, or server_default.
func storeRetentionVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("retention <memory-store-id> <keep_all|keep_last=N|max_age=DURATION|server_default>",
		"set which versions of each memory a store keeps (the newest and redaction records always stay)",
		`  memstore store retention $STORE keep_last=2
  memstore store retention $STORE max_age=720h
  memstore store retention $STORE server_default`,
		argCount(2, 2), func(ctx context.Context, args []string) error {
			w := api.VersionRetention{Type: api.RetentionServerDefault}
			if args[1] != api.RetentionServerDefault {
				p, err := retention.Parse(args[1])
				if err != nil {
					return usageError{Err: fmt.Errorf("%w, or server_default", err)}
				}
				w = api.VersionRetention{Type: p.Kind(), KeepLast: p.KeepLast, MaxAgeSeconds: int64(p.MaxAge / time.Second)}
				if p.MaxAge%time.Second != 0 {
					return usageError{Err: fmt.Errorf("%q: give max_age in whole seconds", args[1])}
				}
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			st, err := c.UpdateMemoryStore(ctx, args[0], api.UpdateMemoryStoreRequest{VersionRetention: &w})
			if err != nil {
				return err
			}
			return cli.print(st)
		})
	cmd.ValidArgsFunction = ids
	return cmd
}
