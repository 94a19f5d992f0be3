package guard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Writes: the checks that keep an INSERT or UPDATE's new values in scope,
// and the plans of INSERT, UPDATE and DELETE.

// valueInScope is true when the bound value v is a granted id at lvl: a
// plain grant's. A grant confined to ancestors never makes a bare value of
// one of its levels grantable (it holds only together with the others), so
// writing such a value needs a plain grant.
func (r *renderer) valueInScope(lvl *sqlast.Level, v sqlast.Value) engine.Frag {
	if !r.sc.Has(lvl) {
		return fragFalse
	}
	nv, ok := engine.LevelValue(lvl, v.V)
	if !ok {
		return fragFalse
	}
	return r.inScope(engine.Frag{SQL: "?", Args: []any{nv}}, lvl)
}

// parentCheck is true when the row of fk.To keyed by vals is in scope.
//
// Invariant: each key value is bound as the kind of the referenced column
// (or, if the schema does not know it, of the referencing one), so the
// engine compares like with like and never converts the stored keys (MySQL
// would match '7eleven' for 7, or fail quoting a stored key); a value that
// cannot be of that kind references no row.
func (r *renderer) parentCheck(fk *sqlast.FK, vals map[string]sqlast.Value) engine.Frag {
	return r.parentCheckAlso(fk, vals, "", nil)
}

// parentCheckAlso is parentCheck, and (unless col is "") the referenced
// row's column col holds v, already bound as its kind.
func (r *renderer) parentCheckAlso(fk *sqlast.FK, vals map[string]sqlast.Value, col string, v any) engine.Frag {
	args := make([]any, len(fk.RefCols))
	for i, c := range fk.RefCols {
		v := vals[fk.Cols[i]].V
		kind := fk.To.ColumnKind(c)
		if kind == 0 {
			kind = fk.From.ColumnKind(fk.Cols[i])
		}
		if kind != 0 && !guardfault.Off(guardfault.Typed) {
			nv, ok := sqlast.ConvertValue(kind, v)
			if !ok {
				return fragFalse
			}
			v = nv
		}
		args[i] = v
	}
	a := r.newAlias()
	var f fb
	f.s("EXISTS (SELECT 1 FROM ", r.q(fk.To.Name), " AS ", r.q(a), " WHERE ")
	for i, c := range fk.RefCols {
		f.s(r.col(a, c), " = ")
		f.arg(args[i])
		f.s(" AND ")
	}
	if col != "" {
		f.s(r.col(a, col), " = ")
		f.arg(v)
		f.s(" AND ")
	}
	f.frag(r.readGuard(fk.To, a))
	f.s(")")
	return f.done()
}

// writeChecks returns the conditions a written row must meet, given the
// values assigned (all columns for INSERT, the SET columns for UPDATE),
// and whether any of them follows a foreign key. insert selects the
// INSERT-only rules (unset scope parent refused, the row itself in scope).
func (r *renderer) writeChecks(t *sqlast.Table, vals map[string]sqlast.Value, insert bool) ([]engine.Frag, bool, error) {
	var checks []engine.Frag
	viaFK := false
	for _, fk := range t.TenantFKs() {
		n := 0
		hasNull := false
		for _, c := range fk.Cols {
			if v, ok := vals[c]; ok {
				n++
				hasNull = hasNull || v.V == nil
			}
		}
		switch {
		case n == 0 && insert && fk == t.Parent:
			return nil, false, fmt.Errorf("%w: INSERT into %s must set %s, its scope parent", ErrRefused, t.Name, strings.Join(fk.Cols, ", "))
		case n == 0:
			continue
		case n < len(fk.Cols):
			return nil, false, fmt.Errorf("%w: %s sets part of the foreign key %s(%s)", ErrRefused, t.Name, t.Name, strings.Join(fk.Cols, ", "))
		case hasNull && fk == t.Parent:
			checks = append(checks, fragFalse) // an orphan is in no scope
		case hasNull:
			// A NULL reference points at no tenant.
		case fk.To.ByRef:
			checks = append(checks, r.claimCheck(fk, vals[fk.Cols[0]].V)) // byref.go
			viaFK = true
		default:
			c := r.parentCheck(fk, vals)
			if alt := r.agreeChecks(t, fk, vals); len(alt) > 0 {
				var f fb
				f.s("(")
				f.frag(c)
				for _, a := range alt {
					f.s(" OR ")
					f.frag(a)
				}
				f.s(")")
				c = f.done()
			}
			checks = append(checks, c)
			viaFK = true
		}
	}
	for _, lc := range t.LevelCols {
		// Invariant: a level column's own check is skipped only when a
		// tenant foreign key including it is fully non-NULL in the written
		// row, so the referenced row (checked above) vouches for its value.
		// With one part NULL the engine checks nothing (MATCH SIMPLE) and
		// neither does the parent check, so the value is checked here.
		if coveredByFK(t, lc.Col, vals) || guardfault.Off(guardfault.NullableFK) && t.FKCovering(lc.Col) != nil {
			continue // the referenced row's guard covers it, hierarchy included
		}
		if insert && lc.Col == t.Identity {
			continue // the new row's own id: covered by the in-scope rule below
		}
		v, ok := vals[lc.Col]
		switch {
		case !ok:
		case v.V == nil && !insert:
			checks = append(checks, fragFalse)
		case v.V == nil:
		default:
			checks = append(checks, r.valueInScope(lc.Level, v))
		}
	}
	if insert && t.Parent == nil && !t.ByRef {
		var f fb
		n := 0
		for _, lc := range t.LevelCols {
			v, ok := vals[lc.Col]
			if !ok || v.V == nil {
				continue
			}
			if n > 0 {
				f.s(" OR ")
			}
			f.frag(r.valueInScope(lc.Level, v))
			n++
		}
		if n == 0 {
			checks = append(checks, fragFalse)
		} else {
			checks = append(checks, paren(f.done()))
		}
	}
	return checks, viaFK, nil
}

// agreeChecks returns, for a single-column foreign key fk of t made of a
// level column (an issue's workspace_id), the alternatives to its parent
// check that the value agrees with another row the written row
// references and the writer sees (the project, in scope, belongs
// to that workspace): a writer granted a project, who sees no workspace
// row, may then file the project's issues, which carry their workspace.
// The value is the referenced row's own, so it names no tenant the writer
// does not already reach through that row.
func (r *renderer) agreeChecks(t *sqlast.Table, fk *sqlast.FK, vals map[string]sqlast.Value) []engine.Frag {
	if len(fk.Cols) != 1 {
		return nil
	}
	lvl := t.LevelOf(fk.Cols[0])
	if lvl == nil {
		return nil
	}
	v, ok := engine.LevelValue(lvl, vals[fk.Cols[0]].V)
	if !ok {
		return nil
	}
	var out []engine.Frag
	for _, other := range t.TenantFKs() {
		if other == fk || other.To.ByRef || len(other.Cols) != 1 {
			continue
		}
		if w, ok := vals[other.Cols[0]]; !ok || w.V == nil {
			continue
		}
		for _, lc := range other.To.LevelCols {
			if lc.Level == lvl && lc.Col != other.RefCols[0] {
				out = append(out, r.parentCheckAlso(other, vals, lc.Col, v))
			}
		}
	}
	return out
}

// coveredByFK reports whether column c of t is part of a tenant foreign key
// whose columns the written row sets, all of them non-NULL: only then does
// the parent check vouch for c's value.
func coveredByFK(t *sqlast.Table, c string, vals map[string]sqlast.Value) bool {
	for _, fk := range t.TenantFKs() {
		if !slices.Contains(fk.Cols, c) {
			continue
		}
		if !slices.ContainsFunc(fk.Cols, func(fc string) bool { v, ok := vals[fc]; return !ok || v.V == nil }) {
			return true
		}
	}
	return false
}

func and(fs []engine.Frag) engine.Frag {
	var f fb
	n, k := 0, 0
	for _, x := range fs {
		n, k = n+len(x.SQL)+5, k+len(x.Args)
	}
	f.grow(n, k)
	for i, x := range fs {
		if i > 0 {
			f.s(" AND ")
		}
		f.frag(x)
	}
	return f.done()
}

// checkedInsert is INSERT INTO t (cols) SELECT ?, … [FROM dual] WHERE
// checks: the row is written only if every check holds when the
// statement runs, in the same statement.
func (r *renderer) checkedInsert(t *sqlast.Table, cols []string, row []sqlast.Value, checks []engine.Frag) sq.InsertBuilder {
	sel := sq.Select()
	for _, v := range row {
		sel = sel.Column(engine.Frag{SQL: "?", Args: []any{v.V}})
	}
	if dual := r.d.DualTable(); dual != "" {
		sel = sel.From(dual)
	}
	return sq.Insert(r.q(t.Name)).Columns(cols...).Select(sel.Where(and(checks)))
}

// insertRowChecks types one inserted row's values by column and renders
// its write checks. Invariant: an inserted row always has at least one
// scope check (its parent, a tenant foreign key, a level column, or the
// row itself for a root); none is an internal error, never an unchecked
// insert.
func (r *renderer) insertRowChecks(t *sqlast.Table, cols []string, row []sqlast.Value) (map[string]sqlast.Value, []engine.Frag, bool, error) {
	r.usedScope = false
	vals := make(map[string]sqlast.Value, len(row))
	for i, v := range row {
		if err := checkValue(v); err != nil {
			return nil, nil, false, err
		}
		vals[cols[i]] = v
	}
	checks, viaFK, err := r.writeChecks(t, vals, true)
	if err != nil {
		return nil, nil, false, err
	}
	if checks, err = r.pairedInsert(t, vals, checks); err != nil { // pairing.go
		return nil, nil, false, err
	}
	if len(checks) == 0 && t.ByRef {
		// A new row of a table owned by reference is referenced by no
		// one: visible to no one until a row in scope references it.
		checks = []engine.Frag{fragTrue}
	}
	if len(checks) == 0 {
		return nil, nil, false, fmt.Errorf("%w: no scope check for INSERT into %s", ErrInternal, t.Name)
	}
	return vals, checks, viaFK, nil
}

func (r *renderer) insertPlan(s *sqlast.Insert) (Plan, error) {
	t := s.Ref.Table
	r.seen[s.Ref] = true
	if t.Global {
		if !writableGlobal(t) || s.Upsert != nil || s.Returning != nil || s.Source != nil {
			return Plan{}, fmt.Errorf("%w: INSERT into %s", ErrReadOnly, t.Name)
		}
		return r.globalInsert(s)
	}
	if s.Upsert != nil || s.Returning != nil || s.Source != nil {
		return r.insertWrites(s)
	}
	cols := quoteAll(r, s.Cols)
	p := Plan{Kind: Insert, Atomic: len(s.Rows) > 1}
	for _, row := range s.Rows {
		_, checks, viaFK, err := r.insertRowChecks(t, s.Cols, row)
		if err != nil {
			return Plan{}, err
		}
		ib := r.checkedInsert(t, cols, row, checks)
		returning := false
		// (h4-ref) Not for a table owned by reference: the new row is
		// visible to no one, and PostgreSQL's row-level security refuses
		// to return it.
		if rt, ok := r.d.(engine.Returner); ok && rt.Returning() && len(t.PK) == 1 && !t.ByRef {
			ib = ib.Suffix("RETURNING " + r.q(t.PK[0]))
			returning = true
		}
		text, args, err := finishBuilder(r, ib)
		if err != nil {
			return Plan{}, err
		}
		fail := ErrOutOfScope
		if viaFK || t.Parent != nil {
			fail = ErrNotFound
		}
		p.Steps = append(p.Steps, Step{SQL: text, Args: args, Expect: ExpectOne, Fail: fail, Returning: returning})
	}
	return p, nil
}

func (r *renderer) updatePlan(s *sqlast.Update) (Plan, error) {
	t := s.Ref.Table
	if t.Global && (!writableGlobal(t) || s.Returning != nil) {
		r.seen[s.Ref] = true
		return Plan{}, fmt.Errorf("%w: UPDATE of %s", ErrReadOnly, t.Name)
	}
	vals := make(map[string]sqlast.Value, len(s.Set))
	ub := sq.Update(r.q(t.Name))
	for _, a := range s.Set {
		if a.X != nil {
			x, err := r.setExpr(t, a) // scalar.go
			if err != nil {
				return Plan{}, err
			}
			ub = ub.Set(r.q(a.Col), x)
			continue
		}
		if err := checkValue(a.V); err != nil {
			return Plan{}, err
		}
		vals[a.Col] = a.V
		ub = ub.Set(r.q(a.Col), a.V.V)
	}
	if s.Where == nil {
		return Plan{}, fmt.Errorf("%w: UPDATE without WHERE", ErrInvalid)
	}
	g, err := r.guardRef(s.Ref)
	if err != nil {
		return Plan{}, err
	}
	w, err := r.orderedPred(s.Where, r.refGuard) // order.go
	if err != nil {
		return Plan{}, err
	}
	ub = ub.Where(paren(w))
	if !g.IsZero() { // zero: a writable global table
		ub = ub.Where(g)
	}
	checks, _, err := r.writeChecks(t, vals, false)
	if err != nil {
		return Plan{}, err
	}
	for _, c := range checks {
		ub = ub.Where(c)
	}
	assigned := maps.Clone(vals)
	for _, a := range s.Set {
		assigned[a.Col] = a.V
	}
	if !g.IsZero() {
		paired, err := r.pairedUpdate(t, s.Ref.Alias, vals, assigned, checks) // pairing.go
		if err != nil {
			return Plan{}, err
		}
		if !paired.IsZero() {
			ub = ub.Where(paired)
			g = and([]engine.Frag{g, paired})
		}
	}
	wg := r.writeGuard(t, s.Ref.Alias, assigned) // byref.go
	for _, c := range wg {
		ub = ub.Where(c)
	}
	if len(wg) > 0 && !g.IsZero() {
		g = and(append([]engine.Frag{g}, wg...))
	}
	if r.byKey() && len(t.PK) > 0 && !g.IsZero() {
		set, err := r.setClause(s)
		if err != nil {
			return Plan{}, err
		}
		return r.keyedWrite(Update, s.Ref, set, w, g, wg, checks, s.Returning, s.ExpectOne) // keyed.go
	}
	if s.Returning != nil {
		return r.updateReturning(s, ub, w, g, checks)
	}
	return plainWrite(r, ub, Update, s.Ref, s.ExpectOne, w, wg)
}

func (r *renderer) deletePlan(s *sqlast.Delete) (Plan, error) {
	t := s.Ref.Table
	if t.Global && (!writableGlobal(t) || s.Returning != nil) {
		r.seen[s.Ref] = true
		return Plan{}, fmt.Errorf("%w: DELETE from %s", ErrReadOnly, t.Name)
	}
	if s.Where == nil {
		return Plan{}, fmt.Errorf("%w: DELETE without WHERE", ErrInvalid)
	}
	g, err := r.guardRef(s.Ref)
	if err != nil {
		return Plan{}, err
	}
	w, err := r.orderedPred(s.Where, r.refGuard) // order.go
	if err != nil {
		return Plan{}, err
	}
	wg := r.writeGuard(t, s.Ref.Alias, nil) // byref.go
	if len(wg) > 0 && !g.IsZero() {
		g = and(append([]engine.Frag{g}, wg...))
	}
	if r.byKey() && len(t.PK) > 0 && !g.IsZero() {
		return r.keyedWrite(Delete, s.Ref, engine.Frag{}, w, g, wg, nil, s.Returning, s.ExpectOne) // keyed.go
	}
	db := sq.Delete(r.q(t.Name)).Where(paren(w))
	if !g.IsZero() { // zero: a writable global table
		db = db.Where(g)
	}
	if s.Returning != nil {
		return r.deleteReturning(s, db, w, g)
	}
	return plainWrite(r, db, Delete, s.Ref, s.ExpectOne, w, wg)
}

// plainWrite finishes an UPDATE or DELETE as the one statement b, whose
// ExpectOne miss is told apart from a row the write guard wg held back by
// sharedProbe.
func plainWrite[B sqBuilder[B]](r *renderer, b B, kind Kind, ref *sqlast.Ref, expectOne bool, w engine.Frag, wg []engine.Frag) (Plan, error) {
	text, args, err := finishBuilder(r, b)
	if err != nil {
		return Plan{}, err
	}
	st := Step{SQL: text, Args: args, Fail: ErrNotFound}
	if expectOne {
		st.Expect = ExpectOne
	}
	if st.Probe, err = r.expectProbe(expectOne, ref, w, wg); err != nil {
		return Plan{}, err
	}
	return Plan{Kind: kind, Steps: []Step{st}, Atomic: expectOne}, nil
}

// expectProbe is sharedProbe for a write with ExpectOne, else zero.
func (r *renderer) expectProbe(expectOne bool, ref *sqlast.Ref, w engine.Frag, wg []engine.Frag) (engine.Frag, error) {
	if !expectOne {
		return engine.Frag{}, nil
	}
	return r.sharedProbe(ref, w, wg)
}
