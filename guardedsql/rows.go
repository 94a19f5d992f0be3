package guardedsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// Rows is the result of Query. Iterate with Next and Scan, then Close (or
// use CollectRows, which closes).
type Rows struct {
	rows   engine.Rows
	tx     engine.Tx // set when the rows own a per-statement transaction
	ctx    context.Context
	closed bool
	err    error
	// times marks the result columns whose kind is a date or time
	// (builder.Query.ColumnKinds): scanned into a *any, their text (SQLite)
	// becomes a time.Time. Nil when the query has none.
	times []bool
}

// Next prepares the next row for Scan, reporting false at the end or on
// error (see Err).
func (r *Rows) Next() bool {
	if r.closed {
		return false
	}
	return r.rows.Next()
}

// Scan copies the current row's columns into dest, as database/sql does.
//
// Dates and times scan the same on every engine: into a *time.Time,
// **time.Time or *sql.NullTime, a DATE, DATETIME, TIMESTAMP or timestamptz
// column, a time expression (builder.Now, Expr.Add with an Interval,
// DateTrunc) and SQLite's ISO-8601 text all give a time.Time in UTC (a
// value without a zone is read as UTC). Into a *any, a time.Time the
// driver returns is converted to UTC (PostgreSQL's driver gives the local
// zone), and so is the text of a column whose kind the schema says is a
// date or time (builder.Query.ColumnKinds: a time expression, a column
// declared "date" or "timestamp" in TableDef.Types). Text that is not a
// date or time scanned into a *time.Time is an error.
func (r *Rows) Scan(dest ...any) error {
	d := timeDests(dest)
	if err := r.rows.Scan(d...); err != nil {
		return err
	}
	for i, x := range dest {
		p, ok := x.(*any)
		if !ok {
			continue
		}
		switch v := (*p).(type) {
		case time.Time:
			*p = v.UTC()
		case string:
			if i < len(r.times) && r.times[i] {
				if t, ok := builder.ParseTime(v); ok {
					*p = t
				}
			}
		case []byte:
			if i < len(r.times) && r.times[i] {
				if t, ok := builder.ParseTime(string(v)); ok {
					*p = t
				}
			}
		}
	}
	return nil
}

// timeColumns marks the columns of q whose kind is a date or time; nil
// when none is.
func timeColumns(q builder.Query) []bool {
	ks := q.ColumnKinds()
	var out []bool
	for i, k := range ks {
		if k != builder.KindTime {
			continue
		}
		if out == nil {
			out = make([]bool, len(ks))
		}
		out[i] = true
	}
	return out
}

// timeDests returns dest with every time destination replaced by a
// timeScanner writing to it; dest itself when it has none.
func timeDests(dest []any) []any {
	out := dest
	for i, x := range dest {
		switch x.(type) {
		case *time.Time, **time.Time, *sql.NullTime:
		default:
			continue
		}
		if &out[0] == &dest[0] {
			out = slices.Clone(dest)
		}
		out[i] = timeScanner{x}
	}
	return out
}

// timeScanner scans a date or time of any engine's form into its dst (a
// *time.Time, **time.Time or *sql.NullTime), in UTC.
type timeScanner struct{ dst any }

func (s timeScanner) Scan(src any) error {
	var t time.Time
	switch v := src.(type) {
	case nil:
		switch d := s.dst.(type) {
		case **time.Time:
			*d = nil
			return nil
		case *sql.NullTime:
			*d = sql.NullTime{}
			return nil
		}
		return errors.New("guardedsql: scanning NULL into a time.Time: scan into a *time.Time pointer or sql.NullTime")
	case time.Time:
		t = v.UTC()
	case string:
		var ok bool
		if t, ok = builder.ParseTime(v); !ok {
			return fmt.Errorf("guardedsql: scanning text that is not a date or time (%d bytes) into a time.Time", len(v))
		}
	case []byte:
		var ok bool
		if t, ok = builder.ParseTime(string(v)); !ok {
			return fmt.Errorf("guardedsql: scanning text that is not a date or time (%d bytes) into a time.Time", len(v))
		}
	default:
		return fmt.Errorf("guardedsql: cannot scan a %T into a time.Time", src)
	}
	switch d := s.dst.(type) {
	case *time.Time:
		*d = t
	case **time.Time:
		*d = &t
	case *sql.NullTime:
		*d = sql.NullTime{Time: t, Valid: true}
	}
	return nil
}

// Columns returns the result column names.
func (r *Rows) Columns() ([]string, error) { return r.rows.Columns() }

// Err reports the error that ended iteration, if any.
func (r *Rows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.rows.Err()
}

// Close releases the rows (and commits their transaction, for dialects
// that run each statement in one). It is safe to call twice.
func (r *Rows) Close() error {
	if r.closed {
		return r.err
	}
	r.closed = true
	err := r.rows.Close()
	if r.tx != nil {
		if ierr := r.rows.Err(); ierr != nil || err != nil {
			r.err = errors.Join(ierr, err, r.tx.Rollback(r.ctx))
			return r.err
		}
		err = r.tx.Commit(r.ctx)
	}
	r.err = err
	return err
}

// Row is the result of QueryRow.
type Row struct {
	rows *Rows
	err  error
}

// Scan copies the row into dest and closes the result. With no row in
// scope it returns an error matching both ErrNotFound and sql.ErrNoRows;
// with more than one, ErrAmbiguous, and dest is left zeroed.
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return noRow{}
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	if secondRow(r.rows) {
		zeroDest(dest...)
		return ErrAmbiguous
	}
	return r.rows.Close()
}

// RowFunc turns the current row into a T.
type RowFunc[T any] func(r *Rows) (T, error)

// CollectRows calls fn for every row and closes rows.
func CollectRows[T any](rows *Rows, fn RowFunc[T]) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := fn(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// CollectOne returns fn of the row and closes rows; with no row it
// returns an error matching ErrNotFound and sql.ErrNoRows, and with more
// than one ErrAmbiguous (and the zero T).
func CollectOne[T any](rows *Rows, fn RowFunc[T]) (T, error) {
	defer rows.Close()
	var zero T
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return zero, err
		}
		return zero, noRow{}
	}
	v, err := fn(rows)
	if err != nil {
		return zero, err
	}
	if secondRow(rows) {
		return zero, ErrAmbiguous
	}
	return v, rows.Close()
}

// All runs q on db (a *DB or *Tx) and collects every row with fn.
func All[T any](ctx context.Context, db Querier, q builder.Query, fn RowFunc[T]) ([]T, error) {
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, fn)
}

// One runs q on db and returns fn of its row: ErrNotFound with none,
// ErrAmbiguous with more than one.
func One[T any](ctx context.Context, db Querier, q builder.Query, fn RowFunc[T]) (T, error) {
	rows, err := db.Query(ctx, q)
	if err != nil {
		var zero T
		return zero, err
	}
	return CollectOne(rows, fn)
}

// Scalar is a RowFunc for single-column results: Scalar[int64] reads a
// COUNT, Scalar[string] a name.
func Scalar[T any](r *Rows) (T, error) {
	var v T
	err := r.Scan(&v)
	return v, err
}

// RowToStruct is a RowFunc that scans each column into the field of T
// (a struct) with the matching `db:"name"` tag, or else whose name
// matches the column ignoring case and underscores (CheckIn <- check_in).
// A column with no field is an error rather than silently dropped; fields
// with no column keep their zero value. Name result columns with
// Expr.As where two tables share a column name.
func RowToStruct[T any](r *Rows) (T, error) {
	var v T
	cols, err := r.Columns()
	if err != nil {
		return v, err
	}
	idx, err := structMapping(reflect.TypeFor[T](), cols)
	if err != nil {
		return v, err
	}
	rv := reflect.ValueOf(&v).Elem()
	dest := make([]any, len(idx))
	for i, fi := range idx {
		dest[i] = rv.FieldByIndex(fi).Addr().Interface()
	}
	return v, r.Scan(dest...)
}

type mappingKey struct {
	t    reflect.Type
	cols string
}

var mappings sync.Map // mappingKey -> [][]int

func structMapping(t reflect.Type, cols []string) ([][]int, error) {
	key := mappingKey{t, strings.Join(cols, "\x00")}
	if m, ok := mappings.Load(key); ok {
		return m.([][]int), nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("guardedsql: RowToStruct needs a struct type, not %s", t)
	}
	byName := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name := f.Tag.Get("db")
		if name == "-" {
			continue
		}
		if name == "" {
			name = fold(f.Name)
		}
		if _, dup := byName[name]; !dup {
			byName[name] = f.Index
		}
	}
	out := make([][]int, len(cols))
	for i, c := range cols {
		fi, ok := byName[c]
		if !ok {
			fi, ok = byName[fold(c)]
		}
		if !ok {
			return nil, fmt.Errorf("guardedsql: result column %q has no field in %s", c, t)
		}
		out[i] = fi
	}
	mappings.Store(key, out)
	return out, nil
}

func fold(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
