package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/postgres"
	"github.com/memstore/memstore/internal/storage/sqlstore"
	"github.com/memstore/memstore/internal/testenv"
)

// A create's path check reads the paths it asks about, not its store: the
// plan PostgreSQL keeps for the statement (its generic plan, used once it
// stops planning each execution, and the one a batch's reads ahead run on)
// is made while the table is small, and must stay a lookup when the store
// has grown to thousands of memories. With the paths as one IN list that
// plan read every memory of the store. Both forms are checked: one path
// check, and a batch's path checks in one lateral statement.
func TestAPathCheckReadsItsPathsNotItsStore(t *testing.T) {
	plansReadFewRows(t, func(db *postgres.DB, storeID string) (string, []any, string, []any) {
		query, one := sqlstore.PathConflictQuery(storeID, "/c1/r2/new.md", "")
		var reads [][]any
		for _, p := range []string{"/c1/r2/new.md", "/c2/r3/other.md", "/c3/r0/third.md"} {
			_, a := sqlstore.PathConflictQuery(storeID, p, "")
			reads = append(reads, a)
		}
		many, arrays := db.LateralReads(query, reads)
		return db.Numbered(query), one, many, arrays
	})
}

// The statements that check a guessed batch's reads (guess.go) look up the
// rows they check, on the plan kept for them: a path check's, and a
// memory's head, one alone or a batch's in one statement. Checking heads
// with NOT EXISTS, that plan hashed every memory of the table.
func TestGuessChecksReadTheirRowsNotTheTable(t *testing.T) {
	for name, reads := range map[string]func(storeID string) (string, [][]any){
		"path": func(storeID string) (string, [][]any) {
			query, one := sqlstore.PathConflictQuery(storeID, "/c1/r2/new.md", "")
			_, two := sqlstore.PathConflictQuery(storeID, "/c2/r3/other.md", "")
			return query, [][]any{one, two}
		},
		"head": func(storeID string) (string, [][]any) {
			query, _ := sqlstore.HeadCheckQuery(storeID, "", "")
			var heads [][]any
			for _, g := range []int{3, 17, 29} {
				_, a := sqlstore.HeadCheckQuery(storeID, fmt.Sprint("mem_", g), fmt.Sprint("memver_", g))
				heads = append(heads, a)
			}
			return query, heads
		},
	} {
		t.Run(name, func(t *testing.T) {
			plansReadFewRows(t, func(db *postgres.DB, storeID string) (string, []any, string, []any) {
				query, args := reads(storeID)
				one, oneArgs := db.GuessCheck(query, args[:1])
				many, manyArgs := db.GuessCheck(query, args)
				return one, oneArgs, many, manyArgs
			})
		})
	}
}

// plansReadFewRows checks that a statement for one read and one for a
// batch's reads (a lateral statement, its arguments arrays) read a few
// rows of memories once the store has grown from 40 memories to 3,000: on
// the generic plans made while it was small, and on those made once the
// table's statistics were gathered. The memories are mem_1 … at
// version memver_1 …, under /c0 … /c7.
func plansReadFewRows(t *testing.T, statements func(db *postgres.DB, storeID string) (one string, oneArgs []any, many string, manyArgs []any)) {
	url := testenv.PostgresSchema(t)
	db := openOn(t, url)
	ctx := t.Context()
	st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: "grows"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	query, args, lateral, arrays := statements(db, st.ID)
	var literals, arrayLiterals []string
	for _, a := range args {
		literals = append(literals, quote(a.(string)))
	}
	for _, a := range arrays {
		var elems []string
		for _, v := range a.([]string) {
			elems = append(elems, quote(v))
		}
		arrayLiterals = append(arrayLiterals, "ARRAY["+strings.Join(elems, ", ")+"]")
	}
	one := "EXECUTE read_one(" + strings.Join(literals, ", ") + ")"
	many := "EXECUTE read_many(" + strings.Join(arrayLiterals, ", ") + ")"
	insert := func(from, to int) string {
		return fmt.Sprintf(`INSERT INTO memories (id, store_id, path, content_sha256, content_size_bytes, version_id, created_at, updated_at, search)
			SELECT 'mem_' || g, '%s', '/c' || g %% 8 || '/r' || g %% 5 || '/m' || g || '.md', '', 0, 'memver_' || g, now(), now(), ''::tsvector
			FROM generate_series(%d, %d) g`, st.ID, from, to)
	}
	for _, stmt := range []string{
		// Statistics gathered mid-test would make PostgreSQL plan
		// again, on the grown table, and hide a plan that reads the store.
		"ALTER TABLE memories SET (autovacuum_enabled = off)",
		insert(1, 40),
		"SET plan_cache_mode = force_generic_plan",
		"PREPARE read_one AS " + query,
		"PREPARE read_many AS " + lateral,
		one, many, // the plans are made now, on a small table, and kept
		insert(41, 3000),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	check := func(when string) {
		for _, execute := range []string{one, many} {
			var plan []struct {
				Plan planNode `json:"Plan"`
			}
			if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+execute).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			if read := plan[0].Plan.rowsRead("memories"); read > 10 {
				out, _ := json.MarshalIndent(plan, "", "  ")
				t.Errorf("%.40s…, planned %s: read %v rows of memories in a store of 3,000, want a few lookups; plan:\n%s", execute, when, read, out)
			}
		}
	}
	check("on 40 memories")
	// And planned again once the statistics know the table's size.
	for _, stmt := range []string{"ANALYZE memories", "DEALLOCATE read_one", "DEALLOCATE read_many", "PREPARE read_one AS " + query, "PREPARE read_many AS " + lateral} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	check("on 3,000")
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// rowsRead is how many rows the nodes of the tree read from table: the
// rows they returned and those their filters removed.
func (p planNode) rowsRead(table string) float64 {
	n := 0.0
	if p.Relation == table {
		n = (p.Rows + p.Removed) * p.Loops
	}
	for _, c := range p.Plans {
		n += c.rowsRead(table)
	}
	return n
}

// A batch of memory writes locks its stores, checks their guessed
// counters and writes their counters, and a batch of appends locks its
// sessions, on the generic plans of their statements, made once per
// connection, with the batch's plan settings (genericPlans): each must find
// its few rows by key among thousands, not read the table, whether its
// plan was made on a table never analyzed, on statistics gathered while the
// table held three rows (autovacuum's, soon after a deployment starts), or
// on statistics of the grown table.
func TestBatchStatementsOnGenericPlansReadOnlyTheirRows(t *testing.T) {
	for i, s := range postgres.PlannedStatements(nil) {
		t.Run(s.Name, func(t *testing.T) {
			url := testenv.PostgresSchema(t)
			db := openOn(t, url)
			ctx := t.Context()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			exec := func(sql string) {
				t.Helper()
				if _, err := conn.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			var ids []string
			grow := `INSERT INTO memory_stores (id, name, created_at, updated_at) SELECT 'memstore_many' || g, 'many', now(), now() FROM generate_series(1, 3000) g`
			shrink := "DELETE FROM memory_stores WHERE name = 'many'"
			switch s.Table {
			case "memory_stores":
				for i := range 3 {
					st, err := db.CreateMemoryStore(ctx, storage.NewMemoryStore{Name: fmt.Sprint("s", i)})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, st.ID)
				}
			case "sessions":
				exec(`INSERT INTO environments (id, name, config_type, created_at, updated_at) VALUES ('env_plans', 'plans', 'cloud', now(), now())`)
				exec(`INSERT INTO sessions (id, environment_id, agent_id, status, body, created_at) SELECT 'sesn_' || g, 'env_plans', 'agent', 'idle', '{}', now() FROM generate_series(1, 3) g`)
				ids = []string{"sesn_1", "sesn_2", "sesn_3"}
				grow = `INSERT INTO sessions (id, environment_id, agent_id, status, body, created_at) SELECT 'sesn_many' || g, 'env_plans', 'agent', 'idle', '{}', now() FROM generate_series(1, 3000) g`
				shrink = "DELETE FROM sessions WHERE id LIKE 'sesn_many%'"
			default:
				t.Fatalf("statement %s on table %s", s.Name, s.Table)
			}
			stmt := postgres.PlannedStatements(ids)[i]
			// EXECUTE takes its arguments as literals: arrays of text,
			// bigint and boolean.
			params := make([]string, len(stmt.Args))
			for i, a := range stmt.Args {
				var elems []string
				switch a := a.(type) {
				case []string:
					for _, v := range a {
						elems = append(elems, `"`+v+`"`)
					}
				case []int64:
					for _, v := range a {
						elems = append(elems, fmt.Sprint(v))
					}
				case []bool:
					for _, v := range a {
						elems = append(elems, fmt.Sprint(v))
					}
				}
				params[i] = quote("{" + strings.Join(elems, ",") + "}")
			}
			explain := func(when string) {
				t.Helper()
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, postgres.GenericPlans); err != nil {
					t.Fatal(err)
				}
				var plan []struct {
					Plan planNode `json:"Plan"`
				}
				if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE stores("+strings.Join(params, ", ")+")").Scan(&plan); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if read := plan[0].Plan.rowsRead(stmt.Table); read > 3 {
					out, _ := json.MarshalIndent(plan, "", "  ")
					t.Errorf("%s, %s: read %v rows of %s for 3 rows, want 3 lookups; plan:\n%s", stmt.Name, when, read, stmt.Table, out)
				}
			}
			exec("ALTER TABLE " + stmt.Table + " SET (autovacuum_enabled = off)")
			exec("PREPARE stores AS " + stmt.Query)
			explain("planned on a table never analyzed")
			exec(grow)
			explain("grown, planned on a table never analyzed")
			exec(shrink)
			exec("ANALYZE " + stmt.Table)
			exec("DEALLOCATE stores")
			exec("PREPARE stores AS " + stmt.Query)
			explain("planned on three rows analyzed")
			exec(grow)
			explain("grown, planned on three rows analyzed")
			exec("ANALYZE " + stmt.Table)
			exec("DEALLOCATE stores")
			exec("PREPARE stores AS " + stmt.Query)
			explain("planned on the grown table analyzed")
		})
	}
}
