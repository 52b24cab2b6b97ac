package postgres

import (
	"context"
	"testing"

	"github.com/memstore/memstore/internal/storage/sqlstore"
	"github.com/memstore/memstore/internal/testenv"
)

// A batch's reads ahead run on generic plans, and the statements after
// them on the server's own setting again: the setting is the reads' alone.
func TestReadsAheadAloneRunOnGenericPlans(t *testing.T) {
	ctx := t.Context()
	db, err := Open(ctx, testenv.PostgresSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The server's own setting: the URL's, the role's or the database's.
	var own string
	if err := db.pool.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&own); err != nil {
		t.Fatal(err)
	}
	const read = `SELECT current_setting(?)`
	var ahead, after string
	var readAhead bool
	err = db.writeMemory(ctx, "memstore_none", func(ctx context.Context, c sqlstore.Conn, _ sqlstore.StoreCounters) error {
		// The discovery run records this first read; the real run finds
		// its answer, fetched with the batch's locks.
		if ra, ok := c.(sqlstore.ReadAhead); ok {
			if row, ok := ra.Ahead(read, []any{"plan_cache_mode"}); ok {
				readAhead = true
				if err := row.Scan(&ahead); err != nil {
					return err
				}
				return c.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&after)
			}
		}
		return c.QueryRow(ctx, read, "plan_cache_mode").Scan(&ahead)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !readAhead {
		t.Fatal("the write's first read was not read ahead")
	}
	if ahead != "force_generic_plan" || after != own {
		t.Errorf("plan_cache_mode: %q for the read ahead, %q after it; want force_generic_plan, then the server's %q", ahead, after, own)
	}
}
