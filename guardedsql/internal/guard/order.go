package guard

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Issue 26 §2: an engine error never depends on another tenant's values.
//
// An engine evaluates a WHERE clause's conditions in an order of its own
// choosing: MariaDB reads a row by the index of the caller's condition and
// tests the rest of the caller's condition before the semi-join that is the
// tenant test, and in strict mode a conversion in an UPDATE or DELETE
// ("Truncated incorrect DOUBLE value"), an overflow in any statement
// ("BIGINT value is out of range") or a JSON function on malformed text
// (SQLite) raises an error on a row the guard would have dropped. Whether
// the statement fails then says something about another tenant's value, one
// bit per probe. So a condition that could raise an error on some value is
// evaluated only under CASE WHEN <tenant test> THEN <condition> END, an
// order every engine must respect (the THEN branch is evaluated only for a
// row the WHEN accepted); conditions that cannot raise (a column compared
// with a bound value of its own kind, two columns of one kind, IS NULL,
// LIKE on text, subqueries, which order their own conditions) stay plain
// conjuncts, where the engine can use them for index lookups.
//
// A comparison that makes the engine convert one of its sides (a text
// column compared with a number column) is refused with ErrConversion: its
// outcome, not only its errors, would depend on the engine's conversion
// of a value.

// ErrConversion is wrapped (with ErrRefused) by Render for a comparison of
// two expressions of different kinds, which the engine would compare by
// converting one of them: compare values of one kind, or CAST one side
// explicitly.
var ErrConversion = fmt.Errorf("%w: comparison of values of different kinds (the engine would convert one)", ErrRefused)

// raising reports whether evaluating p on some row could raise an engine
// error that depends on the row's values. It returns ErrConversion for a
// comparison of two expressions of different known kinds.
func raising(p sqlast.Pred) (bool, error) {
	switch x := p.(type) {
	case *sqlast.CmpVal:
		return !plainCol(x.X), nil
	case *sqlast.CmpExpr:
		kx, ky := exprKind(x.X), exprKind(x.Y)
		if kx != sqlast.AnyKind && ky != sqlast.AnyKind && kx != ky && !(kx.Numeric() && ky.Numeric()) {
			return false, fmt.Errorf("%w: %s %s %s", ErrConversion, kx, x.Op, ky)
		}
		return !plainCol(x.X) || !plainCol(x.Y), nil
	case *sqlast.Between:
		return !plainCol(x.X), nil
	case *sqlast.InList:
		return !plainCol(x.X), nil
	case *sqlast.Like:
		return !plainCol(x.X), nil
	case *sqlast.IsNull:
		_, ok := x.X.(*sqlast.Col)
		return !ok, nil
	case *sqlast.Exists:
		return false, nil // its body orders its own conditions
	case *sqlast.InSelect:
		// x IN (SELECT y ...): x and y are compared; the body orders the
		// rest of its own conditions.
		if len(x.Sub.Items) != 1 {
			return true, nil
		}
		kx, ky := exprKind(x.X), exprKind(x.Sub.Items[0].X)
		if kx != sqlast.AnyKind && ky != sqlast.AnyKind && kx != ky && !(kx.Numeric() && ky.Numeric()) {
			return false, fmt.Errorf("%w: %s IN (SELECT %s)", ErrConversion, kx, ky)
		}
		return !plainCol(x.X) || !plainCol(x.Sub.Items[0].X), nil
	case *sqlast.And:
		return anyRaising(x.Ps)
	case *sqlast.Or:
		return anyRaising(x.Ps)
	case *sqlast.Not:
		return raising(x.P)
	}
	return true, nil
}

func anyRaising(ps []sqlast.Pred) (bool, error) {
	out := false
	for _, p := range ps {
		r, err := raising(p)
		if err != nil {
			return false, err
		}
		out = out || r
	}
	return out, nil
}

// plainCol reports whether e is a column. The builder binds every value
// compared with a column of known kind as that kind, so the comparison
// converts nothing. A column the schema gives no type (a hand-declared
// schema without Types) is taken at the schema's word too: the guard cannot
// know what the engine would convert there, which is why Open introspects
// the types (package doc, "What is trusted").
func plainCol(e sqlast.Expr) bool {
	_, ok := e.(*sqlast.Col)
	return ok
}

// exprKind is the kind of a column, or AnyKind for any other expression
// (the builder has checked expressions' kinds where it knows them).
func exprKind(e sqlast.Expr) sqlast.ValKind {
	if c, ok := e.(*sqlast.Col); ok {
		return c.Ref.Table.ColumnValKind(c.Name)
	}
	return sqlast.AnyKind
}

// conjunctRaises reports whether one of p's top-level conjuncts may raise (see
// raising), stopping at the first that does or the first error.
func conjunctRaises(p sqlast.Pred) (bool, error) {
	if a, ok := p.(*sqlast.And); ok {
		for _, q := range a.Ps {
			if rz, err := conjunctRaises(q); rz || err != nil {
				return rz, err
			}
		}
		return false, nil
	}
	return raising(p)
}

// conjuncts splits p at its top-level ANDs.
func conjuncts(p sqlast.Pred) []sqlast.Pred {
	if a, ok := p.(*sqlast.And); ok {
		var out []sqlast.Pred
		for _, q := range a.Ps {
			out = append(out, conjuncts(q)...)
		}
		return out
	}
	return []sqlast.Pred{p}
}

// orderedPred renders the caller's condition p so that its conditions
// that could raise are evaluated only for rows the tenant test accepts:
// the plain conjuncts as they are, the others as one
// CASE WHEN <guard(refs they read)> THEN (<them>) END. guardOf returns the
// tenant test of a reference (zero for one that needs none here).
//
// Invariant: a condition of the caller that may raise an error on some
// value is evaluated only under a CASE whose WHEN is the tenant test of
// every table reference it reads.
func (r *renderer) orderedPred(p sqlast.Pred, guardOf func(*sqlast.Ref) engine.Frag) (engine.Frag, error) {
	if guardfault.Off(guardfault.GuardFirst) {
		return r.pred(p)
	}
	// The usual condition has nothing that may raise: find that out
	// without splitting it into lists. The first error is the one the
	// loop below would return, since it visits the conjuncts in order.
	if rz, err := conjunctRaises(p); err != nil {
		return engine.Frag{}, err
	} else if !rz {
		return r.pred(p) // the text as before: nothing to order
	}
	var plain, risky []sqlast.Pred
	for _, c := range conjuncts(p) {
		rz, err := raising(c)
		if err != nil {
			return engine.Frag{}, err
		}
		if rz {
			risky = append(risky, c)
		} else {
			plain = append(plain, c)
		}
	}
	if len(risky) == 0 {
		return r.pred(p) // the text as before: nothing to order
	}
	var f fb
	for i, c := range plain {
		if i > 0 {
			f.s(" AND ")
		}
		x, err := r.pred(c)
		if err != nil {
			return engine.Frag{}, err
		}
		f.frag(paren(x))
	}
	var guards []engine.Frag
	seen := map[*sqlast.Ref]bool{}
	for _, c := range risky {
		for _, ref := range predRefs(c) {
			if seen[ref] || ref.Virtual() || ref.Table.Global {
				continue
			}
			seen[ref] = true
			if g := guardOf(ref); !g.IsZero() && g.SQL != fragTrue.SQL {
				guards = append(guards, g)
			}
		}
	}
	body, err := r.pred(&sqlast.And{Ps: risky})
	if err != nil {
		return engine.Frag{}, err
	}
	if len(plain) > 0 {
		f.s(" AND ")
	}
	if len(guards) == 0 {
		f.frag(paren(body))
		return f.done(), nil
	}
	f.s("(CASE WHEN ")
	f.frag(and(guards))
	f.s(" THEN (")
	f.frag(body)
	f.s(") END)")
	return f.done(), nil
}

// predRefs lists the table references whose columns p reads directly (not
// inside subqueries, which order their own conditions), outer references
// of a correlated subquery included.
func predRefs(p sqlast.Pred) []*sqlast.Ref {
	var out []*sqlast.Ref
	var expr func(e sqlast.Expr)
	expr = func(e sqlast.Expr) {
		switch x := e.(type) {
		case *sqlast.Col:
			out = append(out, x.Ref)
		case *sqlast.Arith:
			expr(x.X)
			expr(x.Y)
		case *sqlast.Cast:
			expr(x.X)
		case *sqlast.Coalesce:
			for _, y := range x.Xs {
				expr(y)
			}
		case *sqlast.NullIf:
			expr(x.X)
			expr(x.Y)
		case *sqlast.Call:
			for _, y := range x.Args {
				expr(y)
			}
		case *sqlast.JSONPath:
			expr(x.X)
		case *sqlast.Case:
			for _, w := range x.Whens {
				out = append(out, predRefs(w.Cond)...)
				expr(w.Then)
			}
			if x.Else != nil {
				expr(x.Else)
			}
		case *sqlast.Agg:
			if x.Arg != nil {
				expr(x.Arg)
			}
		}
	}
	var pred func(p sqlast.Pred)
	pred = func(p sqlast.Pred) {
		switch x := p.(type) {
		case *sqlast.CmpVal:
			expr(x.X)
		case *sqlast.CmpExpr:
			expr(x.X)
			expr(x.Y)
		case *sqlast.Between:
			expr(x.X)
		case *sqlast.InList:
			expr(x.X)
		case *sqlast.InSelect:
			expr(x.X)
			out = append(out, x.Sub.Outer...)
		case *sqlast.Exists:
			out = append(out, x.Sub.Outer...)
		case *sqlast.Like:
			expr(x.X)
		case *sqlast.IsNull:
			expr(x.X)
		case *sqlast.And:
			for _, q := range x.Ps {
				pred(q)
			}
		case *sqlast.Or:
			for _, q := range x.Ps {
				pred(q)
			}
		case *sqlast.Not:
			pred(x.P)
		}
	}
	pred(p)
	return out
}

// refGuard is the tenant test of ref under its alias.
func (r *renderer) refGuard(ref *sqlast.Ref) engine.Frag {
	return r.readGuard(ref.Table, ref.Alias)
}

// joinGuard returns orderedPred's guardOf for the conditions of s: the
// tenant test of a reference, and for a LEFT JOINed one the test or the
// absence of a joined row (its primary key NULL), so that a NULL-extended
// row is judged by the condition as before.
func (r *renderer) joinGuard(s *sqlast.Select) func(*sqlast.Ref) engine.Frag {
	return func(ref *sqlast.Ref) engine.Frag {
		g := r.refGuard(ref)
		for _, j := range s.Joins {
			if j.Ref != ref || j.Kind != sqlast.LeftJoin {
				continue
			}
			if len(ref.Table.PK) == 0 {
				return engine.Frag{}
			}
			var f fb
			f.s("(")
			f.frag(g)
			f.s(" OR ", r.col(ref.Alias, ref.Table.PK[0]), " IS NULL)")
			return f.done()
		}
		return g
	}
}
