package builder

import (
	"fmt"
	"github.com/tenantmcp/tenantmcp/scope"
	"slices"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Scalar expressions beyond columns and aggregates. Every constructor here
// builds a node of internal/sqlast/scalar.go; bound values stay parameters,
// identifiers and JSON keys are validated, and the only SQL text a node
// carries is chosen by the guard from a fixed list per dialect.

// ErrScopeColumn is wrapped (with ErrInvalid) by Build when SetExpr assigns
// an expression to a scope column: a level column or a column of a foreign
// key on the table's scope path. Such a column moves a row between tenants,
// so its new value must be a bound value the guard checks.
var ErrScopeColumn = fmt.Errorf("%w: an expression cannot be assigned to a scope column", ErrInvalid)

// ErrUnknownFunc is wrapped (with ErrInvalid) by Schema.Func for a function
// the schema does not register.
var ErrUnknownFunc = fmt.Errorf("%w: unknown function", ErrInvalid)

// Kind classifies the values of an expression or a function argument, for
// the type checks Build makes. KindAny accepts anything.
type Kind int

const (
	KindAny  = Kind(sqlast.AnyKind)
	KindInt  = Kind(sqlast.IntVal)
	KindReal = Kind(sqlast.RealVal)
	KindText = Kind(sqlast.TextVal)
	KindBool = Kind(sqlast.BoolVal)
	KindTime = Kind(sqlast.TimeVal)
	KindJSON = Kind(sqlast.JSONVal)
)

func (k Kind) String() string {
	if !sqlast.ValKind(k).Valid() {
		return "invalid"
	}
	return sqlast.ValKind(k).String()
}

// Kind returns the kind of values e yields where the schema says
// (a column's declared type, a function's result), else KindAny.
func (e Expr) Kind() Kind {
	if e.x == nil {
		return KindAny
	}
	return Kind(kindOf(e.x))
}

// kindOf infers the kind of values x yields; AnyKind when unknown.
func kindOf(x sqlast.Expr) sqlast.ValKind {
	switch x := x.(type) {
	case *sqlast.Col:
		return x.Ref.Table.ColumnValKind(x.Name)
	case *sqlast.Agg:
		return aggKind(x.Fn, x.Arg)
	case *sqlast.Window:
		switch x.Fn {
		case sqlast.RowNumber, sqlast.Rank, sqlast.DenseRank:
			return sqlast.IntVal
		}
		return aggKind(sqlast.AggFn(x.Fn), x.Arg)
	case *sqlast.Lit:
		return litKind(x.V.V)
	case *sqlast.Arith:
		a, b := kindOf(x.X), kindOf(x.Y)
		switch {
		case x.Op == sqlast.Div || a == sqlast.RealVal || b == sqlast.RealVal:
			return sqlast.RealVal
		case a == sqlast.IntVal && b == sqlast.IntVal:
			return sqlast.IntVal
		}
	case *sqlast.Case:
		for _, w := range x.Whens {
			if k := kindOf(w.Then); k != sqlast.AnyKind {
				return k
			}
		}
		if x.Else != nil {
			return kindOf(x.Else)
		}
	case *sqlast.Coalesce:
		for _, e := range x.Xs {
			if k := kindOf(e); k != sqlast.AnyKind {
				return k
			}
		}
	case *sqlast.NullIf:
		return kindOf(x.X)
	case *sqlast.Cast:
		return castKinds[x.To]
	case *sqlast.Call:
		return x.Fn.Result
	case *sqlast.JSONPath:
		if x.Num {
			return sqlast.RealVal
		}
		return sqlast.TextVal
	case *sqlast.ScalarSub:
		if len(x.Sub.Items) == 1 {
			return kindOf(x.Sub.Items[0].X)
		}
	}
	return sqlast.AnyKind
}

func aggKind(fn sqlast.AggFn, arg sqlast.Expr) sqlast.ValKind {
	switch fn {
	case sqlast.Count:
		return sqlast.IntVal
	case sqlast.Avg:
		return sqlast.RealVal
	}
	if arg == nil {
		return sqlast.AnyKind
	}
	return kindOf(arg)
}

func litKind(v any) sqlast.ValKind {
	switch v.(type) {
	case int64:
		return sqlast.IntVal
	case float64:
		return sqlast.RealVal
	case string:
		return sqlast.TextVal
	case bool:
		return sqlast.BoolVal
	case time.Time:
		return sqlast.TimeVal
	}
	return sqlast.AnyKind
}

// valueAs binds v as a value of kind k: converted to k where the kinds
// allow it (an integer column takes canonical decimal strings, a real
// expression integers), refused with ErrType otherwise. what names the
// expression for the error; the value itself is never quoted.
func valueAs(k sqlast.ValKind, v any, what string) (sqlast.Value, error) {
	bv, err := bindValue(v)
	if err != nil || bv.V == nil {
		return bv, err
	}
	ok := true
	switch k {
	case sqlast.IntVal:
		bv.V, ok = sqlast.ConvertValue(sqlast.IntKey, bv.V)
	case sqlast.TextVal:
		bv.V, ok = sqlast.ConvertValue(sqlast.TextKey, bv.V)
	case sqlast.RealVal:
		switch x := bv.V.(type) {
		case int64:
			bv.V = float64(x)
		case float64:
		default:
			ok = false
		}
	case sqlast.BoolVal:
		_, ok = bv.V.(bool)
	case sqlast.TimeVal:
		switch bv.V.(type) {
		case time.Time, string:
		default:
			ok = false
		}
	case sqlast.JSONVal:
		switch bv.V.(type) {
		case string, []byte:
		default:
			ok = false
		}
	}
	if !ok {
		return sqlast.Value{}, fmt.Errorf("%w: %s holds %s values; a %T value is not one", ErrType, what, k, v)
	}
	return bv, nil
}

// operand turns v into an expression: an Expr as is, anything else bound
// as a value of kind k.
func operand(v any, k sqlast.ValKind, what string) (sqlast.Expr, error) {
	if e, ok := v.(Expr); ok {
		if err := e.check(); err != nil {
			return nil, err
		}
		return e.x, nil
	}
	bv, err := valueAs(k, v, what)
	if err != nil {
		return nil, err
	}
	return &sqlast.Lit{V: bv}, nil
}

// Val is the bound value v used as an expression (a CASE result, a
// COALESCE fallback, a select item). It is always sent as a parameter.
func Val(v any) Expr {
	bv, err := bindValue(v)
	if err != nil {
		return Expr{err: err}
	}
	return Expr{x: &sqlast.Lit{V: bv}}
}

func (e Expr) arith(op sqlast.ArithOp, v any) Expr {
	if err := e.check(); err != nil {
		return Expr{err: err}
	}
	k := kindOf(e.x)
	if !k.Numeric() {
		return Expr{err: fmt.Errorf("%w: arithmetic (%s) on %s values", ErrType, op, k)}
	}
	var y sqlast.Expr
	if o, ok := v.(Expr); ok {
		if err := o.check(); err != nil {
			return Expr{err: err}
		}
		if ko := kindOf(o.x); !ko.Numeric() {
			return Expr{err: fmt.Errorf("%w: arithmetic (%s) on %s values", ErrType, op, ko)}
		}
		y = o.x
	} else {
		bv, err := bindValue(v)
		if err != nil {
			return Expr{err: err}
		}
		switch x := bv.V.(type) {
		case int64:
			if k == sqlast.RealVal {
				bv.V = float64(x)
			}
		case float64:
		default:
			return Expr{err: fmt.Errorf("%w: arithmetic (%s) takes a number, not a %T value", ErrType, op, v)}
		}
		y = &sqlast.Lit{V: bv}
	}
	return Expr{x: &sqlast.Arith{Op: op, X: e.x, Y: y}}
}

// Add is e + x, where x is a number (bound) or a numeric Expr. Build
// refuses arithmetic on a column whose declared type is not numeric.
// With an Interval (Days, Hours, Minutes, Seconds, Months), e is a time
// and the result the time that much later (time.go); Build refuses an
// interval added to anything but a time with ErrNotTime.
func (e Expr) Add(x any) Expr {
	if iv, ok := x.(Interval); ok {
		return e.addInterval(iv, 1)
	}
	return e.arith(sqlast.Add, x)
}

// Sub is e - x; with an Interval, the time that much earlier.
func (e Expr) Sub(x any) Expr {
	if iv, ok := x.(Interval); ok {
		return e.addInterval(iv, -1)
	}
	return e.arith(sqlast.Sub, x)
}

// Mul is e * x.
func (e Expr) Mul(x any) Expr { return e.arith(sqlast.Mul, x) }

// Div is e / x, as real division on every engine (integers are converted
// first). Division by zero is NULL on SQLite and MySQL and an error
// (ErrEngine) on PostgreSQL.
func (e Expr) Div(x any) Expr { return e.arith(sqlast.Div, x) }

// CaseBuilder assembles a searched CASE expression; see Case.
type CaseBuilder struct {
	whens []Pred
	thens []any
}

// Case starts CASE WHEN ... THEN ... END. Results are Exprs or values;
// values are bound as the kind of the first result Expr whose kind is
// known.
func Case() CaseBuilder { return CaseBuilder{} }

// When adds the branch WHEN p THEN then.
func (c CaseBuilder) When(p Pred, then any) CaseBuilder {
	c.whens = append(slices.Clip(c.whens), p)
	c.thens = append(slices.Clip(c.thens), then)
	return c
}

// Else ends the CASE with ELSE v.
func (c CaseBuilder) Else(v any) Expr { return c.build(v, true) }

// End ends the CASE without ELSE (NULL when no branch holds).
func (c CaseBuilder) End() Expr { return c.build(nil, false) }

func (c CaseBuilder) build(els any, hasElse bool) Expr {
	if len(c.whens) == 0 {
		return Expr{err: invalid("CASE without When")}
	}
	vals := c.thens
	if hasElse {
		vals = append(slices.Clip(vals), els)
	}
	k, err := commonKind(vals, "CASE")
	if err != nil {
		return Expr{err: err}
	}
	x := &sqlast.Case{}
	for i, p := range c.whens {
		if err := p.check(); err != nil {
			return Expr{err: err}
		}
		t, err := operand(c.thens[i], k, "the CASE")
		if err != nil {
			return Expr{err: err}
		}
		x.Whens = append(x.Whens, sqlast.When{Cond: p.p, Then: t})
	}
	if hasElse {
		if x.Else, err = operand(els, k, "the CASE"); err != nil {
			return Expr{err: err}
		}
	}
	return Expr{x: x}
}

// commonKind returns the kind shared by the Exprs among vs, refusing two
// known kinds that differ (integer and real mix as real).
func commonKind(vs []any, what string) (sqlast.ValKind, error) {
	k := sqlast.AnyKind
	for _, v := range vs {
		e, ok := v.(Expr)
		if !ok {
			continue
		}
		if err := e.check(); err != nil {
			return 0, err
		}
		ek := kindOf(e.x)
		switch {
		case ek == sqlast.AnyKind || ek == k:
		case k == sqlast.AnyKind:
			k = ek
		case ek.Numeric() && k.Numeric():
			k = sqlast.RealVal
		default:
			return 0, fmt.Errorf("%w: %s mixes %s and %s values", ErrType, what, k, ek)
		}
	}
	return k, nil
}

// Coalesce is COALESCE(xs...): the first non-NULL of its arguments,
// Exprs or values (bound as the kind of the Exprs).
func Coalesce(xs ...any) Expr {
	if len(xs) < 2 {
		return Expr{err: invalid("COALESCE needs at least two arguments, not %d", len(xs))}
	}
	k, err := commonKind(xs, "COALESCE")
	if err != nil {
		return Expr{err: err}
	}
	x := &sqlast.Coalesce{}
	for _, v := range xs {
		o, err := operand(v, k, "COALESCE")
		if err != nil {
			return Expr{err: err}
		}
		x.Xs = append(x.Xs, o)
	}
	return Expr{x: x}
}

// NullIf is NULLIF(a, b): NULL when a equals b, else a. b is an Expr or a
// value bound as a's kind.
func NullIf(a Expr, b any) Expr {
	if err := a.check(); err != nil {
		return Expr{err: err}
	}
	k, err := commonKind([]any{a, b}, "NULLIF")
	if err != nil {
		return Expr{err: err}
	}
	y, err := operand(b, k, "NULLIF")
	if err != nil {
		return Expr{err: err}
	}
	return Expr{x: &sqlast.NullIf{X: a.x, Y: y}}
}

// CastType is a type Cast converts to. Each engine spells it its own way
// (SQLite CAST(x AS TEXT), PostgreSQL CAST(x AS text), MariaDB/MySQL
// CAST(x AS CHAR)...).
type CastType struct{ t sqlast.CastType }

var (
	// AsText converts to text (an inet or uuid column read as text).
	AsText = CastType{sqlast.CastText}
	// AsInteger converts to a 64-bit integer (MySQL: SIGNED).
	AsInteger = CastType{sqlast.CastInteger}
	// AsReal converts to a double-precision number.
	AsReal = CastType{sqlast.CastReal}
	// AsDate converts to a date (SQLite: the ISO-8601 text of date(x)).
	AsDate = CastType{sqlast.CastDate}
)

var castKinds = map[sqlast.CastType]sqlast.ValKind{
	sqlast.CastText: sqlast.TextVal, sqlast.CastInteger: sqlast.IntVal,
	sqlast.CastReal: sqlast.RealVal, sqlast.CastDate: sqlast.TimeVal,
}

// Cast is e converted to type to. A value the engine cannot convert makes
// the statement fail (ErrInvalidValue, without the value) on PostgreSQL
// and MySQL in strict mode; SQLite and MySQL otherwise yield 0 or NULL.
func Cast(e Expr, to CastType) Expr {
	if err := e.check(); err != nil {
		return Expr{err: err}
	}
	if _, ok := castKinds[to.t]; !ok {
		return Expr{err: invalid("zero CastType")}
	}
	return Expr{x: &sqlast.Cast{X: e.x, To: to.t}}
}

// DatePart is a unit of Extract and DateTrunc.
type DatePart struct{ p string }

var (
	PartYear   = DatePart{"year"}
	PartMonth  = DatePart{"month"}
	PartDay    = DatePart{"day"}
	PartHour   = DatePart{"hour"}
	PartMinute = DatePart{"minute"}
)

// The built-in functions: every engine has them; the guard spells each
// per dialect.
var (
	fnLower     = &sqlast.Func{Name: "lower", Args: []sqlast.ValKind{sqlast.TextVal}, Result: sqlast.TextVal, Builtin: true}
	fnUpper     = &sqlast.Func{Name: "upper", Args: []sqlast.ValKind{sqlast.TextVal}, Result: sqlast.TextVal, Builtin: true}
	fnLength    = &sqlast.Func{Name: "length", Args: []sqlast.ValKind{sqlast.TextVal}, Result: sqlast.IntVal, Builtin: true}
	fnAbs       = &sqlast.Func{Name: "abs", Args: []sqlast.ValKind{sqlast.RealVal}, Result: sqlast.AnyKind, Builtin: true}
	fnRound     = &sqlast.Func{Name: "round", Args: []sqlast.ValKind{sqlast.RealVal}, Result: sqlast.RealVal, Builtin: true}
	fnExtract   = &sqlast.Func{Name: "extract", Args: []sqlast.ValKind{sqlast.TimeVal}, Result: sqlast.IntVal, Builtin: true}
	fnDateTrunc = &sqlast.Func{Name: "date_trunc", Args: []sqlast.ValKind{sqlast.TimeVal}, Result: sqlast.TimeVal, Builtin: true}
	builtins    = map[string]bool{"lower": true, "upper": true, "length": true, "abs": true, "round": true, "extract": true, "date_trunc": true}
)

// call builds a call of fn, checking each argument's kind (an Expr of a
// known, different kind is refused; a value is bound as the declared
// kind).
func call(fn *sqlast.Func, part string, args []any) Expr {
	if len(args) != len(fn.Args) {
		return Expr{err: invalid("function %s takes %d arguments, not %d", fn.Name, len(fn.Args), len(args))}
	}
	c := &sqlast.Call{Fn: fn, Part: part}
	for i, a := range args {
		want := fn.Args[i]
		if e, ok := a.(Expr); ok {
			if err := e.check(); err != nil {
				return Expr{err: err}
			}
			got := kindOf(e.x)
			if !argFits(want, got) {
				return Expr{err: fmt.Errorf("%w: argument %d of %s must be %s, not %s", ErrType, i+1, fn.Name, want, got)}
			}
		}
		o, err := operand(a, want, fmt.Sprintf("argument %d of %s", i+1, fn.Name))
		if err != nil {
			return Expr{err: err}
		}
		c.Args = append(c.Args, o)
	}
	return Expr{x: c}
}

func argFits(want, got sqlast.ValKind) bool {
	switch {
	case want == sqlast.AnyKind || got == sqlast.AnyKind || want == got:
		return true
	case want == sqlast.RealVal && got == sqlast.IntVal:
		return true
	case want == sqlast.TimeVal && got == sqlast.TextVal:
		return true // dates held as ISO-8601 text (SQLite)
	case want == sqlast.TextVal && got == sqlast.JSONVal:
		return true
	}
	return false
}

// Lower is lower(e).
func Lower(e Expr) Expr { return call(fnLower, "", []any{e}) }

// Upper is upper(e).
func Upper(e Expr) Expr { return call(fnUpper, "", []any{e}) }

// Length is the number of characters of e.
func Length(e Expr) Expr { return call(fnLength, "", []any{e}) }

// Abs is the absolute value of e.
func Abs(e Expr) Expr {
	x := call(fnAbs, "", []any{e})
	if c, ok := x.x.(*sqlast.Call); ok {
		// abs keeps its argument's kind.
		fn := *fnAbs
		fn.Result = kindOf(c.Args[0])
		c.Fn = &fn
	}
	return x
}

// Round is e rounded to the nearest integer, halves away from zero on
// every engine, as a real number.
func Round(e Expr) Expr { return call(fnRound, "", []any{e}) }

// Extract is the part (year, month, day, hour, minute) of the date or
// timestamp e, as an integer.
func Extract(part DatePart, e Expr) Expr {
	if part.p == "" {
		return Expr{err: invalid("zero DatePart")}
	}
	return call(fnExtract, part.p, []any{e})
}

// DateTrunc is the date e truncated to the first day of its year or month
// (PartYear, PartMonth), or to its day (PartDay), as a date.
func DateTrunc(part DatePart, e Expr) Expr {
	switch part {
	case PartYear, PartMonth, PartDay:
	default:
		return Expr{err: invalid("DateTrunc to %q: only year, month and day", part.p)}
	}
	return call(fnDateTrunc, part.p, []any{e})
}

// The engine (dialect) names a FuncDef may list.
var funcDialects = []string{"sqlite", "postgres", "mysql"}

// FuncDef registers a scalar function of the database with the schema, so
// tools can call it with Schema.Func. Name is the function's SQL name, a
// lower-case identifier written unquoted; Args and Result are the kinds
// Build checks; Dialects names the engines that have it ("sqlite",
// "postgres", "mysql"). Calling it on another engine fails at render,
// naming the engine and the function.
type FuncDef struct {
	Name     string
	Args     []Kind
	Result   Kind
	Dialects []string
}

// registerFuncs validates the schema's function definitions into g.
func registerFuncs(g *sqlast.Schema, defs []FuncDef) error {
	for _, d := range defs {
		if !scope.ValidLevel(d.Name) {
			return schemaErr("function %q: name is not a lower-case identifier", d.Name)
		}
		if builtins[d.Name] {
			return schemaErr("function %q: a built-in; call it with builder.%s", d.Name, d.Name)
		}
		if _, dup := g.Funcs[d.Name]; dup {
			return schemaErr("function %q declared twice", d.Name)
		}
		if len(d.Dialects) == 0 {
			return schemaErr("function %q: no Dialects", d.Name)
		}
		fn := &sqlast.Func{Name: d.Name, Result: sqlast.ValKind(d.Result), Dialects: slices.Clone(d.Dialects)}
		for _, dl := range d.Dialects {
			if !slices.Contains(funcDialects, dl) {
				return schemaErr("function %q: unknown dialect %q (want one of %v)", d.Name, dl, funcDialects)
			}
		}
		if !fn.Result.Valid() {
			return schemaErr("function %q: invalid result kind %d", d.Name, d.Result)
		}
		for _, a := range d.Args {
			if !sqlast.ValKind(a).Valid() {
				return schemaErr("function %q: invalid argument kind %d", d.Name, a)
			}
			fn.Args = append(fn.Args, sqlast.ValKind(a))
		}
		if g.Funcs == nil {
			g.Funcs = map[string]*sqlast.Func{}
		}
		g.Funcs[d.Name] = fn
	}
	return nil
}

// Func calls the function name registered in the schema's Functions with
// args (Exprs, or values bound as the declared argument kinds). A name the
// schema does not register fails Build with ErrUnknownFunc.
func (s *Schema) Func(name string, args ...any) Expr {
	fn := s.g.Funcs[name]
	if fn == nil {
		return Expr{err: fmt.Errorf("%w %q: register it in SchemaDef.Functions", ErrUnknownFunc, name)}
	}
	return call(fn, "", args)
}

// validJSONKey reports whether k may be spelled literally in a JSON path:
// an ASCII identifier, so it needs no quoting in any engine's path syntax.
func validJSONKey(k string) bool { return validIdent(k) }

func jsonPath(e Expr, num bool, keys []string) Expr {
	if err := e.check(); err != nil {
		return Expr{err: err}
	}
	switch k := kindOf(e.x); k {
	case sqlast.AnyKind, sqlast.JSONVal, sqlast.TextVal:
	default:
		return Expr{err: fmt.Errorf("%w: JSON extraction from %s values", ErrType, k)}
	}
	if len(keys) == 0 {
		return Expr{err: invalid("JSON path without keys")}
	}
	for _, k := range keys {
		if !validJSONKey(k) {
			return Expr{err: invalid("JSON key %q is not an identifier (letters, digits, '_'; at most 63)", k)}
		}
	}
	return Expr{x: &sqlast.JSONPath{X: e.x, Keys: slices.Clone(keys), Num: num}}
}

// JSONText is the value at the object keys path of the JSON document e,
// as text: PostgreSQL e->>'k' (e cast to jsonb), MariaDB/MySQL
// JSON_UNQUOTE(JSON_EXTRACT(e, '$.k')), SQLite json_extract(e, '$.k')
// (true and false read as 'true' and 'false' everywhere). Keys are
// identifiers spelled literally (so the same path groups and orders the
// same on every engine); anything else is refused.
func JSONText(e Expr, path ...string) Expr { return jsonPath(e, false, path) }

// JSONNumber is the value at path as a real number (NULL if absent).
func JSONNumber(e Expr, path ...string) Expr { return jsonPath(e, true, path) }

// ScalarQuery uses q, which selects exactly one column, as a value: the
// column of its only row, or NULL when it has none (more than one row
// fails on the engine). q may be correlated with the enclosing query; the
// guard confines its tables as those of any subquery.
func ScalarQuery(q Query) Expr {
	if q.s == nil {
		return Expr{err: invalid("zero Query used as a scalar subquery")}
	}
	if len(q.s.Items) != 1 {
		return Expr{err: invalid("scalar subquery must select exactly one column, not %d", len(q.s.Items))}
	}
	return Expr{x: &sqlast.ScalarSub{Sub: q.s}}
}
