package guard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// This file renders the read structure of issue 15: derived tables, CTEs,
// set operations and row locks.
//
// Invariant: a derived table's or CTE's body, and every branch of a set
// operation, is rendered through selectBuilder like any subquery, so each
// schema table reference in it gets its own guard (and is counted in
// r.seen, which Render compares with the statement's Refs). The virtual
// reference itself reads nothing but that guarded body: a derived table is
// rendered in place, a CTE only by a name declared in this statement's
// WITH (a name the builder and guardedsql keep from shadowing a schema
// table), so no schema table is ever reached without its guard.

// fromItem renders a FROM or JOIN item: a schema table, a derived table
// "(body) AS alias" or a CTE "name AS alias".
func (r *renderer) fromItem(ref *sqlast.Ref) (engine.Frag, error) {
	switch {
	case ref.Derived != nil:
		b, err := r.body(ref.Derived)
		if err != nil {
			return engine.Frag{}, err
		}
		return engine.Frag{SQL: "(" + b.SQL + ") AS " + r.q(ref.Alias), Args: b.Args}, nil
	case ref.CTE != nil:
		if !slices.Contains(r.ctes, ref.CTE) {
			return engine.Frag{}, fmt.Errorf("%w: CTE %s read where it is not declared (only in the outermost query's With, after the CTEs it reads)", ErrInvalid, ref.CTE.Name)
		}
		return engine.Frag{SQL: r.q(ref.CTE.Name) + " AS " + r.q(ref.Alias)}, nil
	}
	if r.byPK[ref] {
		return engine.Frag{SQL: r.table(ref) + " FORCE INDEX (PRIMARY)"}, nil
	}
	return engine.Frag{SQL: r.table(ref)}, nil
}

// body renders the branches of a derived table or CTE joined by their set
// operators.
func (r *renderer) body(b *sqlast.Body) (engine.Frag, error) {
	if len(b.Branches) != len(b.Ops)+1 {
		return engine.Frag{}, fmt.Errorf("%w: set operation with %d branches and %d operators", ErrInternal, len(b.Branches), len(b.Ops))
	}
	if r.opt.NoIntersectExcept && slices.ContainsFunc(b.Ops, func(o sqlast.SetOp) bool { return o == sqlast.Intersect || o == sqlast.Except }) {
		return engine.Frag{}, fmt.Errorf("%w: this %s server lacks INTERSECT and EXCEPT (MySQL needs 8.0.31, MariaDB 10.3)", ErrSetOpUnsupported, r.d.Name())
	}
	var f fb
	for i, s := range b.Branches {
		if len(s.Outer) > 0 || len(s.With) > 0 || s.Lock != sqlast.NoLock {
			return engine.Frag{}, fmt.Errorf("%w: correlated, WITH or locking branch in a derived table, CTE or set operation", ErrInvalid)
		}
		if i > 0 {
			f.s(" ", string(b.Ops[i-1]), " ")
		}
		if i > 0 && guardfault.Off(guardfault.SetBranch) {
			// Mutation fault: the later branches lose their guard.
			saved := r.opt.EngineEnforcesReads
			r.opt.EngineEnforcesReads = true
			x, err := r.subquery(s)
			r.opt.EngineEnforcesReads = saved
			if err != nil {
				return engine.Frag{}, err
			}
			f.frag(x)
			continue
		}
		x, err := r.subquery(s)
		if err != nil {
			return engine.Frag{}, err
		}
		f.frag(x)
	}
	return f.done(), nil
}

// with renders the WITH list of the outermost query: each body guarded,
// each CTE readable by the ones after it and by the query.
func (r *renderer) with(ctes []*sqlast.CTE) (engine.Frag, error) {
	var f fb
	for i, c := range ctes {
		if slices.Contains(r.ctes, c) || slices.ContainsFunc(r.ctes, func(p *sqlast.CTE) bool { return p.Name == c.Name }) {
			return engine.Frag{}, fmt.Errorf("%w: CTE %s declared twice", ErrInvalid, c.Name)
		}
		if strings.HasPrefix(c.Name, "_") {
			return engine.Frag{}, fmt.Errorf("%w: CTE name %s is reserved", ErrInvalid, c.Name)
		}
		var b engine.Frag
		var err error
		if guardfault.Off(guardfault.CTEBody) {
			// Mutation fault: CTE bodies lose their guard.
			saved := r.opt.EngineEnforcesReads
			r.opt.EngineEnforcesReads = true
			b, err = r.body(c.Body)
			r.opt.EngineEnforcesReads = saved
		} else {
			b, err = r.body(c.Body)
		}
		if err != nil {
			return engine.Frag{}, err
		}
		if i > 0 {
			f.s(", ")
		}
		f.s(r.q(c.Name), " AS (")
		f.frag(b)
		f.s(")")
		r.ctes = append(r.ctes, c)
	}
	return f.done(), nil
}

// withPrefix merges the dialect's scope prelude and the statement's own
// WITH list into one WITH clause (an engine accepts only one): the scope
// CTE first, so the user CTEs' guards can read it.
func withPrefix(pre engine.Frag, hasPre bool, user engine.Frag) (engine.Frag, bool, error) {
	switch {
	case user.SQL == "":
		return pre, hasPre, nil
	case !hasPre:
		return engine.Frag{SQL: "WITH " + user.SQL, Args: user.Args}, true, nil
	}
	rest, ok := strings.CutPrefix(pre.SQL, "WITH ")
	if !ok {
		return engine.Frag{}, false, fmt.Errorf("%w: the dialect's prelude is not a WITH clause; it cannot be merged with the statement's CTEs", ErrInternal)
	}
	return engine.Frag{SQL: "WITH " + rest + ", " + user.SQL, Args: append(slices.Clip(pre.Args), user.Args...)}, true, nil
}

// ErrSetOpUnsupported is wrapped when the engine lacks a set operator.
var ErrSetOpUnsupported = fmt.Errorf("%w: set operator not supported by the engine", ErrInvalid)

// ErrLockUnsupported is wrapped when an engine cannot lock the rows a
// query reads as asked.
var ErrLockUnsupported = fmt.Errorf("%w: row lock not supported here", ErrInvalid)

// lockClause is the text after the query for s.Lock. PostgreSQL locks only
// the query's own FROM and inner-joined schema tables (FOR UPDATE OF):
// the parent rows the guard joins to test the scope are read, not
// written, and locking them would serialise every writer of a tenant on
// its root row. MariaDB/MySQL have no OF (MariaDB) and lock what they
// read. SQLite has no row locks: DB.Tx's transactions are BEGIN IMMEDIATE
// on its one writer connection, which already excludes every other writer
// until commit, so nothing is added.
func (r *renderer) lockClause(s *sqlast.Select) (string, error) {
	if s.Lock == sqlast.NoLock {
		return "", nil
	}
	switch r.d.Name() {
	case "sqlite":
		return "", nil
	case "mysql":
		if s.Lock == sqlast.LockShare {
			return "LOCK IN SHARE MODE", nil
		}
		return "FOR UPDATE", nil
	case "postgres":
		var of []string
		if !s.From.Virtual() {
			of = append(of, r.q(s.From.Alias))
		}
		for _, j := range s.Joins {
			if j.Kind == sqlast.InnerJoin && !j.Ref.Virtual() {
				of = append(of, r.q(j.Ref.Alias))
			}
		}
		if len(of) == 0 {
			return "", fmt.Errorf("%w: the query reads no schema table to lock", ErrLockUnsupported)
		}
		kw := "FOR UPDATE OF "
		if s.Lock == sqlast.LockShare {
			kw = "FOR SHARE OF "
		}
		return kw + strings.Join(of, ", "), nil
	}
	return "", fmt.Errorf("%w: engine %s", ErrLockUnsupported, r.d.Name())
}
