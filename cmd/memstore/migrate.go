package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlitetopg"
)

func init() {
	commands["migrate"] = command{summary: "bring a PostgreSQL database's schema up to date, or copy a SQLite data folder into PostgreSQL", run: runMigrate}
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", stderr)
	database := fs.String("database", envOr("MEMSTORE_DATABASE_URL", ""), "PostgreSQL URL whose schema to bring up to date, ahead of a deploy (env MEMSTORE_DATABASE_URL)")
	from := fs.String("from", "", "data folder of a SQLite server to copy (with --to)")
	to := fs.String("to", "", "PostgreSQL URL of an empty database to copy --from into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *from != "" || *to != "":
		if *from == "" || *to == "" {
			return errors.New("migrate: --from and --to go together: memstore migrate --from ./memstore-data --to postgres://…")
		}
		tables, err := sqlitetopg.Copy(ctx, filepath.Join(*from, "memstore.db"), *to)
		if err != nil {
			return fmt.Errorf("copy %s into %s: %w", *from, postgres.Redact(*to), err)
		}
		for _, t := range tables {
			fmt.Fprintf(stdout, "%-18s %8d rows  sha256 %s\n", t.Name, t.Rows, t.Hash)
		}
		fmt.Fprintf(stdout, "copied %s into %s; every table's count and hash match\n", *from, postgres.Redact(*to))
		return nil
	case *database != "":
		db, err := postgres.Open(ctx, *database, postgres.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Fprintf(stdout, "%s: schema up to date\n", postgres.Redact(*database))
		return nil
	}
	return errors.New("migrate: give --database postgres://… (apply migrations) or --from ./memstore-data --to postgres://… (copy)")
}
