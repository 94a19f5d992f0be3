package builder

import "github.com/tenantmcp/tenantmcp/internal/sqlast"

// scalar validates the nodes of internal/sqlast/scalar.go for scopeCheck.
//
// Invariant: every child of every node is walked here, expressions with
// v.expr, predicates with v.pred and subqueries with v.sub, so each table
// reference inside an expression is declared once, unique in the statement
// and listed in the statement's Refs, which the guard must account for.
func (v *scopeCheck) scalar(e sqlast.Expr, aggOK bool) error {
	switch x := e.(type) {
	case *sqlast.Lit:
		return nil
	case *sqlast.Arith:
		return v.exprs(aggOK, x.X, x.Y)
	case *sqlast.Case:
		for _, w := range x.Whens {
			if err := v.pred(w.Cond, aggOK); err != nil {
				return err
			}
			if err := v.expr(w.Then, aggOK); err != nil {
				return err
			}
		}
		if x.Else != nil {
			return v.expr(x.Else, aggOK)
		}
		return nil
	case *sqlast.Coalesce:
		return v.exprs(aggOK, x.Xs...)
	case *sqlast.NullIf:
		return v.exprs(aggOK, x.X, x.Y)
	case *sqlast.Cast:
		return v.expr(x.X, aggOK)
	case *sqlast.Call:
		return v.exprs(aggOK, x.Args...)
	case *sqlast.JSONPath:
		return v.expr(x.X, aggOK)
	case *sqlast.ScalarSub:
		return v.sub(x.Sub)
	case *sqlast.Window:
		if !v.win {
			return invalid("window function %s allowed only in the select list and ORDER BY", x.Fn)
		}
		// No window inside a window; aggregates are allowed where the
		// enclosing clause allows them (a rank over SUM(...) of a group).
		v.win = false
		defer func() { v.win = true }()
		if x.Arg != nil {
			if err := v.expr(x.Arg, aggOK); err != nil {
				return err
			}
		}
		if err := v.exprs(aggOK, x.PartitionBy...); err != nil {
			return err
		}
		for _, o := range x.OrderBy {
			if err := v.expr(o.X, aggOK); err != nil {
				return err
			}
		}
		return nil
	}
	return invalid("unknown expression %T", e)
}

func (v *scopeCheck) exprs(aggOK bool, es ...sqlast.Expr) error {
	for _, e := range es {
		if err := v.expr(e, aggOK); err != nil {
			return err
		}
	}
	return nil
}

// hasArgs reports whether x binds a value anywhere in it (subqueries
// included): PostgreSQL numbers parameters, so such an expression repeated
// in GROUP BY would not match its select item; Build has GROUP BY name the
// item itself instead.
func hasArgs(x sqlast.Expr) bool {
	found := false
	walkExpr(x, func(e sqlast.Expr) {
		if _, ok := e.(*sqlast.Lit); ok {
			found = true
		}
		if _, ok := e.(*sqlast.ScalarSub); ok {
			found = true // its guard binds the scope
		}
		if c, ok := e.(*sqlast.Case); ok && len(c.Whens) > 0 {
			found = true // predicates may bind values
		}
	})
	return found
}

// walkExpr calls f on x and every expression nested in it, not entering
// subqueries or predicates.
func walkExpr(x sqlast.Expr, f func(sqlast.Expr)) {
	if x == nil {
		return
	}
	f(x)
	switch x := x.(type) {
	case *sqlast.Agg:
		walkExpr(x.Arg, f)
	case *sqlast.Arith:
		walkExpr(x.X, f)
		walkExpr(x.Y, f)
	case *sqlast.Case:
		for _, w := range x.Whens {
			walkExpr(w.Then, f)
		}
		walkExpr(x.Else, f)
	case *sqlast.Coalesce:
		for _, e := range x.Xs {
			walkExpr(e, f)
		}
	case *sqlast.NullIf:
		walkExpr(x.X, f)
		walkExpr(x.Y, f)
	case *sqlast.Cast:
		walkExpr(x.X, f)
	case *sqlast.Call:
		for _, e := range x.Args {
			walkExpr(e, f)
		}
	case *sqlast.JSONPath:
		walkExpr(x.X, f)
	case *sqlast.Window:
		walkExpr(x.Arg, f)
		for _, e := range x.PartitionBy {
			walkExpr(e, f)
		}
		for _, o := range x.OrderBy {
			walkExpr(o.X, f)
		}
	}
}

// groupable refuses a GROUP BY expression that binds values unless it is
// one of the select items (same Expr value), which the guard then names by
// position.
func groupable(s *sqlast.Select, g sqlast.Expr) error {
	if !hasArgs(g) {
		return nil
	}
	for _, it := range s.Items {
		if it.X == g {
			return nil
		}
	}
	return invalid("GROUP BY an expression with bound values must group by a select item: pass the same Expr to Select and GroupBy")
}

// isItem reports whether x is one of s's select items itself (the same
// node) and one of the newer expressions, which the guard renders in ORDER
// BY by position: a scalar subquery item can then order the rows without
// being rendered, and guarded, twice.
func isItem(s *sqlast.Select, x sqlast.Expr) bool {
	switch x.(type) {
	case *sqlast.Col, *sqlast.Agg:
		return false
	}
	for _, it := range s.Items {
		if it.X == x {
			return true
		}
	}
	return false
}
