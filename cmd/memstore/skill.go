package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

func newSkillCommand(s streams) *cobra.Command {
	return newAPINoun(s, "skill", "manage skills (create from a folder, list, versions, download)", func(cli *cliContext) []*cobra.Command {
		ids := skillIDs(cli)
		return []*cobra.Command{
			skillCreateVerb(cli, ids),
			verb("list", "list skills, newest first", "  memstore skill list --output table", argCount(0, 0), func(ctx context.Context, _ []string) error {
				c, err := cli.client()
				if err != nil {
					return err
				}
				return printAll(cli, c.ListAllSkills(ctx))
			}),
			skillVersionsVerb(cli, ids),
			skillDownloadVerb(cli, ids),
		}
	})
}

// skillIDs completes a skill id.
func skillIDs(cli *cliContext) cobra.CompletionFunc {
	return completeIDs(cli, func(ctx context.Context, c *client.Client) ([]api.Skill, error) {
		p, err := c.ListSkills(ctx, api.MaxListLimit, "")
		if err != nil {
			return nil, err
		}
		return p.Data, nil
	}, func(s api.Skill) (string, string) { return s.ID, s.DisplayName })
}

func skillCreateVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var displayName, skillID string
	cmd := verb("create <folder>", "upload a skill's folder (SKILL.md at its root) as a new skill, or as a new version of one with --skill", `  SKILL=$(memstore skill create ./pdf-tools -q)
  memstore skill create ./pdf-tools --skill $SKILL`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			files, err := readSkillFolder(args[0])
			if err != nil {
				return err
			}
			c, err := cli.client()
			if err != nil {
				return err
			}
			if skillID != "" {
				if displayName != "" {
					return usageError{Err: errors.New("--display-name belongs to a new skill; leave it out with --skill")}
				}
				v, err := c.CreateSkillVersion(ctx, skillID, files)
				if err != nil {
					return err
				}
				return cli.print(v)
			}
			sk, err := c.CreateSkill(ctx, displayName, files)
			if err != nil {
				return err
			}
			return cli.print(sk)
		})
	fs := cmd.Flags()
	fs.StringVar(&displayName, "display-name", "", "the skill's label (default: the name in SKILL.md)")
	fs.StringVar(&skillID, "skill", "", "upload the folder as a new version of this skill")
	cmd.RegisterFlagCompletionFunc("skill", ids)
	return cmd
}

// readSkillFolder reads every file under dir, named by its path with the
// folder's own name first (pdf-tools/SKILL.md), as the Skills API wants
// them. A link or other non-regular file is refused: the server stores
// plain files only, and following a link could upload what was never
// meant to be part of the skill.
func readSkillFolder(dir string) ([]client.SkillFile, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder: give the skill's folder, the one holding SKILL.md", dir)
	}
	top := filepath.Base(abs)
	var files []client.SkillFile
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a link or a special file); a skill holds plain files only: copy the file in", filepath.Join(dir, rel))
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, client.SkillFile{Path: top + "/" + filepath.ToSlash(rel), Content: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no files; a skill needs at least its SKILL.md", dir)
	}
	return files, nil
}

func skillVersionsVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	cmd := verb("versions <skill-id>", "list a skill's versions, newest first", "  memstore skill versions $SKILL --output table",
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			return printAll(cli, c.ListAllSkillVersions(ctx, args[0]))
		})
	cmd.ValidArgsFunction = ids
	return cmd
}

func skillDownloadVerb(cli *cliContext, ids cobra.CompletionFunc) *cobra.Command {
	var version, to string
	cmd := verb("download <skill-id>", "save a version's files as a zip archive (one folder named after the skill)", `  memstore skill download $SKILL
  memstore skill download $SKILL --version $VERSION --to pdf-tools-v1.zip`,
		argCount(1, 1), func(ctx context.Context, args []string) error {
			c, err := cli.client()
			if err != nil {
				return err
			}
			v, err := c.GetSkillVersion(ctx, args[0], version)
			if err != nil {
				return err
			}
			if to == "" {
				to = v.Name + ".zip"
			}
			// O_EXCL: an existing file is never overwritten.
			f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists; remove it or choose another file with --to", to)
			}
			if err != nil {
				return err
			}
			body, err := c.DownloadSkillVersion(ctx, args[0], v.ID)
			if err == nil {
				_, err = io.Copy(f, body)
				body.Close()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(to)
				return err
			}
			fmt.Fprintf(cli.stderr, "saved version %s of skill %s to %s\n", v.ID, args[0], to)
			return nil
		})
	cmd.Flags().StringVar(&version, "version", "latest", "the version to download")
	cmd.Flags().StringVar(&to, "to", "", "the file to write (default: <skill name>.zip; never overwritten)")
	cmd.ValidArgsFunction = ids
	return cmd
}
