package sqlast

// This file holds the read structure of issue 15: derived tables, common
// table expressions, set operations and locking reads. The guard confines
// every table reference inside them exactly as it does any subquery's; the
// nodes here only carry structure.

// SetOp is a set operator joining two branches of a Body.
type SetOp string

const (
	Union     SetOp = "UNION"
	UnionAll  SetOp = "UNION ALL"
	Intersect SetOp = "INTERSECT"
	Except    SetOp = "EXCEPT"
)

// Body is the query of a derived table or a CTE: one SELECT, or several
// joined left to right by set operators (Ops[i] joins Branches[i] and
// Branches[i+1]). Every branch is an uncorrelated *Select with the same
// number of result columns; Cols are the result names (the first branch's).
type Body struct {
	Branches []*Select
	Ops      []SetOp
	Cols     []string
}

// CTE is one non-recursive common table expression, WITH Name AS (Body).
type CTE struct {
	Name string
	Body *Body
}

// Lock is the row lock a SELECT takes.
type Lock int

const (
	NoLock     Lock = iota
	LockUpdate      // FOR UPDATE
	LockShare       // FOR SHARE / LOCK IN SHARE MODE
)

// Virtual reports whether r names no schema table but a derived table
// (r.Derived) or a CTE (r.CTE). Its Table is then a synthetic, global
// stand-in holding only the result column names, so that column checks
// work unchanged; it carries no predicate of its own because every schema
// table reference inside its body is guarded where the body is rendered.
func (r *Ref) Virtual() bool { return r.Derived != nil || r.CTE != nil }
