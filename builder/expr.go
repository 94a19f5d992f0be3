package builder

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrInvalid is wrapped by every error Build returns: unknown tables or
// columns, invalid or duplicate aliases, values that cannot be bound, a
// column of a table the statement does not reference, and so on.
var ErrInvalid = errors.New("builder: invalid statement")

// ErrType is wrapped (with ErrInvalid) by Build when a bound value cannot
// be converted to the kind of the column it is compared with, assigned to
// or inserted into (a bool for a text column, "12abc" for an integer one).
// The column is named; the value is not.
var ErrType = fmt.Errorf("%w: value does not fit the column's type", ErrInvalid)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// TableRef is a reference to a schema table in a statement, under an alias.
// Obtain one from Schema.Table; As renames it. Every TableRef value is a
// distinct reference: use the same value for the FROM clause and for the
// columns read from it.
type TableRef struct {
	ref *sqlast.Ref
	err error
}

// As returns a new reference to the same table under alias. Aliases are
// ASCII identifiers that do not start with '_' and must be unique within a
// statement, subqueries included.
func (t TableRef) As(alias string) TableRef {
	if t.err != nil {
		return t
	}
	if !validAlias(alias) {
		return TableRef{err: invalid("alias %q for table %s is not a valid identifier (letters, digits, '_', not starting with '_')", alias, t.ref.Table.Name)}
	}
	if t.ref.Virtual() {
		return t.virtualAs(alias) // compound.go
	}
	return TableRef{ref: sqlast.NewRef(t.ref.Table, alias)}
}

// Name is the table's name ("" for an invalid reference).
func (t TableRef) Name() string {
	if t.ref == nil {
		return ""
	}
	return t.ref.Table.Name
}

// Alias is the reference's alias ("" for an invalid reference).
func (t TableRef) Alias() string {
	if t.ref == nil {
		return ""
	}
	return t.ref.Alias
}

// Col returns the named column of this reference. An unknown column is
// reported by Build.
func (t TableRef) Col(name string) Expr {
	if t.err != nil {
		return Expr{err: t.err}
	}
	c := t.ref.Col(name)
	if c == nil {
		return Expr{err: invalid("table %s has no column %q", t.ref.Table.Name, name)}
	}
	return Expr{x: c}
}

// Cols selects the named columns of this reference, in order.
func (t TableRef) Cols(names ...string) Selectable {
	l := colList{}
	for _, n := range names {
		l = append(l, t.Col(n))
	}
	return l
}

// All selects every declared column of the table, in declaration order.
func (t TableRef) All() Selectable {
	if t.err != nil {
		return colList{Expr{err: t.err}}
	}
	return t.Cols(t.ref.Table.Columns...)
}

// Selectable is something a SELECT list can hold: an Expr, an Expr renamed
// with As, or a list from TableRef.Cols / TableRef.All.
type Selectable interface {
	items() ([]sqlast.Item, error)
}

type colList []Expr

func (l colList) items() ([]sqlast.Item, error) {
	var out []sqlast.Item
	for _, e := range l {
		if e.err != nil {
			return nil, e.err
		}
		out = append(out, sqlast.Item{X: e.x})
	}
	return out, nil
}

type aliased struct {
	e  Expr
	as string
}

func (a aliased) items() ([]sqlast.Item, error) {
	if a.e.err != nil {
		return nil, a.e.err
	}
	if !validAlias(a.as) {
		return nil, invalid("result name %q is not a valid identifier", a.as)
	}
	return []sqlast.Item{{X: a.e.x, As: a.as}}, nil
}

// Expr is a column of a table reference or an aggregate over one. The zero
// Expr is invalid.
type Expr struct {
	x   sqlast.Expr
	err error
}

func (e Expr) items() ([]sqlast.Item, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return []sqlast.Item{{X: e.x}}, nil
}

func (e Expr) check() error {
	if e.err != nil {
		return e.err
	}
	if e.x == nil {
		return invalid("zero Expr")
	}
	return nil
}

// As names the expression in the result set.
func (e Expr) As(name string) Selectable { return aliased{e: e, as: name} }

func (e Expr) cmpVal(op sqlast.CmpOp, v any) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	val, err := typedValue(e.x, v)
	if err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.CmpVal{Op: op, X: e.x, V: val}}
}

func (e Expr) cmpExpr(op sqlast.CmpOp, o Expr) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	if err := o.check(); err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.CmpExpr{Op: op, X: e.x, Y: o.x}}
}

// Eq is e = v, with v bound as a parameter. Compare with another column
// using EqCol.
func (e Expr) Eq(v any) Pred { return e.cmpVal(sqlast.Eq, v) }

// Ne is e <> v.
func (e Expr) Ne(v any) Pred { return e.cmpVal(sqlast.Ne, v) }

// Lt is e < v.
func (e Expr) Lt(v any) Pred { return e.cmpVal(sqlast.Lt, v) }

// Le is e <= v.
func (e Expr) Le(v any) Pred { return e.cmpVal(sqlast.Le, v) }

// Gt is e > v.
func (e Expr) Gt(v any) Pred { return e.cmpVal(sqlast.Gt, v) }

// Ge is e >= v.
func (e Expr) Ge(v any) Pred { return e.cmpVal(sqlast.Ge, v) }

// EqCol is e = o, comparing two expressions (a join condition, typically).
func (e Expr) EqCol(o Expr) Pred { return e.cmpExpr(sqlast.Eq, o) }

// NeCol is e <> o.
func (e Expr) NeCol(o Expr) Pred { return e.cmpExpr(sqlast.Ne, o) }

// LtCol is e < o.
func (e Expr) LtCol(o Expr) Pred { return e.cmpExpr(sqlast.Lt, o) }

// LeCol is e <= o.
func (e Expr) LeCol(o Expr) Pred { return e.cmpExpr(sqlast.Le, o) }

// GtCol is e > o.
func (e Expr) GtCol(o Expr) Pred { return e.cmpExpr(sqlast.Gt, o) }

// GeCol is e >= o.
func (e Expr) GeCol(o Expr) Pred { return e.cmpExpr(sqlast.Ge, o) }

// Between is lo <= e <= hi (SQL BETWEEN, inclusive at both ends).
func (e Expr) Between(lo, hi any) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	l, err := typedValue(e.x, lo)
	if err != nil {
		return Pred{err: err}
	}
	h, err := typedValue(e.x, hi)
	if err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.Between{X: e.x, Lo: l, Hi: h}}
}

// In is e IN (vals...). A single slice argument is expanded, so
// e.In(ids) works for ids []int64. An empty list matches nothing.
func (e Expr) In(vals ...any) Pred { return e.in(false, vals) }

// NotIn is e NOT IN (vals...). An empty list matches everything.
func (e Expr) NotIn(vals ...any) Pred { return e.in(true, vals) }

func (e Expr) in(not bool, vals []any) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	if len(vals) == 1 {
		if rv := reflect.ValueOf(vals[0]); rv.IsValid() && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
			vals = make([]any, rv.Len())
			for i := range vals {
				vals[i] = rv.Index(i).Interface()
			}
		}
	}
	out := make([]sqlast.Value, 0, len(vals))
	for _, v := range vals {
		bv, err := typedValue(e.x, v)
		if err != nil {
			return Pred{err: err}
		}
		out = append(out, bv)
	}
	return Pred{p: &sqlast.InList{X: e.x, Vals: out, Not: not}}
}

// InQuery is e IN (sub), where sub selects exactly one column. The guard
// applies to sub's tables as to any other.
func (e Expr) InQuery(sub Query) Pred { return e.inQuery(false, sub) }

// NotInQuery is e NOT IN (sub).
func (e Expr) NotInQuery(sub Query) Pred { return e.inQuery(true, sub) }

func (e Expr) inQuery(not bool, sub Query) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	if sub.s == nil {
		return Pred{err: invalid("zero Query used as a subquery")}
	}
	if len(sub.s.Items) != 1 {
		return Pred{err: invalid("IN subquery must select exactly one column, not %d", len(sub.s.Items))}
	}
	return Pred{p: &sqlast.InSelect{X: e.x, Sub: sub.s, Not: not}}
}

// Like is e LIKE pattern ESCAPE '\'. The pattern is bound as a parameter;
// '%' and '_' are wildcards and '\' escapes them (see EscapeLike). Case
// sensitivity is the engine's: SQLite and MySQL compare ASCII letters
// case-insensitively, PostgreSQL does not.
func (e Expr) Like(pattern string) Pred { return e.like(false, pattern) }

// NotLike is e NOT LIKE pattern ESCAPE '\'.
func (e Expr) NotLike(pattern string) Pred { return e.like(true, pattern) }

// Contains matches values containing s literally (wildcards in s escaped).
func (e Expr) Contains(s string) Pred { return e.like(false, "%"+EscapeLike(s)+"%") }

// HasPrefix matches values starting with s literally.
func (e Expr) HasPrefix(s string) Pred { return e.like(false, EscapeLike(s)+"%") }

func (e Expr) like(not bool, pattern string) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.Like{X: e.x, Pattern: sqlast.Value{V: pattern}, Not: not}}
}

// EscapeLike escapes '\', '%' and '_' in s for use in a Like pattern.
func EscapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// IsNull is e IS NULL.
func (e Expr) IsNull() Pred { return e.isNull(false) }

// IsNotNull is e IS NOT NULL.
func (e Expr) IsNotNull() Pred { return e.isNull(true) }

func (e Expr) isNull(not bool) Pred {
	if err := e.check(); err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.IsNull{X: e.x, Not: not}}
}

// Asc orders by e ascending.
func (e Expr) Asc() Order { return Order{o: sqlast.Order{X: e.x}, err: e.check()} }

// Desc orders by e descending.
func (e Expr) Desc() Order { return Order{o: sqlast.Order{X: e.x, Desc: true}, err: e.check()} }

func agg(fn sqlast.AggFn, e Expr, distinct bool) Expr {
	if err := e.check(); err != nil {
		return Expr{err: err}
	}
	if _, nested := e.x.(*sqlast.Agg); nested {
		return Expr{err: invalid("aggregate of an aggregate")}
	}
	return Expr{x: &sqlast.Agg{Fn: fn, Arg: e.x, Distinct: distinct}}
}

// CountAll is COUNT(*).
func CountAll() Expr { return Expr{x: &sqlast.Agg{Fn: sqlast.Count}} }

// Count is COUNT(e): the number of non-NULL values.
func Count(e Expr) Expr { return agg(sqlast.Count, e, false) }

// CountDistinct is COUNT(DISTINCT e).
func CountDistinct(e Expr) Expr { return agg(sqlast.Count, e, true) }

// Sum is SUM(e).
func Sum(e Expr) Expr { return agg(sqlast.Sum, e, false) }

// Avg is AVG(e).
func Avg(e Expr) Expr { return agg(sqlast.Avg, e, false) }

// Min is MIN(e).
func Min(e Expr) Expr { return agg(sqlast.Min, e, false) }

// Max is MAX(e).
func Max(e Expr) Expr { return agg(sqlast.Max, e, false) }

// Pred is a boolean condition built from typed pieces. The zero Pred is
// invalid.
type Pred struct {
	p   sqlast.Pred
	err error
}

func (p Pred) check() error {
	if p.err != nil {
		return p.err
	}
	if p.p == nil {
		return invalid("zero Pred")
	}
	return nil
}

func collect(ps []Pred) ([]sqlast.Pred, error) {
	out := make([]sqlast.Pred, 0, len(ps))
	for _, p := range ps {
		if err := p.check(); err != nil {
			return nil, err
		}
		out = append(out, p.p)
	}
	return out, nil
}

// And is true when every p is; And() is true.
func And(ps ...Pred) Pred {
	l, err := collect(ps)
	if err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.And{Ps: l}}
}

// Or is true when any p is; Or() is false.
func Or(ps ...Pred) Pred {
	l, err := collect(ps)
	if err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.Or{Ps: l}}
}

// Not negates p.
func Not(p Pred) Pred {
	if err := p.check(); err != nil {
		return Pred{err: err}
	}
	return Pred{p: &sqlast.Not{P: p.p}}
}

// Exists is true when sub returns at least one row. sub may refer to
// columns of the enclosing query (a correlated subquery).
func Exists(sub Query) Pred {
	if sub.s == nil {
		return Pred{err: invalid("zero Query used in Exists")}
	}
	return Pred{p: &sqlast.Exists{Sub: sub.s}}
}

// NotExists is true when sub returns no row.
func NotExists(sub Query) Pred {
	if sub.s == nil {
		return Pred{err: invalid("zero Query used in NotExists")}
	}
	return Pred{p: &sqlast.Exists{Sub: sub.s, Not: true}}
}

// Order is one ORDER BY term, from Expr.Asc or Expr.Desc.
type Order struct {
	o   sqlast.Order
	err error
}

// typedValue binds v (see bindValue) for a comparison with x and, when x
// is a column whose kind the schema knows (a level column, or a declared
// integer or character type), converts it to that kind or refuses it,
// naming the column.
//
// Invariant: a value compared with, assigned to or inserted into a column
// of known kind reaches the engine as that kind, so the engine never
// converts the column's values instead (MySQL: '7eleven' = 7 is true, and
// in strict mode an error quoting the stored value, possibly another
// tenant's).
func typedValue(x sqlast.Expr, v any) (sqlast.Value, error) {
	bv, err := bindValue(v)
	if err != nil || bv.V == nil || guardfault.Off(guardfault.Typed) {
		return bv, err
	}
	c, ok := x.(*sqlast.Col)
	if !ok {
		return bv, nil
	}
	return typedFor(c.Ref.Table, c.Name, bv)
}

// typedFor converts bv to the kind of column col of t (see typedValue).
func typedFor(t *sqlast.Table, col string, bv sqlast.Value) (sqlast.Value, error) {
	if bv.V == nil || guardfault.Off(guardfault.Typed) {
		return bv, nil
	}
	kind := t.ColumnKind(col)
	if kind == 0 {
		return bv, nil
	}
	nv, ok := sqlast.ConvertValue(kind, bv.V)
	if !ok {
		return sqlast.Value{}, fmt.Errorf("%w: column %s.%s holds %s values; a %T value that is not one cannot be compared with or stored in it",
			ErrType, t.Name, col, kind, bv.V)
	}
	return sqlast.Value{V: nv}, nil
}

// bindValue normalises v to one of the types every driver binds as is:
// nil, bool, int64, float64, string, []byte, time.Time. Named types with
// those kinds are converted; driver.Valuer is evaluated now. Everything
// else (structs, maps, pointers, channels, and in particular any value
// that could be mistaken for SQL text by a query builder) is refused.
func bindValue(v any) (sqlast.Value, error) {
	if vr, ok := v.(driver.Valuer); ok {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return sqlast.Value{}, nil
		}
		dv, err := vr.Value()
		if err != nil {
			return sqlast.Value{}, invalid("value of type %T: %v", v, err)
		}
		if _, again := dv.(driver.Valuer); again {
			return sqlast.Value{}, invalid("value of type %T: Value returned another Valuer", v)
		}
		v = dv
	}
	switch x := v.(type) {
	case nil:
		return sqlast.Value{}, nil
	case time.Time:
		return sqlast.Value{V: x}, nil
	case []byte:
		return sqlast.Value{V: append([]byte(nil), x...)}, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return sqlast.Value{V: rv.Bool()}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return sqlast.Value{V: rv.Int()}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return sqlast.Value{}, invalid("value %d overflows int64", u)
		}
		return sqlast.Value{V: int64(u)}, nil
	case reflect.Float32, reflect.Float64:
		return sqlast.Value{V: rv.Float()}, nil
	case reflect.String:
		return sqlast.Value{V: rv.String()}, nil
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return sqlast.Value{V: append([]byte(nil), rv.Bytes()...)}, nil
		}
	}
	if _, isExpr := v.(Expr); isExpr {
		return sqlast.Value{}, invalid("a builder.Expr is not a bind value; compare columns with EqCol and friends")
	}
	return sqlast.Value{}, invalid("value of type %T cannot be bound", v)
}
