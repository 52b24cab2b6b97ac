package storage

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change of a backend.
type Migration struct {
	Version int
	Name    string // the file's name, for messages
	SQL     string
}

// Migrations lists a backend's migrations/NNNN_*.sql files in fsys in
// order of their numbers, which is the order to apply them in.
func Migrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: base, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// MigrationTx is one migration's transaction, as a backend runs it.
type MigrationTx interface {
	// Applied reports whether version is recorded as applied.
	Applied(ctx context.Context, version int) (bool, error)
	// Apply runs m's SQL and records its version as applied.
	Apply(ctx context.Context, m Migration) error
}

// Migrate applies the migrations of fsys (see Migrations) that are not
// applied yet, in order, each in its own transaction: inTx runs fn in one
// and commits when it returns nil. A migration that fails leaves the
// schema at the one before it.
func Migrate(ctx context.Context, fsys fs.FS, inTx func(fn func(MigrationTx) error) error) error {
	all, err := Migrations(fsys)
	if err != nil {
		return err
	}
	for _, m := range all {
		err := inTx(func(tx MigrationTx) error {
			done, err := tx.Applied(ctx, m.Version)
			if err != nil || done {
				return err
			}
			if err := tx.Apply(ctx, m); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
