package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/memstore/memstore/internal/backup"
	"github.com/memstore/memstore/internal/storage/postgres"
)

// pgDumpAdvice is what backup says of a server on PostgreSQL: its own
// tools make a consistent online backup, and memstore adds nothing to them.
const pgDumpAdvice = `a server on PostgreSQL is backed up with PostgreSQL's own tools, online and consistent:
  pg_dump --format=custom --file=memstore.dump '%s'
and restored into an empty database with:
  pg_restore --no-owner --dbname='postgres://…/memstore_restored' memstore.dump
(see docs/bench-and-backups.md)`

// newBackupCommand is `memstore backup`: a consistent online backup of a
// SQLite data folder into one file, or (--verify) a check of such a file.
func newBackupCommand(s streams) *cobra.Command {
	var dataDir, to, verify, database string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "back up a data folder into one file while the server runs, or check a backup (--verify)",
		Long: `memstore backup: copy what a data folder needs to be served again — the SQLite
database, consistently while ` + "`memstore serve`" + ` keeps running on it, plus admin.key
and up.json — into one file with a manifest of checksums. The backup holds
every write the server acknowledged before it began.

--verify FILE reads a backup whole and checks every file and the database's
integrity; it exits 1 for a damaged or truncated file.

A server on PostgreSQL (--database) is backed up with pg_dump.`,
		Example: `  memstore backup --data ./memstore-data --to memstore-2026-12-01.backup
  memstore backup --verify memstore-2026-12-01.backup
  memstore restore --from memstore-2026-12-01.backup --data ./memstore-data-restored`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case verify != "" && to != "":
				return usageError{Err: errors.New("--verify checks a backup and --to makes one; give one of them")}
			case verify != "":
				m, err := backup.Verify(cmd.Context(), verify)
				if err != nil {
					return err
				}
				return describeBackup(s.stdout, "verified", verify, m)
			case database != "":
				return fmt.Errorf(pgDumpAdvice, postgres.Redact(database))
			case to == "":
				return usageError{Err: errors.New("--to FILE is required: the new backup file (or --verify FILE to check one)")}
			}
			m, err := backup.Create(cmd.Context(), dataDir, to)
			if err != nil {
				return err
			}
			return describeBackup(s.stdout, "backed up "+dataDir+" to", to, m)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "the data folder of the server to back up (env MEMSTORE_DATA)")
	fs.StringVar(&to, "to", "", "the backup file to make (must not exist)")
	fs.StringVar(&verify, "verify", "", "check this backup file instead of making one")
	fs.StringVar(&database, "database", envOr("MEMSTORE_DATABASE_URL", ""), "the PostgreSQL URL of a server on PostgreSQL: prints the pg_dump command that backs it up (env MEMSTORE_DATABASE_URL)")
	return cmd
}

// newRestoreCommand is `memstore restore`: a backup into a fresh data
// folder, checked before it is put in place.
func newRestoreCommand(s streams) *cobra.Command {
	var from, dataDir string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "restore a backup into a new data folder, after checking it whole",
		Long: `memstore restore: check a backup made by ` + "`memstore backup`" + ` whole (every file's
checksum and the database's integrity) and write it into a new data folder,
which must not exist or be empty. Then serve it: memstore serve --data DIR.`,
		Example: `  memstore restore --from memstore-2026-12-01.backup --data ./memstore-data-restored
  memstore serve --data ./memstore-data-restored`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case from == "":
				return usageError{Err: errors.New("--from FILE is required: the backup to restore")}
			case dataDir == "":
				return usageError{Err: errors.New("--data DIR is required: the new data folder to restore into")}
			}
			m, err := backup.Restore(cmd.Context(), from, dataDir)
			if err != nil {
				return err
			}
			return describeBackup(s.stdout, "restored "+from+" into", dataDir, m)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the backup file")
	cmd.Flags().StringVar(&dataDir, "data", "", "the new data folder (must not exist or be empty)")
	return cmd
}

// describeBackup prints one line of what was done and the files involved.
func describeBackup(w io.Writer, done, where string, m *backup.Manifest) error {
	fmt.Fprintf(w, "%s %s (taken %s, %d migrations)\n", done, where, m.CreatedAt.Format("2006-01-02 15:04:05 MST"), m.Migrations)
	for _, f := range m.Files {
		fmt.Fprintf(w, "  %-10s %10d bytes  sha256 %s\n", f.Name, f.Size, f.SHA256)
	}
	return nil
}
