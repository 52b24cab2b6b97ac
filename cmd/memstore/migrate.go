package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlitetopg"
)

func newMigrateCommand(s streams) *cobra.Command {
	var database, from, to string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "bring a PostgreSQL database's schema up to date, or copy a SQLite data folder into PostgreSQL",
		Example: `  memstore migrate --database postgres://memstore:secret@db:5432/memstore
  memstore migrate --from ./memstore-data --to postgres://memstore:secret@db:5432/memstore`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), database, from, to, s.stdout)
		},
	}
	cmd.Flags().StringVar(&database, "database", envOr("MEMSTORE_DATABASE_URL", ""), "PostgreSQL URL whose schema to bring up to date, ahead of a deploy (env MEMSTORE_DATABASE_URL)")
	cmd.Flags().StringVar(&from, "from", "", "data folder of a SQLite server to copy (with --to)")
	cmd.Flags().StringVar(&to, "to", "", "PostgreSQL URL of an empty database to copy --from into")
	return cmd
}

func runMigrate(ctx context.Context, database, from, to string, stdout io.Writer) error {
	switch {
	case from != "" || to != "":
		if from == "" || to == "" {
			return errors.New("--from and --to go together: memstore migrate --from ./memstore-data --to postgres://…")
		}
		tables, err := sqlitetopg.Copy(ctx, filepath.Join(from, "memstore.db"), to)
		if err != nil {
			return fmt.Errorf("copy %s into %s: %w", from, postgres.Redact(to), err)
		}
		for _, t := range tables {
			fmt.Fprintf(stdout, "%-18s %8d rows  sha256 %s\n", t.Name, t.Rows, t.Hash)
		}
		fmt.Fprintf(stdout, "copied %s into %s; every table's count and hash match\n", from, postgres.Redact(to))
		return nil
	case database != "":
		db, err := postgres.Open(ctx, database, postgres.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Fprintf(stdout, "%s: schema up to date\n", postgres.Redact(database))
		return nil
	}
	return errors.New("give --database postgres://… (apply migrations) or --from ./memstore-data --to postgres://… (copy)")
}
