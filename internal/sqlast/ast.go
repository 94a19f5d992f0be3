package sqlast

// Stmt is one of *Select, *Insert, *Update, *Delete.
type Stmt interface{ isStmt() }

// Unseal returns the statement inside one of package builder's sealed
// values (Query, Insert, Update, Delete). Package builder installs it at
// init; it reports false for anything else, including zero values.
var Unseal func(v any) (Stmt, bool)

// SchemaOf returns the graph inside a *builder.Schema. Installed by builder.
var SchemaOf func(v any) (*Schema, bool)

// Ref is one table reference in a statement. Aliases are unique within a
// statement tree, subqueries included, so a Ref pointer and its alias are
// interchangeable there.
type Ref struct {
	Table *Table
	Alias string
	// Derived is the body of a derived table (a subquery in FROM or JOIN),
	// CTE the common table expression referred to; both nil for a schema
	// table. See Virtual.
	Derived *Body
	CTE     *CTE

	// cols holds a node for each column of Table, made with the reference
	// by NewRef (nil otherwise): see Col.
	cols []Col
}

// NewRef returns a reference to the schema table t under alias, with the
// nodes of t's columns made at once, so that naming a column (Col) does not
// allocate.
func NewRef(t *Table, alias string) *Ref {
	r := &Ref{Table: t, Alias: alias}
	r.cols = make([]Col, len(t.Columns))
	for i, c := range t.Columns {
		r.cols[i] = Col{Ref: r, Name: c}
	}
	return r
}

// Col returns the node of column name of r, or nil when r's table has no
// such column. Nodes are never modified once made, so the same node may
// stand for every use of the column in a statement: the guard and the
// builder compare columns by reference and name, never by node identity.
func (r *Ref) Col(name string) *Col {
	i, ok := r.Table.colIdx[name]
	if !ok {
		return nil
	}
	if i < len(r.cols) {
		return &r.cols[i]
	}
	return &Col{Ref: r, Name: name}
}

// Expr is a scalar expression: *Col, *Agg, or one of the nodes of
// scalar.go.
type Expr interface{ isExpr() }

// Col is a column of a table reference.
type Col struct {
	Ref  *Ref
	Name string
}

// AggFn is an aggregate function.
type AggFn string

const (
	Count AggFn = "COUNT"
	Sum   AggFn = "SUM"
	Avg   AggFn = "AVG"
	Min   AggFn = "MIN"
	Max   AggFn = "MAX"
)

// Agg is an aggregate; Arg nil means COUNT(*).
type Agg struct {
	Fn       AggFn
	Arg      Expr
	Distinct bool
}

func (*Col) isExpr() {}
func (*Agg) isExpr() {}

// Value is a bind value: always sent as a parameter, never as SQL text. V
// is one of nil, bool, int64, float64, string, []byte, time.Time (builder
// normalises everything else away or rejects it).
type Value struct{ V any }

// Pred is a boolean condition.
type Pred interface{ isPred() }

// CmpOp is a comparison operator.
type CmpOp string

const (
	Eq CmpOp = "="
	Ne CmpOp = "<>"
	Lt CmpOp = "<"
	Le CmpOp = "<="
	Gt CmpOp = ">"
	Ge CmpOp = ">="
)

// CmpVal compares an expression with a bind value.
type CmpVal struct {
	Op CmpOp
	X  Expr
	V  Value
}

// CmpExpr compares two expressions.
type CmpExpr struct {
	Op   CmpOp
	X, Y Expr
}

// Between is X BETWEEN Lo AND Hi.
type Between struct {
	X      Expr
	Lo, Hi Value
}

// InList is X [NOT] IN (values); an empty list is false (true for NOT IN).
type InList struct {
	X    Expr
	Vals []Value
	Not  bool
}

// InSelect is X [NOT] IN (subquery).
type InSelect struct {
	X   Expr
	Sub *Select
	Not bool
}

// Exists is [NOT] EXISTS (subquery).
type Exists struct {
	Sub *Select
	Not bool
}

// Like is X [NOT] LIKE pattern ESCAPE '\'.
type Like struct {
	X       Expr
	Pattern Value
	Not     bool
}

// IsNull is X IS [NOT] NULL.
type IsNull struct {
	X   Expr
	Not bool
}

// And, Or and Not combine predicates. An empty And is true, an empty Or
// false.
type And struct{ Ps []Pred }
type Or struct{ Ps []Pred }
type Not struct{ P Pred }

func (*CmpVal) isPred()   {}
func (*CmpExpr) isPred()  {}
func (*Between) isPred()  {}
func (*InList) isPred()   {}
func (*InSelect) isPred() {}
func (*Exists) isPred()   {}
func (*Like) isPred()     {}
func (*IsNull) isPred()   {}
func (*And) isPred()      {}
func (*Or) isPred()       {}
func (*Not) isPred()      {}

// Item is one result column.
type Item struct {
	X  Expr
	As string // "" for none
}

// JoinKind is INNER or LEFT.
type JoinKind int

const (
	InnerJoin JoinKind = iota
	LeftJoin
)

// Join is one joined table reference.
type Join struct {
	Kind JoinKind
	Ref  *Ref
	On   Pred
}

// Order is one ORDER BY term.
type Order struct {
	X    Expr
	Desc bool
}

// Select is a SELECT statement or subquery.
type Select struct {
	Distinct bool
	Items    []Item
	From     *Ref
	Joins    []Join
	Where    Pred // nil for none
	GroupBy  []Expr
	Having   Pred
	OrderBy  []Order
	Limit    int64 // -1 for none
	Offset   int64 // -1 for none
	// With holds the common table expressions of a top-level query; Lock
	// its row lock (compound.go).
	With []*CTE
	Lock Lock

	// Refs lists every table reference declared in this select and in the
	// subqueries nested in it, in declaration order.
	Refs []*Ref
	// Outer lists references this select uses but does not declare: a
	// correlated subquery's outer tables. Empty for a top-level query.
	Outer []*Ref
}

// Insert inserts Rows into Ref.Table; each row has one value per Cols entry.
type Insert struct {
	Ref  *Ref
	Cols []string
	Rows [][]Value
	Refs []*Ref
	// Returning lists the columns the statement returns (RETURNING).
	Returning []string
	// Upsert is the ON CONFLICT clause; nil for none (writes.go).
	Upsert *Upsert
	// Source, when set, produces the rows instead of Rows (INSERT ...
	// SELECT); its references are in Refs after Ref.
	Source *Select
}

// Assign is one SET clause: Col = V, or Col = X when X is not nil (an
// expression over the target's own columns, see builder's SetExpr).
type Assign struct {
	Col string
	V   Value
	X   Expr
}

// Update updates the rows of Ref.Table matching Where.
type Update struct {
	Ref       *Ref
	Set       []Assign
	Where     Pred
	ExpectOne bool
	Refs      []*Ref
	Returning []string // columns returned (RETURNING)
}

// Delete deletes the rows of Ref.Table matching Where.
type Delete struct {
	Ref       *Ref
	Where     Pred
	ExpectOne bool
	Refs      []*Ref
	Returning []string // columns returned (RETURNING)
}

func (*Select) isStmt() {}
func (*Insert) isStmt() {}
func (*Update) isStmt() {}
func (*Delete) isStmt() {}
