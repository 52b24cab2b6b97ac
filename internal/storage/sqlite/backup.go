package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Backup writes a consistent copy of the database file src to dst with
// VACUUM INTO, while a server keeps reading and writing src: the copy is
// made inside one read transaction, so it holds every transaction that
// committed before the copy began and none after. dst must not exist.
// VACUUM INTO rather than copying the file: a copy of a WAL database taken
// under writes can tear, and the vacuumed copy is also compact.
func Backup(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("open the database to back up: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+src+"?"+url.Values{"_pragma": {"busy_timeout(10000)"}}.Encode())
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// Check opens the database file at path read-only and checks that it is
// whole (PRAGMA integrity_check) and that it is a memstore database (it has
// the table of applied migrations); it returns how many migrations the
// file has applied.
func Check(ctx context.Context, path string) (migrations int, err error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	q := url.Values{"mode": {"ro"}, "_pragma": {"busy_timeout(10000)"}}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return 0, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return 0, err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("%s fails SQLite's integrity check: %s", path, strings.Join(problems, "; "))
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&migrations); err != nil {
		return 0, errors.New(path + " is an SQLite database but not memstore's (it has no schema_migrations table)")
	}
	return migrations, nil
}
