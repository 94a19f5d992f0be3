package guard

import (
	"fmt"
	"slices"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// (h4-ref) Tables owned by reference and consistency paths (issue 25 §1–2).
//
// A table owned by reference (sqlast.Table.ByRef: addresses referenced from
// customers, staff and stores) has no tenant column; its rows belong to the
// tenants of the rows that reference them through its Referrers:
//
//   - read: a row is visible iff some referencing row is in scope
//     (byRefGuard); an unreferenced row is visible to no one;
//   - UPDATE, DELETE: the row must be visible and every referencing row in
//     scope (exclusiveGuard), so a row referenced by two tenants is readable
//     by both and writable by neither (ErrSharedRow with ExpectOne);
//   - INSERT: creates an unreferenced row, visible to no one;
//   - a tenant row may reference (INSERT, UPDATE, upsert, INSERT ... SELECT)
//     only a row that is unreferenced or visible to the writer
//     (claimCheck).
//
// Rows with several paths to a tenant: the scope parent decides
// visibility; every other checked foreign key to a tenant-bound table is a
// consistency path. Written values are checked by writeChecks (parentCheck);
// an UPDATE or DELETE also needs the referenced rows of the consistency
// paths it leaves unchanged in scope (consistencyGuard), so a row whose
// paths lead to different tenants is readable by its owner and writable by
// no one.

// ErrSharedRow is returned by an ExpectOne UPDATE or DELETE of a row that
// is in scope but that the write would leave tied to rows outside it: a row
// of a table owned by reference that another tenant's row references too,
// a row one of whose consistency paths leads to a row outside the scope, or
// an UPDATE that would point one of them there. It matches ErrNotFound.
var ErrSharedRow = fmt.Errorf("%w: the row is in scope, but after the write it would be tied to rows outside the tenant scope (a foreign key to a row outside it: another tenant's, no tenant's or a missing one; or another tenant's reference to it)", ErrNotFound)

// byRefGuard is true for a row of t (owned by reference, under alias) that
// some row of a Referrer in scope references.
func (r *renderer) byRefGuard(t *sqlast.Table, alias string) engine.Frag {
	if len(t.Referrers) == 0 {
		return fragFalse
	}
	var f fb
	f.s("(")
	for i, fk := range t.Referrers {
		if i > 0 {
			f.s(" OR ")
		}
		x := r.newAlias()
		f.s("EXISTS (SELECT 1 FROM ", r.q(fk.From.Name), " AS ", r.q(x), " WHERE ", r.eqs(x, fk.Cols, alias, fk.RefCols), " AND ")
		f.frag(r.readGuard(fk.From, x))
		f.s(")")
	}
	f.s(")")
	return f.done()
}

// foreignRefs is the number of rows outside the caller's scope that
// reference the row of t (owned by reference) keyed by key.
func (r *renderer) foreignRefs(t *sqlast.Table, key engine.Frag) engine.Frag {
	if rc, ok := r.d.(engine.RefCounter); ok {
		return rc.ForeignRefs(t, key)
	}
	var f fb
	f.s("(")
	for i, fk := range t.Referrers {
		if i > 0 {
			f.s(" + ")
		}
		x := r.newAlias()
		f.s("(SELECT COUNT(*) FROM ", r.q(fk.From.Name), " AS ", r.q(x), " WHERE ", r.col(x, fk.Cols[0]), " = ")
		f.frag(key)
		// NULL-safe: a referencing row whose guard is NULL (an orphan) is
		// outside the scope.
		f.s(" AND CASE WHEN ")
		f.frag(r.readGuardWrite(fk.From, x))
		f.s(" THEN 0 ELSE 1 END = 1)")
	}
	f.s(")")
	return f.done()
}

// readGuardWrite is readGuard, rendered even where the engine enforces
// reads itself: a count of the rows outside the scope needs the predicate.
func (r *renderer) readGuardWrite(t *sqlast.Table, alias string) engine.Frag {
	saved := r.opt.EngineEnforcesReads
	r.opt.EngineEnforcesReads = false
	defer func() { r.opt.EngineEnforcesReads = saved }()
	return r.readGuard(t, alias)
}

// exclusiveGuard is true for a row of t (owned by reference, under alias)
// that no row outside the scope references. With the read guard (some
// referencing row in scope) it makes the row the caller's alone.
//
// Invariant: a row of a table owned by reference is updated or deleted only
// when this holds, so no tenant changes a row another tenant's row
// references.
func (r *renderer) exclusiveGuard(t *sqlast.Table, alias string) engine.Frag {
	if guardfault.Off(guardfault.ByRef) {
		return fragTrue
	}
	var f fb
	f.s("(")
	f.frag(r.foreignRefs(t, engine.Frag{SQL: r.col(alias, t.PK[0])}))
	f.s(" = 0)")
	return f.done()
}

// claimCheck is true when the row of fk.To (owned by reference) keyed by
// the value v may be referenced by a row the caller writes: it exists, and
// no row references it yet or some row in the caller's scope does.
//
// Invariant: a tenant row never comes to reference a row of a table owned
// by reference that only other tenants' rows reference, and such a row is
// refused exactly as a missing one is (by the guard, not by the database's
// foreign key), so the refusal does not tell another tenant's row from none.
func (r *renderer) claimCheck(fk *sqlast.FK, v any) engine.Frag {
	t := fk.To
	if kind := t.ColumnKind(t.PK[0]); kind != 0 && !guardfault.Off(guardfault.Typed) {
		nv, ok := sqlast.ConvertValue(kind, v)
		if !ok {
			return fragFalse
		}
		v = nv
	}
	if guardfault.Off(guardfault.ByRef) {
		return fragTrue
	}
	key := engine.Frag{SQL: "?", Args: []any{v}}
	if rc, ok := r.d.(engine.RefCounter); ok {
		return rc.Claimable(t, key)
	}
	a := r.newAlias()
	var f fb
	if guardfault.Off(guardfault.ByRefExists) {
		f.s("(")
	} else {
		f.s("EXISTS (SELECT 1 FROM ", r.q(t.Name), " AS ", r.q(a), " WHERE ", r.col(a, t.PK[0]), " = ")
		f.arg(v)
		f.s(" AND (")
	}
	for i, fk := range t.Referrers {
		if i > 0 {
			f.s(" AND ")
		}
		x := r.newAlias()
		f.s("NOT EXISTS (SELECT 1 FROM ", r.q(fk.From.Name), " AS ", r.q(x), " WHERE ", r.col(x, fk.Cols[0]), " = ")
		f.frag(key)
		f.s(")")
	}
	b := r.newAlias()
	f.s(" OR EXISTS (SELECT 1 FROM ", r.q(t.Name), " AS ", r.q(b), " WHERE ", r.col(b, t.PK[0]), " = ")
	f.arg(v)
	f.s(" AND ")
	f.frag(r.byRefGuard(t, b))
	f.s("))")
	if !guardfault.Off(guardfault.ByRefExists) {
		f.s(")")
	}
	return f.done()
}

// consistencyGuard returns, for an UPDATE or DELETE of t's rows under
// alias, the conditions that every consistency path the statement leaves
// unassigned (not in assigned) leads to a row in scope or to none (a NULL
// key). The scope parent is the read guard's (unless t has level columns
// of its own); keys into tables owned by
// reference are covered by the row itself (a row in scope referencing it
// makes it visible); a key into t itself is not tested (MySQL cannot read
// an UPDATE's target table in its WHERE), nor one all of whose columns are
// t's own level columns (the read guard tests those values).
//
// Invariant: a row whose consistency paths lead to other tenants is changed
// by no one.
func (r *renderer) consistencyGuard(t *sqlast.Table, alias string, assigned map[string]sqlast.Value) []engine.Frag {
	if guardfault.Off(guardfault.ConsistencyPaths) || guardfault.Dropped(t.Name) {
		return nil
	}
	var out []engine.Frag
	for _, fk := range t.TenantFKs() {
		// The scope parent is the read guard's, unless t has level columns
		// of its own: the row is then in scope by them, and its parent is a
		// path like any other (a webhook of team 1 on team 2's channel).
		if fk == t.Parent && len(t.LevelCols) == 0 || fk.To == t || fk.To.ByRef {
			continue
		}
		if !sqlast.SameTenancy(fk) {
			continue
		}
		if slices.ContainsFunc(fk.Cols, func(c string) bool { _, ok := assigned[c]; return ok }) {
			continue // checked by value (writeChecks)
		}
		if !slices.ContainsFunc(fk.Cols, func(c string) bool { return t.LevelOf(c) == nil }) {
			continue
		}
		x := r.newAlias()
		var f fb
		f.s("(")
		for _, c := range fk.Cols {
			f.s(r.col(alias, c), " IS NULL OR ")
		}
		f.s("EXISTS (SELECT 1 FROM ", r.q(fk.To.Name), " AS ", r.q(x), " WHERE ", r.eqs(x, fk.RefCols, alias, fk.Cols), " AND ")
		f.frag(r.readGuard(fk.To, x))
		f.s("))")
		out = append(out, f.done())
	}
	return out
}

// conflictWriteGuard is writeGuard for the conflicting row of an upsert's
// DO UPDATE (read under the table's own name), unless the conflict check
// is the fault under test.
func (r *renderer) conflictWriteGuard(t *sqlast.Table, assigned map[string]sqlast.Value) []engine.Frag {
	if guardfault.Off(guardfault.UpsertConflict) {
		return nil
	}
	return r.writeGuard(t, t.Name, assigned)
}

// writeGuard returns the conditions, besides the read guard, that a row of
// t under alias must meet to be updated or deleted: exclusiveGuard for a
// table owned by reference, consistencyGuard otherwise.
func (r *renderer) writeGuard(t *sqlast.Table, alias string, assigned map[string]sqlast.Value) []engine.Frag {
	if t.ByRef {
		if guardfault.Dropped(t.Name) {
			return nil
		}
		return []engine.Frag{r.exclusiveGuard(t, alias)}
	}
	return r.consistencyGuard(t, alias, assigned)
}

// sharedProbe renders the statement that tells, after an ExpectOne UPDATE
// or DELETE of t matched nothing, whether it matched a row in scope that
// writeGuard held back (ErrSharedRow) rather than no row (ErrNotFound):
// SELECT 1 FROM t WHERE w AND <read guard>. It returns a zero Frag when t
// has no write guard.
func (r *renderer) sharedProbe(ref *sqlast.Ref, w engine.Frag, guards []engine.Frag) (engine.Frag, error) {
	if len(guards) == 0 {
		return engine.Frag{}, nil
	}
	saved := r.usedScope
	r.usedScope = false
	defer func() { r.usedScope = saved }()
	g := r.readGuard(ref.Table, ref.Alias)
	var f fb
	f.s("SELECT 1 FROM ", r.table(ref), " WHERE ")
	f.frag(paren(w))
	f.s(" AND ")
	f.frag(g)
	body := f.done()
	var out fb
	r.preludeInto(&out)
	out.frag(body)
	return r.finishSQL(out.done())
}

// readBackGuard is true for a row of t (owned by reference, read under the
// table's own name) that the writer may read back after inserting or
// upserting it: referenced by no row outside the scope (the row it just
// inserted, in its own transaction, is referenced by none).
func (r *renderer) readBackGuard(t *sqlast.Table) engine.Frag {
	var f fb
	f.s("(")
	f.frag(r.foreignRefs(t, engine.Frag{SQL: r.col(t.Name, t.PK[0])}))
	f.s(" = 0)")
	return f.done()
}
