package sqlast

import "strings"

// This file holds the scalar expression nodes beyond columns and
// aggregates: bound values, arithmetic, CASE, COALESCE, NULLIF, casts,
// function calls, JSON extraction, window functions and scalar subqueries.
//
// Invariant (kept by builder's scopeCheck and the guard's renderer): every
// node that can hold a table reference (a Col, a ScalarSub's Select, a
// Case's predicates with their subqueries) is walked by both, so a table
// referenced anywhere inside an expression is declared, unique and guarded.

// ValKind classifies the values an expression yields, for Build-time type
// checks. AnyKind means the schema does not say.
type ValKind int

const (
	AnyKind ValKind = iota
	IntVal
	RealVal
	TextVal
	BoolVal
	TimeVal
	JSONVal
)

func (k ValKind) String() string {
	return [...]string{"any", "integer", "real", "text", "boolean", "time", "json"}[k]
}

// Numeric reports whether arithmetic may apply to values of k (AnyKind
// included: the schema does not say otherwise).
func (k ValKind) Numeric() bool { return k == AnyKind || k == IntVal || k == RealVal }

// Valid reports whether k is one of the declared kinds.
func (k ValKind) Valid() bool { return k >= AnyKind && k <= JSONVal }

// ColumnValKind returns the kind of values column c of t holds, from its
// level, its declared type or the column its foreign key references.
func (t *Table) ColumnValKind(c string) ValKind {
	switch t.ColumnKind(c) {
	case IntKey:
		return IntVal
	case TextKey:
		if k := TypeValKind(t.Types[c]); k == JSONVal {
			return k
		}
		return TextVal
	}
	return TypeValKind(t.Types[c])
}

// TypeValKind classifies a declared SQL type beyond TypeKind's integer and
// text: real, boolean, date/time and JSON types.
func TypeValKind(typ string) ValKind {
	switch TypeKind(typ) {
	case IntKey:
		return IntVal
	case TextKey:
		return TextVal
	}
	typ = strings.ToLower(strings.TrimSpace(typ))
	base, _, _ := strings.Cut(typ, "(")
	base = strings.TrimSpace(base)
	switch {
	case base == "json" || base == "jsonb":
		return JSONVal
	case base == "real" || base == "float" || base == "double" || base == "double precision" ||
		base == "numeric" || base == "decimal" || base == "float4" || base == "float8":
		return RealVal
	case base == "bool" || base == "boolean":
		return BoolVal
	case base == "date" || base == "datetime" || strings.HasPrefix(base, "timestamp") || strings.HasPrefix(base, "time"):
		return TimeVal
	}
	return AnyKind
}

// Lit is a bound value used as an expression: always a parameter.
type Lit struct {
	V Value
}

// ArithOp is an arithmetic operator.
type ArithOp string

const (
	Add ArithOp = "+"
	Sub ArithOp = "-"
	Mul ArithOp = "*"
	Div ArithOp = "/" // real division on every engine
)

// Arith is X op Y.
type Arith struct {
	Op   ArithOp
	X, Y Expr
}

// When is one WHEN Cond THEN Then branch of a Case.
type When struct {
	Cond Pred
	Then Expr
}

// Case is CASE WHEN ... THEN ... [ELSE Else] END; Else nil means NULL.
type Case struct {
	Whens []When
	Else  Expr
}

// Coalesce is COALESCE(Xs...).
type Coalesce struct{ Xs []Expr }

// NullIf is NULLIF(X, Y).
type NullIf struct{ X, Y Expr }

// CastType is a type an expression can be cast to; each dialect spells it.
type CastType string

const (
	CastText    CastType = "text"
	CastInteger CastType = "integer"
	CastReal    CastType = "real"
	CastDate    CastType = "date"
)

// Cast is CAST(X AS To), spelled per dialect.
type Cast struct {
	X  Expr
	To CastType
}

// Func is a scalar function signature: a built-in of package builder or
// one registered in the schema. Dialects lists the engines (dialect names)
// that have it; empty for a built-in, which every engine has.
type Func struct {
	Name     string
	Args     []ValKind
	Result   ValKind
	Dialects []string
	Builtin  bool
}

// Call is a call of Fn. Part is the unit of a built-in date function
// (year, month, day...), validated by builder; "" otherwise.
type Call struct {
	Fn   *Func
	Part string
	Args []Expr
}

// JSONPath extracts the value at Keys (object keys, validated identifiers)
// from the JSON held by X, as text, or as a real number when Num.
type JSONPath struct {
	X    Expr
	Keys []string
	Num  bool
}

// WinFn is a window function: a ranking function or an aggregate.
type WinFn string

const (
	RowNumber WinFn = "ROW_NUMBER"
	Rank      WinFn = "RANK"
	DenseRank WinFn = "DENSE_RANK"
)

// Window is Fn(Arg) OVER (PARTITION BY ... ORDER BY ...). Fn is a ranking
// function (Arg nil) or an AggFn (Arg nil for COUNT(*)).
type Window struct {
	Fn          WinFn
	Arg         Expr
	Distinct    bool
	PartitionBy []Expr
	OrderBy     []Order
}

// ScalarSub is a subquery of one column used as a value.
type ScalarSub struct{ Sub *Select }

func (*Lit) isExpr()       {}
func (*Arith) isExpr()     {}
func (*Case) isExpr()      {}
func (*Coalesce) isExpr()  {}
func (*NullIf) isExpr()    {}
func (*Cast) isExpr()      {}
func (*Call) isExpr()      {}
func (*JSONPath) isExpr()  {}
func (*Window) isExpr()    {}
func (*ScalarSub) isExpr() {}
