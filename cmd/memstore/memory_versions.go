package main

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/aymanbagabas/go-udiff"
	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// The verbs that look at a memory by path and at its history: which
// version said what, and what changed between two.

// memoryByPath finds the memory at p in a store: it lists p's folder one
// level deep, the smallest listing that holds it.
func memoryByPath(ctx context.Context, c *client.Client, storeID, p string) (*api.Memory, error) {
	dir := path.Dir(p)
	if dir != "/" {
		dir += "/"
	}
	for it, err := range c.ListAllMemories(ctx, storeID, client.ListMemoriesParams{PathPrefix: dir, Depth: 1, Limit: api.MaxListLimit}) {
		if err != nil {
			return nil, err
		}
		if it.Memory != nil && it.Memory.Path == p {
			return c.GetMemory(ctx, storeID, it.Memory.ID, client.GetMemoryParams{View: api.ViewFull})
		}
	}
	return nil, fmt.Errorf("no memory at %s in %s (`memstore memory list %s` shows its paths)", p, storeID, storeID)
}

// memoryVersionsOfPath lists the versions of every memory that was ever
// at p (so a memory renamed away, or deleted, keeps its history under the
// path), newest first.
func memoryVersionsOfPath(ctx context.Context, c *client.Client, storeID, p string, params client.ListMemoryVersionsParams) ([]api.MemoryVersion, error) {
	var all []api.MemoryVersion
	ids := map[string]bool{}
	for v, err := range c.ListAllMemoryVersions(ctx, storeID, params) {
		if err != nil {
			return nil, err
		}
		all = append(all, v)
		if v.Path != nil && *v.Path == p {
			ids[v.MemoryID] = true
		}
	}
	out := []api.MemoryVersion{}
	for _, v := range all {
		if ids[v.MemoryID] {
			out = append(out, v)
		}
	}
	return out, nil
}

func memoryVersionGetVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var asJSON bool
	cmd := verb("get <memory-store-id> <memory-version-id>", "print what a memory said at one version (--json: the whole version)",
		`  memstore memory version get $STORE $VERSION
  memstore memory version get $STORE $VERSION --json`,
		argCount(2, 2), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			v, err := c.GetMemoryVersion(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON || v.Content == nil {
				return cli.print(v) // a deletion or a redacted version has no content to print
			}
			return printContent(cli.stdout, *v.Content)
		})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole version (in the --output format) instead of its content")
	cmd.ValidArgsFunction = ids
	return cmd
}

func memoryDiffVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("diff <memory-store-id> <from-version-id> [<to-version-id>]", "show what changed between two versions of a memory, as a unified diff",
		`  memstore memory diff $STORE $OLD $NEW
  memstore memory diff $STORE $VERSION    # what this version changed`,
		argCount(2, 3), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			from, to, err := diffEnds(ctx, c, args[0], args[1:])
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cli.stdout, udiff.Unified(versionLabel(from), versionLabel(to), versionText(from), versionText(to)))
			return err
		})
	cmd.ValidArgsFunction = ids
	return cmd
}

// diffEnds fetches the two versions to compare. Given one, it compares it
// with the memory's version before it (nil when it is the first).
func diffEnds(ctx context.Context, c *client.Client, storeID string, ids []string) (from, to *api.MemoryVersion, err error) {
	if len(ids) == 2 {
		if from, err = c.GetMemoryVersion(ctx, storeID, ids[0]); err != nil {
			return nil, nil, err
		}
		to, err = c.GetMemoryVersion(ctx, storeID, ids[1])
		return from, to, err
	}
	if to, err = c.GetMemoryVersion(ctx, storeID, ids[0]); err != nil {
		return nil, nil, err
	}
	seen := false
	for v, err := range c.ListAllMemoryVersions(ctx, storeID, client.ListMemoryVersionsParams{MemoryID: to.MemoryID, Limit: api.MaxListLimit}) {
		if err != nil {
			return nil, nil, err
		}
		if seen { // newest first: the one listed after it came before it
			from, err = c.GetMemoryVersion(ctx, storeID, v.ID)
			return from, to, err
		}
		seen = v.ID == to.ID
	}
	if !seen {
		return nil, nil, errors.New("the version is not in its memory's history")
	}
	return nil, to, nil
}

// versionText is what a version says; nothing for a deletion, or for a
// version whose content was redacted.
func versionText(v *api.MemoryVersion) string {
	if v == nil || v.Content == nil {
		return ""
	}
	return *v.Content
}

// versionLabel names a side of a diff: the path and the version id, and
// why it has no content when it has none.
func versionLabel(v *api.MemoryVersion) string {
	switch {
	case v == nil:
		return "/dev/null"
	case v.RedactedAt != nil:
		return v.ID + " (redacted)"
	case v.Path == nil:
		return v.ID
	case v.Operation == api.OperationDeleted:
		return *v.Path + " " + v.ID + " (deleted)"
	}
	return *v.Path + " " + v.ID
}
