package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
	"github.com/memstore/memstore/internal/storearchive"
	"github.com/memstore/memstore/internal/validate"
)

// maxImportBytes caps what the archives of one import unpack to.
const maxImportBytes = 1 << 30

// progress is a bar on stderr when a person watches it (a terminal), and
// nothing otherwise, so logs and scripts stay clean.
func progress(cli *cliContext, total int64, what string) *progressbar.ProgressBar {
	visible := false
	if f, ok := cli.stderr.(*os.File); ok {
		visible = term.IsTerminal(int(f.Fd()))
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(cli.stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetVisibility(visible), progressbar.OptionClearOnFinish())
}

func storeExportVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var out string
	cmd := verb("export <memory-store-id>", "write a store's memories into a .tar.gz or .zip", `  memstore store export $STORE -o notes.tar.gz`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			return storeExport(ctx, cli, c, args[0], out)
		})
	cmd.Flags().StringVarP(&out, "file", "o", "", "archive to write: NAME.tar.gz, NAME.tgz or NAME.zip (default <store id>.tar.gz)")
	cmd.ValidArgsFunction = ids
	return cmd
}

func storeExport(ctx context.Context, cli *cliContext, c *client.Client, storeID, out string) error {
	if out == "" {
		out = storeID + ".tar.gz"
	}
	format := storearchive.FormatOf(out)
	if format == "" {
		return fmt.Errorf("-o %s: name the archive .tar.gz, .tgz or .zip", out)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w (an existing file is never overwritten)", out, err)
	}
	n, err := exportTo(ctx, cli, c, storeID, f, format)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	fmt.Fprintf(cli.stdout, "exported %d memories of %s to %s\n", n, storeID, out)
	return nil
}

func exportTo(ctx context.Context, cli *cliContext, c *client.Client, storeID string, w io.Writer, format string) (int, error) {
	aw, err := storearchive.NewWriter(w, format, time.Now())
	if err != nil {
		return 0, err
	}
	bar := progress(cli, -1, "exporting")
	n := 0
	for it, err := range c.ListAllMemories(ctx, storeID, client.ListMemoriesParams{View: api.ViewFull, Limit: api.MaxFullViewListLimit}) {
		if err != nil {
			return n, err
		}
		if it.Memory == nil || it.Memory.Content == nil {
			continue
		}
		if err := aw.Add(it.Memory.Path, *it.Memory.Content); err != nil {
			return n, err
		}
		n++
		bar.Add(1)
	}
	bar.Finish()
	return n, aw.Close()
}

func storeImportVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var dryRun bool
	cmd := verb("import <memory-store-id> <archive.tar.gz | archive.zip | file>...", "create or update memories from archives or files (--dry-run shows the plan)",
		`  memstore store import $STORE notes.tar.gz --dry-run
  memstore store import $STORE notes.tar.gz README.md`,
		argCount(2, -1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			return storeImport(ctx, cli, c, args[0], args[1:], dryRun)
		})
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only print what would be created, changed and refused")
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return ids(cmd, args, toComplete)
		}
		return nil, cobra.ShellCompDirectiveDefault // files
	}
	return cmd
}

func storeImport(ctx context.Context, cli *cliContext, c *client.Client, storeID string, names []string, dryRun bool) error {
	var files []storearchive.File
	var steps []storearchive.Step
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		format := storearchive.FormatOf(name)
		if format == "" {
			files = append(files, storearchive.File{Path: "/" + filepath.Base(name), Content: data})
			continue
		}
		got, skipped, err := storearchive.Read(format, data, api.MaxContentBytes, maxImportBytes)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, got...)
		for _, sk := range skipped {
			steps = append(steps, storearchive.Step{Path: sk.Name, Action: storearchive.Refuse, Reason: sk.Reason})
		}
	}
	existing := map[string]storearchive.Existing{}
	for it, err := range c.ListAllMemories(ctx, storeID, client.ListMemoriesParams{Limit: api.MaxListLimit}) {
		if err != nil {
			return err
		}
		existing[it.Memory.Path] = storearchive.Existing{ID: it.Memory.ID, SHA256: it.Memory.ContentSHA256}
	}
	steps = append(steps, storearchive.Plan(files, existing, func(path, content string) error {
		return errors.Join(validate.Path("path", path), validate.Content("content", content))
	})...)
	if !dryRun {
		bar := progress(cli, int64(len(steps)), "importing")
		for i, st := range steps {
			steps[i] = importStep(ctx, c, storeID, st)
			bar.Add(1)
		}
		bar.Finish()
	}
	counts := map[string]int{}
	for _, st := range steps {
		counts[st.Action]++
		if st.Action == storearchive.Refuse {
			fmt.Fprintf(cli.stderr, "refused %s: %s\n", st.Path, st.Reason)
		}
	}
	verb := "imported into"
	if dryRun {
		verb = "dry run, nothing changed in"
	}
	fmt.Fprintf(cli.stdout, "%s %s: %d created, %d changed, %d already the same, %d refused\n", verb, storeID,
		counts[storearchive.Create], counts[storearchive.Change], counts[storearchive.Same], counts[storearchive.Refuse])
	if counts[storearchive.Refuse] > 0 {
		return errors.New("some files were refused (listed above); the others were imported")
	}
	return nil
}

// importStep carries out one step through the API: a change applies only
// if the memory is still as the plan saw it.
func importStep(ctx context.Context, c *client.Client, storeID string, st storearchive.Step) storearchive.Step {
	var err error
	switch st.Action {
	case storearchive.Create:
		_, err = c.CreateMemory(ctx, storeID, api.CreateMemoryRequest{Path: st.Path, Content: st.Content})
	case storearchive.Change:
		_, err = c.UpdateMemory(ctx, storeID, st.Memory.ID, api.UpdateMemoryRequest{Content: &st.Content,
			Precondition: &api.Precondition{Type: "content_sha256", ContentSHA256: st.Memory.SHA256}})
	}
	if err != nil {
		st.Action, st.Reason = storearchive.Refuse, err.Error()
	}
	return st
}
