package postgres

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merged row inserts. A batch's writes each send their own statement per
// row (a create: its version's INSERT, then its memory's; an update: its
// version's INSERT, then its memory's UPDATE), and every statement costs
// the batch's one backend a Bind, an executor start and a reply, while it
// holds the batch's stores' locks. Where a batch's deferred statements run
// one after another, the INSERTs of one row of one statement text go as
// one statement over arrays, one per argument:
//
//	INSERT INTO t (a, b) SELECT * FROM unnest($1::text[], $2::bigint[])
//
// Replayed on a copy of the schema (batches of eight creates: BEGIN, the
// lock, the rows, the counters, COMMIT), the backend's CPU per create was
// 95–98 µs as one statement per row and 75–81 µs merged
// (docs/postgresql-performance.md).
//
// What each write reads is unchanged: the statements are deferred, sent
// together with the batch's next read or its COMMIT, and no write reads
// between them. Their order changes: each text's statements go, merged,
// at the place of its first. That is the same outcome when the statements
// of a run write distinct rows of each table (checked: a run whose rows of
// a table repeat an id is sent as it is), and rows of different tables
// reach no trigger or key of the others' (the memories' search trigger
// reads the memory's version only when a row comes without its entry; a
// write defers its version's INSERT and its memory's statement one after
// the other, so the versions' statement, at the place of the run's first
// version, still comes before every memory row whose version is in the
// run). An UPDATE of one row by its id that does not move it (an update's
// memory row) stays in the run, unmerged, in its order among the run's
// updates: its row is not one the run inserts (checked), and a path it
// does not set is neither freed nor taken. Any other statement (a DELETE,
// a rename's UPDATE) ends a run.
// A merged statement that fails is not any one write's failure: the batch
// runs again unmerged, and the failing write is found then
// (deferredExec.merged).
//
// The UPDATEs themselves are not merged: as a join of the table with the
// arrays, PostgreSQL may keep a generic plan made while the table was small
// that reads all of it (as it did for the stores' lock; guess.go).

// rowStatement is a deferred statement's shape when it writes one row:
// an INSERT, or an UPDATE by id that does not move the row.
type rowStatement struct {
	table string
	// columns[i] is the column of the statement's argument $i+1.
	columns []string
	update  bool
}

var (
	insertShape = regexp.MustCompile(`^INSERT INTO ([a-z_]+) \(([a-z0-9_, ]+)\) VALUES \(([$0-9, ]+)\)$`)
	updateShape = regexp.MustCompile(`^UPDATE ([a-z_]+) SET ((?:[a-z0-9_]+ = \$[0-9]+, )*[a-z0-9_]+ = \$[0-9]+) WHERE id = \$([0-9]+)$`)
)

// parseRowStatement reads query (numbered) as one row's INSERT of its
// arguments in order, or one row's UPDATE by id that sets neither its id
// nor its path; ok is false for any other statement.
func parseRowStatement(query string) (rowStatement, bool) {
	if m := insertShape.FindStringSubmatch(query); m != nil {
		cols := strings.Split(m[2], ", ")
		params := strings.Split(m[3], ", ")
		if len(cols) != len(params) {
			return rowStatement{}, false
		}
		for i, p := range params {
			if p != "$"+strconv.Itoa(i+1) {
				return rowStatement{}, false
			}
		}
		return rowStatement{table: m[1], columns: cols}, true
	}
	if m := updateShape.FindStringSubmatch(query); m != nil {
		sets := strings.Split(m[2], ", ")
		cols := make([]string, len(sets)+1)
		for _, set := range append(sets, "id = $"+m[3]) {
			col, p, _ := strings.Cut(set, " = $")
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > len(cols) || cols[n-1] != "" || (col == "id") != (set == "id = $"+m[3]) || col == "path" {
				return rowStatement{}, false
			}
			cols[n-1] = col
		}
		return rowStatement{table: m[1], columns: cols, update: true}, true
	}
	return rowStatement{}, false
}

// rowID is the id argument of a row statement's args, "" when it has
// none.
func (r rowStatement) rowID(args []any) string {
	i := slices.Index(r.columns, "id")
	if i < 0 || i >= len(args) {
		return ""
	}
	id, _ := args[i].(string)
	return id
}

// mergedQuery is the statement inserting the rows of r's statements from
// one array per argument, typed by the table's columns; ok is false when
// a column's type is not known.
func (r rowStatement) mergedQuery(types map[string]string) (string, bool) {
	arrays := make([]string, len(r.columns))
	for i, col := range r.columns {
		t, ok := types[col]
		if !ok {
			return "", false
		}
		arrays[i] = fmt.Sprintf("$%d::%s[]", i+1, t)
	}
	return "INSERT INTO " + r.table + " (" + strings.Join(r.columns, ", ") + ") SELECT * FROM unnest(" + strings.Join(arrays, ", ") + ")", true
}

// merge returns deferred with each run of row statements merged, one
// statement per text of two or more, where the run allows it (above).
func (s *DB) merge(deferred []deferredExec) []deferredExec {
	var out []deferredExec
	for i := 0; i < len(deferred); {
		j := i
		var shapes []rowStatement
		for ; j < len(deferred); j++ {
			r, ok := s.rowStatement(deferred[j].query)
			if !ok {
				break
			}
			shapes = append(shapes, r)
		}
		if j-i < 2 { // a statement of another shape, or a row's alone
			out = append(out, deferred[i])
			i++
			continue
		}
		out = append(out, s.mergeRun(deferred[i:j], shapes)...)
		i = j
	}
	return out
}

// mergeRun merges the inserts of a run of row statements, shapes[k] being
// run[k]'s, or returns it as it is when two of its statements write one
// row.
func (s *DB) mergeRun(run []deferredExec, shapes []rowStatement) []deferredExec {
	seen := map[string]bool{}
	for k, d := range run {
		id := shapes[k].rowID(d.args)
		key := shapes[k].table + "\x00" + id
		if id == "" || seen[key] {
			return run
		}
		seen[key] = true
	}
	var (
		order  []string
		groups = map[string][]int{}
	)
	for k, d := range run {
		if _, ok := groups[d.query]; !ok {
			order = append(order, d.query)
		}
		groups[d.query] = append(groups[d.query], k)
	}
	var out []deferredExec
	for _, q := range order {
		g := groups[q]
		shape := shapes[g[0]]
		merged, ok := shape.mergedQuery(s.columnTypes[shape.table])
		if len(g) < 2 || !ok || shape.update {
			for _, k := range g {
				out = append(out, run[k])
			}
			continue
		}
		args := make([]any, len(shape.columns))
		for a := range args {
			column := make([]any, len(g))
			for r, k := range g {
				column[r] = run[k].args[a]
			}
			args[a] = typedColumn(column)
		}
		out = append(out, deferredExec{query: merged, args: args, write: -1, merged: true})
		s.merges.Add(1)
	}
	return out
}

// typedColumn is an argument's values as a slice of their type where pgx
// encodes that slice without reflection (strings, int64s, times), and as
// they are otherwise: pgx reflects on a []any's every element, 5 % of the
// server's CPU in the write benchmark at 8 clients.
func typedColumn(values []any) any {
	switch values[0].(type) {
	case string:
		return typedSlice[string](values)
	case int64:
		return typedSlice[int64](values)
	case time.Time:
		return typedSlice[time.Time](values)
	}
	return values
}

// typedSlice is values as a []T, or values when one is not a T.
func typedSlice[T any](values []any) any {
	out := make([]T, len(values))
	for i, v := range values {
		t, ok := v.(T)
		if !ok {
			return values
		}
		out[i] = t
	}
	return out
}

// rowStatement is parseRowStatement of query, kept per text.
func (s *DB) rowStatement(query string) (rowStatement, bool) {
	if r, ok := s.rowStatements.Load(query); ok {
		r := r.(*rowStatement)
		return *r, r.table != ""
	}
	r, ok := parseRowStatement(query)
	if ok {
		if _, known := s.columnTypes[r.table]; !known {
			r, ok = rowStatement{}, false
		}
	}
	s.rowStatements.Store(query, &r)
	return r, ok
}

// loadColumnTypes reads the type of every column of the tables merged
// statements insert into, for their arrays' casts.
func (s *DB) loadColumnTypes(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relname = ANY($1) AND c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 AND NOT a.attisdropped`,
		mergedTables)
	if err != nil {
		return fmt.Errorf("read the columns' types: %w", err)
	}
	defer rows.Close()
	s.columnTypes = map[string]map[string]string{}
	for rows.Next() {
		var table, column, typ string
		if err := rows.Scan(&table, &column, &typ); err != nil {
			return err
		}
		if s.columnTypes[table] == nil {
			s.columnTypes[table] = map[string]string{}
		}
		s.columnTypes[table][column] = typ
	}
	return rows.Err()
}

// mergedTables are the tables whose row inserts are merged: those a
// memory write inserts a row into.
var mergedTables = []string{"memories", "memory_versions"}
