package guard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrUnsupported: the statement uses a feature (a registered function, a
// construct) that the database engine does not have. The error names the
// engine and the feature; nothing was sent.
var ErrUnsupported = errors.New("guardedsql: not supported by the database engine")

// scalarInto renders the nodes of internal/sqlast/scalar.go. The SQL text
// it writes comes from fixed spellings per dialect, validated identifiers
// (function names, JSON keys) and quoted aliases; every value is a bound
// argument.
//
// Invariant: a subquery anywhere in an expression (a ScalarSub, or one in a
// Case's predicates) is rendered through r.subquery or r.predInto, which
// guard each of its table references; Render then checks that every
// reference of the statement was guarded.
func (r *renderer) scalarInto(f *fb, e sqlast.Expr) error {
	switch x := e.(type) {
	case *sqlast.Lit:
		return r.lit(f, x.V)
	case *sqlast.Arith:
		f.s("(")
		if x.Op == sqlast.Div {
			f.s("CAST(")
			if err := r.exprInto(f, x.X); err != nil {
				return err
			}
			f.s(" AS ", r.castName(sqlast.CastReal), ")")
		} else if err := r.exprInto(f, x.X); err != nil {
			return err
		}
		switch x.Op {
		case sqlast.Add, sqlast.Sub, sqlast.Mul, sqlast.Div:
		default:
			return fmt.Errorf("%w: arithmetic operator %q", ErrInvalid, x.Op)
		}
		f.s(" ", string(x.Op), " ")
		if err := r.exprInto(f, x.Y); err != nil {
			return err
		}
		f.s(")")
	case *sqlast.Case:
		if len(x.Whens) == 0 {
			return fmt.Errorf("%w: CASE without WHEN", ErrInvalid)
		}
		f.s("CASE")
		for _, w := range x.Whens {
			f.s(" WHEN (")
			if err := r.predInto(f, w.Cond); err != nil {
				return err
			}
			f.s(") THEN ")
			if err := r.exprInto(f, w.Then); err != nil {
				return err
			}
		}
		if x.Else != nil {
			f.s(" ELSE ")
			if err := r.exprInto(f, x.Else); err != nil {
				return err
			}
		}
		f.s(" END")
	case *sqlast.Coalesce:
		return r.callInto(f, "COALESCE", x.Xs...)
	case *sqlast.NullIf:
		return r.callInto(f, "NULLIF", x.X, x.Y)
	case *sqlast.Cast:
		if x.To == sqlast.CastDate && r.d.Name() == "sqlite" {
			return r.callInto(f, "date", x.X)
		}
		name := r.castName(x.To)
		if name == "" {
			return fmt.Errorf("%w: cast to %q", ErrInvalid, x.To)
		}
		f.s("CAST(")
		if err := r.exprInto(f, x.X); err != nil {
			return err
		}
		f.s(" AS ", name, ")")
	case *sqlast.Call:
		return r.funcInto(f, x)
	case *sqlast.JSONPath:
		return r.jsonInto(f, x)
	case *sqlast.Window:
		r.windowed = true
		return r.windowInto(f, x)
	case *sqlast.ScalarSub:
		r.windowed = true
		sub, err := r.subquery(x.Sub)
		if err != nil {
			return err
		}
		f.s("(")
		f.frag(sub)
		f.s(")")
	default:
		return fmt.Errorf("%w: expression %T", ErrInvalid, e)
	}
	return nil
}

// lit binds v. On PostgreSQL it is cast to its Go type's SQL type, so the
// engine never has to guess the type of a parameter standing alone (a CASE
// result, a COALESCE fallback).
func (r *renderer) lit(f *fb, v sqlast.Value) error {
	if err := checkValue(v); err != nil {
		return err
	}
	if r.d.Name() != "postgres" || v.V == nil {
		f.arg(r.bindTime(v.V))
		return nil
	}
	var typ string
	switch v.V.(type) {
	case int64:
		typ = "bigint"
	case float64:
		typ = "double precision"
	case string:
		typ = "text"
	case bool:
		typ = "boolean"
	case []byte:
		typ = "bytea"
	case time.Time:
		typ = "timestamptz"
	}
	f.s("CAST(")
	f.arg(v.V)
	f.s(" AS ", typ, ")")
	return nil
}

func (r *renderer) callInto(f *fb, name string, args ...sqlast.Expr) error {
	f.s(name, "(")
	for i, a := range args {
		if i > 0 {
			f.s(", ")
		}
		if err := r.exprInto(f, a); err != nil {
			return err
		}
	}
	f.s(")")
	return nil
}

func (r *renderer) castName(t sqlast.CastType) string {
	switch r.d.Name() {
	case "postgres":
		return map[sqlast.CastType]string{sqlast.CastText: "text", sqlast.CastInteger: "bigint", sqlast.CastReal: "double precision", sqlast.CastDate: "date"}[t]
	case "mysql":
		return map[sqlast.CastType]string{sqlast.CastText: "CHAR", sqlast.CastInteger: "SIGNED", sqlast.CastReal: "DOUBLE", sqlast.CastDate: "DATE"}[t]
	}
	return map[sqlast.CastType]string{sqlast.CastText: "TEXT", sqlast.CastInteger: "INTEGER", sqlast.CastReal: "REAL", sqlast.CastDate: "TEXT"}[t]
}

var datePart = map[string]bool{"year": true, "month": true, "day": true, "hour": true, "minute": true}

// funcInto renders a function call: a built-in in its dialect's spelling,
// or a registered function by its validated name where the engine has it.
func (r *renderer) funcInto(f *fb, c *sqlast.Call) error {
	fn := c.Fn
	if len(c.Args) != len(fn.Args) {
		return fmt.Errorf("%w: %s takes %d arguments", ErrInvalid, fn.Name, len(fn.Args))
	}
	eng := r.d.Name()
	if !fn.Builtin {
		if !slices.Contains(fn.Dialects, eng) {
			return fmt.Errorf("%w: function %s is not available on %s (the schema registers it for %s)", ErrUnsupported, fn.Name, eng, strings.Join(fn.Dialects, ", "))
		}
		if !identOK(fn.Name) {
			return fmt.Errorf("%w: function name %q", ErrInvalid, fn.Name)
		}
		return r.callInto(f, fn.Name, c.Args...)
	}
	switch fn.Name {
	case "lower", "upper", "abs":
		return r.callInto(f, strings.ToUpper(fn.Name), c.Args...)
	case "length":
		if eng == "mysql" {
			return r.callInto(f, "CHAR_LENGTH", c.Args...) // LENGTH counts bytes there
		}
		return r.callInto(f, "LENGTH", c.Args...)
	case "round":
		if eng != "sqlite" {
			// PostgreSQL and MariaDB round a double's halves to even;
			// exact decimals round them away from zero, as SQLite does.
			dec, dbl := "numeric", "double precision"
			if eng == "mysql" {
				dec, dbl = "DECIMAL(65,30)", "DOUBLE"
			}
			f.s("CAST(ROUND(CAST(")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(" AS ", dec, ")) AS ", dbl, ")")
			return nil
		}
		f.s("ROUND(CAST(")
		if err := r.exprInto(f, c.Args[0]); err != nil {
			return err
		}
		f.s(" AS ", r.castName(sqlast.CastReal), "))")
		return nil
	case "extract":
		if !datePart[c.Part] {
			return fmt.Errorf("%w: date part %q", ErrInvalid, c.Part)
		}
		switch eng {
		case "sqlite":
			fmtc := map[string]string{"year": "%Y", "month": "%m", "day": "%d", "hour": "%H", "minute": "%M"}[c.Part]
			f.s("CAST(strftime('", fmtc, "', ")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(") AS INTEGER)")
		case "postgres":
			f.s("CAST(EXTRACT(", strings.ToUpper(c.Part), " FROM ")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(") AS bigint)")
		default:
			f.s("EXTRACT(", strings.ToUpper(c.Part), " FROM ")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(")")
		}
		return nil
	case "date_trunc":
		if c.Part != "year" && c.Part != "month" && c.Part != "day" {
			return fmt.Errorf("%w: date truncation to %q", ErrInvalid, c.Part)
		}
		switch eng {
		case "sqlite":
			mod := map[string]string{"year": ", 'start of year'", "month": ", 'start of month'", "day": ""}[c.Part]
			f.s("date(")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(mod, ")")
		case "postgres":
			f.s("CAST(date_trunc('", c.Part, "', ")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(") AS date)")
		default:
			layout := map[string]string{"year": "%Y-01-01", "month": "%Y-%m-01", "day": "%Y-%m-%d"}[c.Part]
			f.s("CAST(DATE_FORMAT(")
			if err := r.exprInto(f, c.Args[0]); err != nil {
				return err
			}
			f.s(", '", layout, "') AS DATE)")
		}
		return nil
	}
	return r.timeFuncInto(f, c)
}

// identOK is the identifier alphabet of function names and JSON keys: they
// are spelled into SQL text, so nothing else may reach it.
func identOK(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// jsonInto renders a JSON extraction. Keys are re-checked here against the
// identifier alphabet before they are spelled in a path literal.
func (r *renderer) jsonInto(f *fb, x *sqlast.JSONPath) error {
	for _, k := range x.Keys {
		if !identOK(k) {
			return fmt.Errorf("%w: JSON key is not an identifier", ErrInvalid)
		}
	}
	if len(x.Keys) == 0 {
		return fmt.Errorf("%w: JSON path without keys", ErrInvalid)
	}
	dollar := "'$." + strings.Join(x.Keys, ".") + "'"
	switch r.d.Name() {
	case "postgres":
		if x.Num {
			f.s("CAST(")
		}
		f.s("(CAST(")
		if err := r.exprInto(f, x.X); err != nil {
			return err
		}
		f.s(" AS jsonb) #>> '{", strings.Join(x.Keys, ","), "}')")
		if x.Num {
			f.s(" AS double precision)")
		}
	case "mysql":
		if x.Num {
			f.s("CAST(JSON_EXTRACT(")
			if err := r.exprInto(f, x.X); err != nil {
				return err
			}
			f.s(", ", dollar, ") AS DOUBLE)")
			return nil
		}
		// JSON null reads as SQL NULL, as on the other engines.
		f.s("NULLIF(JSON_UNQUOTE(JSON_EXTRACT(")
		if err := r.exprInto(f, x.X); err != nil {
			return err
		}
		f.s(", ", dollar, ")), 'null')")
	default:
		if x.Num {
			f.s("CAST(json_extract(")
			if err := r.exprInto(f, x.X); err != nil {
				return err
			}
			f.s(", ", dollar, ") AS REAL)")
			return nil
		}
		// json_extract gives 1 and 0 for true and false; spell them as
		// the other engines do.
		var doc fb
		if err := r.exprInto(&doc, x.X); err != nil {
			return err
		}
		d := doc.done()
		f.s("CASE json_type(")
		f.frag(d)
		f.s(", ", dollar, ") WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(json_extract(")
		f.frag(d)
		f.s(", ", dollar, ") AS TEXT) END")
	}
	return nil
}

func (r *renderer) windowInto(f *fb, x *sqlast.Window) error {
	switch x.Fn {
	case sqlast.RowNumber, sqlast.Rank, sqlast.DenseRank:
		f.s(string(x.Fn), "()")
	case sqlast.WinFn(sqlast.Count), sqlast.WinFn(sqlast.Sum), sqlast.WinFn(sqlast.Avg), sqlast.WinFn(sqlast.Min), sqlast.WinFn(sqlast.Max):
		f.s(string(x.Fn), "(")
		if x.Arg == nil {
			f.s("*")
		} else if err := r.exprInto(f, x.Arg); err != nil {
			return err
		}
		f.s(")")
	default:
		return fmt.Errorf("%w: window function %q", ErrInvalid, x.Fn)
	}
	f.s(" OVER (")
	if len(x.PartitionBy) == 0 && len(x.OrderBy) == 0 && r.d.Name() == "mysql" && r.from != nil && len(r.from.Table.PK) > 0 {
		// MariaDB (10.11) mixes up the sorts of a statement's windows when
		// one of them is the whole result (OVER (), or a constant
		// partition such as PARTITION BY NULL) and two others differ:
		// ROW_NUMBER() OVER (ORDER BY id) then numbers rows by (p, id)
		// beside RANK() OVER (PARTITION BY p ORDER BY id), a COUNT(*) OVER
		// (PARTITION BY num) counts 1. One partition keyed by an
		// expression the optimizer does not fold (the key of FROM is
		// never NULL) avoids it.
		f.s("PARTITION BY ", r.col(r.from.Alias, r.from.Table.PK[0]), " IS NULL")
	}
	if len(x.PartitionBy) > 0 {
		f.s("PARTITION BY ")
		for i, p := range x.PartitionBy {
			if i > 0 {
				f.s(", ")
			}
			if err := r.exprInto(f, p); err != nil {
				return err
			}
		}
	}
	if len(x.OrderBy) > 0 {
		if len(x.PartitionBy) > 0 {
			f.s(" ")
		}
		f.s("ORDER BY ")
		for i, o := range x.OrderBy {
			if i > 0 {
				f.s(", ")
			}
			if err := r.exprInto(f, o.X); err != nil {
				return err
			}
			if o.Desc {
				f.s(" DESC")
			}
		}
	}
	f.s(")")
	return nil
}

// itemIndex returns the 1-based position of the select item that is e
// itself (the same node), or 0. Columns and aggregates are rendered as
// they are, as before; only the newer expressions are named by position.
func itemIndex(s *sqlast.Select, e sqlast.Expr) int {
	switch e.(type) {
	case *sqlast.Col, *sqlast.Agg:
		return 0
	}
	for i, it := range s.Items {
		if it.X == e {
			return i + 1
		}
	}
	return 0
}

// groupTerm renders one GROUP BY term. An expression that is a select item
// is named by its position: repeating its text would repeat its bound
// values as new parameters, which PostgreSQL does not match with the
// item's. GROUP BY has no arguments, so anything else binding a value is
// refused (builder refuses it first).
func (r *renderer) groupTerm(s *sqlast.Select, e sqlast.Expr) (string, error) {
	if i := itemIndex(s, e); i > 0 {
		return strconv.Itoa(i), nil
	}
	g, err := r.expr(e)
	if err != nil {
		return "", err
	}
	if len(g.Args) > 0 {
		return "", fmt.Errorf("%w: GROUP BY an expression with bound values that is not a select item", ErrInvalid)
	}
	return g.SQL, nil
}

// orderTerm renders one ORDER BY term, naming a select item by position as
// groupTerm does.
func (r *renderer) orderTerm(f *fb, s *sqlast.Select, e sqlast.Expr) error {
	if i := itemIndex(s, e); i > 0 {
		f.s(strconv.Itoa(i))
		return nil
	}
	return r.exprInto(f, e)
}

// setExpr renders the expression of SET col = <expr>.
//
// Invariant: an expression is never assigned to a scope column (a level
// column or a column of a tenant foreign key), since the guard checks only
// bound new values of those; and it reads only the target's own row (no
// subquery), so the UPDATE's guard on the target confines everything it
// reads.
func (r *renderer) setExpr(t *sqlast.Table, a sqlast.Assign) (any, error) {
	if t.LevelOf(a.Col) != nil || slices.ContainsFunc(t.TenantFKs(), func(fk *sqlast.FK) bool { return slices.Contains(fk.Cols, a.Col) }) {
		return nil, fmt.Errorf("%w: UPDATE of %s assigns an expression to the scope column %s", ErrRefused, t.Name, a.Col)
	}
	var f fb
	if err := r.exprInto(&f, a.X); err != nil {
		return nil, err
	}
	if len(r.seen) > 0 { // the target is guarded after SET: anything seen is another table

		return nil, fmt.Errorf("%w: UPDATE of %s: SET reads another table", ErrRefused, t.Name)
	}
	return f.done(), nil
}

// exprFault reports whether the test-only fault guardfault.Windows is on
// and this statement has a window function or a scalar subquery: then the
// guard drops its read predicates, so that the conformance mutation check
// can show that the window property notices.
func (r *renderer) exprFault() bool {
	return r.windowed && guardfault.Off(guardfault.Windows)
}

// enterSelect records s as the SELECT being rendered, until the returned
// function restores the enclosing one.
func (r *renderer) enterSelect(s *sqlast.Select) func() {
	prev := r.from
	r.from = s.From
	return func() { r.from = prev }
}
