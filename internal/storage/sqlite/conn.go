package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// queryer is what the database, a transaction and a group-commit batch
// offer.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// conn is sqlstore.Conn on SQLite: times go in and out as fixed-width text
// (see timeLayout), and a query that finds no row is storage.ErrNotFound.
type conn struct{ q queryer }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, timeArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rs, err := c.q.QueryContext(ctx, query, timeArgs(args)...)
	if err != nil {
		return nil, err
	}
	return rows{rs}, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return row{c.q.QueryRowContext(ctx, query, timeArgs(args)...)}
}

type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(timeDest(dest)...)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ErrNotFound
	}
	return err
}

type rows struct{ *sql.Rows }

func (r rows) Scan(dest ...any) error { return r.Rows.Scan(timeDest(dest)...) }
func (r rows) Close()                 { r.Rows.Close() }

// timeArgs writes times as text, in place (see sqlstore.Conn); other
// arguments go through unchanged.
func timeArgs(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			args[i] = formatTime(v)
		case *time.Time:
			if v == nil {
				args[i] = nil
			} else {
				args[i] = formatTime(*v)
			}
		}
	}
	return args
}

// timeDest reads time columns from their text, in place (see
// sqlstore.Row).
func timeDest(dest []any) []any {
	for i, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			dest[i] = textTime{p}
		case **time.Time:
			dest[i] = nullTextTime{p}
		}
	}
	return dest
}

// textTime scans a time column.
type textTime struct{ t *time.Time }

func (s textTime) Scan(src any) error {
	switch v := src.(type) {
	case string:
		t, err := parseTime(v)
		*s.t = t
		return err
	case []byte:
		t, err := parseTime(string(v))
		*s.t = t
		return err
	case time.Time:
		*s.t = v.UTC()
		return nil
	}
	return fmt.Errorf("sqlite: a time column holds %T", src)
}

// nullTextTime scans a nullable time column.
type nullTextTime struct{ t **time.Time }

func (s nullTextTime) Scan(src any) error {
	if src == nil {
		*s.t = nil
		return nil
	}
	t := new(time.Time)
	if err := (textTime{t}).Scan(src); err != nil {
		return err
	}
	*s.t = t
	return nil
}
