// Package sqlitetopg moves a SQLite data folder into an empty PostgreSQL
// database (`memstore migrate --from ./memstore-data --to postgres://…`):
// every table copied row by row with ids, versions (redacted ones
// included), sessions, events and their sequence numbers unchanged, then
// checked by a row count and a hash of every table on both sides.
package sqlitetopg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// kind says how a column is stored on each side.
type kind int

const (
	text   kind = iota // TEXT on both
	stamp              // RFC 3339 TEXT in SQLite, timestamptz in PostgreSQL
	number             // INTEGER / bigint
	blob               // BLOB / bytea
)

type column struct {
	name string
	kind kind
}

type table struct {
	name string
	key  string // orders the rows for the hash
	cols []column
}

func cols(spec string) []column {
	var out []column
	for _, f := range strings.Fields(spec) {
		name, k, _ := strings.Cut(f, ":")
		c := column{name: name}
		switch k {
		case "t":
			c.kind = stamp
		case "n":
			c.kind = number
		case "b":
			c.kind = blob
		}
		out = append(out, c)
	}
	return out
}

// tables lists every table of the schema, parents before children (the
// foreign keys are checked row by row).
var tables = []table{
	{"credentials", "id", cols("id kind name hash environment_id session_id work_id created_at:t revoked_at:t")},
	{"users", "id", cols("id name password_hash created_at:t")},
	{"console_sessions", "id", cols("id user_id hash created_at:t expires_at:t")},
	{"memory_stores", "id", cols("id name description metadata memory_count:n last_sequence:n created_at:t updated_at:t archived_at:t")},
	{"memory_versions", "id", cols("id store_id memory_id operation path content:b content_sha256 content_size_bytes:n created_at:t created_by_type created_by_id redacted_at:t redacted_by_type redacted_by_id sequence:n")},
	{"memories", "id", cols("id store_id path content_sha256 content_size_bytes:n version_id created_at:t updated_at:t")},
	{"environments", "id", cols("id name description config_type scope metadata created_at:t updated_at:t archived_at:t")},
	{"agents", "id", cols("id body created_at:t archived_at:t")},
	{"sessions", "id", cols("id environment_id agent_id status body created_at:t archived_at:t")},
	{"session_resources", "id", cols("id session_id position:n memory_store_id body")},
	{"session_events", "seq", cols("seq:n id session_id type body")},
	{"work_items", "id", cols("id environment_id session_id state metadata created_at:t queued_at:t claimed_at:t worker_id token_id lease_expires_at:t lease_ttl_seconds:n acknowledged_at:t started_at:t latest_heartbeat_at:t stop_requested_at:t stopped_at:t")},
	{"vaults", "id", cols("id body created_at:t archived_at:t")},
	{"vault_credentials", "id", cols("id vault_id auth_type mcp_server_url body secret:b created_at:t archived_at:t")},
	{"webhook_endpoints", "id", cols("id state body secret")},
	{"webhook_events", "id", cols("id type payload created_at:t")},
	{"webhook_deliveries", "seq", cols("seq:n event_id endpoint_id order_key state attempts:n created_at:t next_attempt_at:t lease_until:t lease_token")},
	// Attempts have no key of their own in SQLite (its rowid): a delivery's
	// are told apart by when they were made.
	{"webhook_attempts", "delivery_seq, attempted_at, status_code, error", cols("delivery_seq:n attempted_at:t status_code:n latency_ms:n response_excerpt error")},
}

// Table is one table's outcome: rows copied and the hash both sides agree
// on.
type Table struct {
	Name string
	Rows int64
	Hash string
}

// Copy moves the SQLite database at sqlitePath into the PostgreSQL
// database at pgURL, which must hold no memstore data yet (its schema is
// created if missing). It returns each table's count and hash once both
// sides match.
func Copy(ctx context.Context, sqlitePath, pgURL string) ([]Table, error) {
	// Opening through the backends brings both schemas up to date first.
	src, err := sqlite.Open(ctx, sqlitePath, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	src.Close()
	dst, err := postgres.Open(ctx, pgURL, postgres.Options{})
	if err != nil {
		return nil, err
	}
	dst.Close()

	from, err := sql.Open("sqlite", "file:"+sqlitePath+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer from.Close()
	to, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", postgres.Redact(pgURL), err)
	}
	defer to.Close(ctx)

	err = pgx.BeginFunc(ctx, to, func(tx pgx.Tx) error {
		for _, t := range tables {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("table %s of %s already holds %d rows: copy into an empty database", t.name, postgres.Redact(pgURL), n)
			}
		}
		for _, t := range tables {
			if err := copyTable(ctx, from, tx, t); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		// New events and deliveries continue after the copied ones.
		for _, serial := range []string{"session_events", "webhook_deliveries"} {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+serial+`', 'seq'), coalesce((SELECT max(seq) FROM `+serial+`), 0) + 1, false)`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return verify(ctx, from, to)
}

func copyTable(ctx context.Context, from *sql.DB, to pgx.Tx, t table) error {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	rows, err := from.QueryContext(ctx, `SELECT `+strings.Join(names, ", ")+` FROM `+t.name+` ORDER BY `+t.key)
	if err != nil {
		return err
	}
	defer rows.Close()
	var batch [][]any
	for rows.Next() {
		vals, err := scanSQLite(rows, t.cols)
		if err != nil {
			return err
		}
		batch = append(batch, vals)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = to.CopyFrom(ctx, pgx.Identifier{t.name}, names, pgx.CopyFromRows(batch))
	return err
}

// scanSQLite reads one row, converting each column to what PostgreSQL
// stores (times parsed, nullable columns as nil).
func scanSQLite(rows *sql.Rows, cs []column) ([]any, error) {
	raw := make([]any, len(cs))
	ptrs := make([]any, len(cs))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make([]any, len(cs))
	for i, c := range cs {
		v := raw[i]
		if v == nil {
			continue
		}
		switch c.kind {
		case stamp:
			t, err := time.Parse(time.RFC3339Nano, asString(v))
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.name, err)
			}
			out[i] = t.UTC().Truncate(time.Microsecond)
		case blob:
			out[i] = []byte(asString(v))
		case number:
			out[i] = v
		default:
			out[i] = asString(v)
		}
	}
	return out, nil
}

func asString(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// render writes one value the same way whichever side it came from.
func render(h hash.Hash, c column, v any) {
	switch {
	case v == nil:
		h.Write([]byte{0})
		return
	case c.kind == stamp:
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x
		default:
			t, _ = time.Parse(time.RFC3339Nano, asString(x))
		}
		fmt.Fprintf(h, "t%s", t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	default:
		s := asString(v)
		fmt.Fprintf(h, "v%d:%s", len(s), s)
	}
	h.Write([]byte{1})
}

// verify counts and hashes every table on both sides.
func verify(ctx context.Context, from *sql.DB, to *pgx.Conn) ([]Table, error) {
	var out []Table
	for _, t := range tables {
		names := make([]string, len(t.cols))
		for i, c := range t.cols {
			names[i] = c.name
		}
		query := `SELECT ` + strings.Join(names, ", ") + ` FROM ` + t.name + ` ORDER BY ` + t.key
		hs, ns := sha256.New(), int64(0)
		rows, err := from.QueryContext(ctx, query)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			raw := make([]any, len(names))
			ptrs := make([]any, len(names))
			for i := range raw {
				ptrs[i] = &raw[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			for i, c := range t.cols {
				render(hs, c, raw[i])
			}
			ns++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		hp, np := sha256.New(), int64(0)
		prow, err := to.Query(ctx, query)
		if err != nil {
			return nil, err
		}
		for prow.Next() {
			vals, err := prow.Values()
			if err != nil {
				prow.Close()
				return nil, err
			}
			for i, c := range t.cols {
				render(hp, c, vals[i])
			}
			np++
		}
		prow.Close()
		if err := prow.Err(); err != nil {
			return nil, err
		}
		src, dst := hex.EncodeToString(hs.Sum(nil)), hex.EncodeToString(hp.Sum(nil))
		if ns != np || src != dst {
			return nil, fmt.Errorf("table %s differs after the copy: SQLite %d rows (sha256 %s), PostgreSQL %d rows (sha256 %s)", t.name, ns, src, np, dst)
		}
		out = append(out, Table{Name: t.name, Rows: ns, Hash: src})
	}
	return out, nil
}
