package guard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// SELECT rendering: which references carry their own predicate, which are
// elided or path-joined, and the statement's clauses.

// How a table reference of a SELECT is guarded.
type refMode int

const (
	modePredicate refMode = iota // predicate in WHERE (FROM) or ON (joins)
	modeElided                   // implied by an inner join to its guarded scope parent
	modePathJoin                 // scope path added as inner joins, condition in WHERE
)

// refModes decides, for the mandatory references of s (FROM and inner
// joins), whether a cheaper equivalent of the predicate applies.
//
// Elision: a reference X whose scope is read only through its parent (no
// own level column among the active levels) needs no predicate when the
// statement inner-joins a reference Y of the parent table on exactly X's
// parent foreign key, as a top-level conjunct of WHERE or of an inner
// join's ON: every result row then pairs X with a Y row that passed Y's own
// guard, and X is in scope exactly when its parent is. Y is guarded itself
// or elided by the same rule one level up; scope chains are acyclic, so
// this ends at a guarded reference.
//
// Path join: otherwise, when every hop of X's scope path references the
// parent's primary key, the path is added as inner joins (each matches at
// most one row, so no row is multiplied) and the level test goes to WHERE:
// the shape an expert writes by hand, which the planner can order freely.
//
// Left-joined references, tables with own level columns, non-primary-key
// paths and mutations keep the predicate.
func (r *renderer) refModes(s *sqlast.Select) map[*sqlast.Ref]refMode {
	var modes map[*sqlast.Ref]refMode // made on the first entry; absent reads as modePredicate
	set := func(x *sqlast.Ref, m refMode) {
		if modes == nil {
			modes = map[*sqlast.Ref]refMode{}
		}
		modes[x] = m
	}
	if r.opt.PredicatesOnly || r.opt.EngineEnforcesReads {
		return modes
	}
	mand := make([]*sqlast.Ref, 1, 1+len(s.Joins))
	mand[0] = s.From
	conj := map[[2]colKey]bool{}
	addEqs(conj, s.Where)
	for _, j := range s.Joins {
		if j.Kind == sqlast.InnerJoin {
			mand = append(mand, j.Ref)
			addEqs(conj, j.On)
		}
	}
	for _, x := range mand {
		t := x.Table
		if t.Global || guardfault.Dropped(t.Name) {
			continue
		}
		own, path, deep := r.activeTerms(t)
		if len(own)+len(path) == 0 || t.Parent == nil {
			continue
		}
		if ownCol := func(tm term) bool { return tm.ownLevelCol(t) }; slices.ContainsFunc(own, ownCol) || slices.ContainsFunc(path, ownCol) {
			continue // own level columns: keep "own OR path" exact
		}
		fk := t.Parent
		if slices.ContainsFunc(mand, func(y *sqlast.Ref) bool {
			if y == x || y.Table != fk.To {
				return false
			}
			for i := range fk.Cols {
				if !conj[eqKey(colKey{x, fk.Cols[i]}, colKey{y, fk.RefCols[i]})] {
					return false
				}
			}
			return true
		}) {
			set(x, modeElided)
			continue
		}
		if deep == 0 {
			continue // a plain "fk IN (scope)": already the cheapest form
		}
		if !innerSafe(t, deep, own, path) {
			continue // inner joins would drop a shallower term's rows
		}
		if !slices.ContainsFunc(t.Chain[:deep], func(h *sqlast.FK) bool { return !slices.Equal(h.RefCols, h.To.PK) }) {
			set(x, modePathJoin)
		}
	}
	return modes
}

type colKey struct {
	ref *sqlast.Ref
	col string
}

func eqKey(a, b colKey) [2]colKey {
	if a.ref.Alias > b.ref.Alias || a.ref.Alias == b.ref.Alias && a.col > b.col {
		a, b = b, a
	}
	return [2]colKey{a, b}
}

// addEqs records the column equalities that are top-level conjuncts of p.
func addEqs(into map[[2]colKey]bool, p sqlast.Pred) {
	switch x := p.(type) {
	case *sqlast.And:
		for _, q := range x.Ps {
			addEqs(into, q)
		}
	case *sqlast.CmpExpr:
		if x.Op != sqlast.Eq {
			return
		}
		a, ok1 := x.X.(*sqlast.Col)
		b, ok2 := x.Y.(*sqlast.Col)
		if ok1 && ok2 {
			into[eqKey(colKey{a.Ref, a.Name}, colKey{b.Ref, b.Name})] = true
		}
	}
}

// pathJoin renders the scope path of ref as inner joins and returns them
// with the level condition for WHERE.
func (r *renderer) pathJoin(ref *sqlast.Ref) ([]engine.Frag, engine.Frag) {
	t := ref.Table
	own, path, deep := r.activeTerms(t)
	as := make([]string, deep)
	var joins []engine.Frag
	prev := ref.Alias
	for i, h := range t.Chain[:deep] {
		as[i] = r.newAlias()
		joins = append(joins, engine.Frag{SQL: "JOIN " + r.q(h.To.Name) + " AS " + r.q(as[i]) + " ON " + r.eqs(as[i], h.RefCols, prev, h.Cols)})
		prev = as[i]
	}
	colOf := func(a sqlast.Anchor) string {
		if len(a.Hops) == 0 {
			return r.col(ref.Alias, a.Col)
		}
		return r.col(as[len(a.Hops)-1], a.Col)
	}
	var f fb
	f.s("(")
	for i, tm := range append(own, path...) {
		if i > 0 {
			f.s(" OR ")
		}
		f.frag(r.render(tm, colOf))
	}
	f.s(")")
	return joins, f.done()
}

// selectBuilder renders s, without a prefix or suffix (see selectPlan), to
// SQL with '?' placeholders. Each clause is accumulated as text in the
// order the guard must visit the references (aliases are numbered and
// references recorded as they render), and the clauses are joined once at
// the end, in SQL order.
func (r *renderer) selectBuilder(s *sqlast.Select) (engine.Frag, error) {
	defer r.enterSelect(s)()
	var sb selectText
	sb.distinct = s.Distinct
	var cols fb
	cols.grow(24*len(s.Items), 0)
	for i, it := range s.Items {
		if i > 0 {
			cols.s(", ")
		}
		if err := r.exprInto(&cols, it.X); err != nil {
			return engine.Frag{}, err
		}
		if it.As != "" {
			cols.s(" AS " + r.q(it.As))
		}
	}
	sb.cols = cols.done()
	if s.From == nil {
		return engine.Frag{}, fmt.Errorf("%w: SELECT without FROM", ErrInvalid)
	}
	modes := r.refModes(s)
	var pathJoined []*sqlast.Ref
	var joins fb
	joins.grow(128*len(s.Joins), 0)
	from, err := r.fromItem(s.From)
	if err != nil {
		return engine.Frag{}, err
	}
	sb.from = from
	for _, j := range s.Joins {
		on, err := r.orderedPred(j.On, r.joinGuard(s)) // order.go
		if err != nil {
			return engine.Frag{}, err
		}
		var g engine.Frag
		switch modes[j.Ref] {
		case modePredicate:
			if g, err = r.guardRef(j.Ref); err != nil {
				return engine.Frag{}, err
			}
		case modePathJoin:
			pathJoined = append(pathJoined, j.Ref)
			fallthrough
		default:
			if err := r.markGuarded(j.Ref); err != nil {
				return engine.Frag{}, err
			}
		}
		if joins.b.Len() > 0 {
			joins.s(" ")
		}
		if j.Kind == sqlast.LeftJoin {
			joins.s("LEFT ")
		}
		if j.Ref.Virtual() {
			item, err := r.fromItem(j.Ref)
			if err != nil {
				return engine.Frag{}, err
			}
			joins.s("JOIN ")
			joins.frag(item)
		} else {
			// A schema table renders without error or effect on the
			// renderer (fromItem's last case), straight into joins.
			joins.s("JOIN ", r.q(j.Ref.Table.Name), " AS ", r.q(j.Ref.Alias))
		}
		joins.s(" ON (")
		joins.frag(on)
		joins.s(")")
		if !g.IsZero() {
			joins.s(" AND ")
			joins.frag(g)
		}
	}
	var where []engine.Frag
	if s.Where != nil {
		w, err := r.orderedPred(s.Where, r.joinGuard(s)) // order.go
		if err != nil {
			return engine.Frag{}, err
		}
		where = append(where, paren(w))
	}
	switch modes[s.From] {
	case modePredicate:
		g, err := r.guardRef(s.From)
		if err != nil {
			return engine.Frag{}, err
		}
		if !g.IsZero() {
			where = append(where, g)
		}
	case modePathJoin:
		pathJoined = append([]*sqlast.Ref{s.From}, pathJoined...)
		fallthrough
	default:
		if err := r.markGuarded(s.From); err != nil {
			return engine.Frag{}, err
		}
	}
	for _, ref := range pathJoined {
		pj, cond := r.pathJoin(ref)
		for _, j := range pj {
			if joins.b.Len() > 0 {
				joins.s(" ")
			}
			joins.frag(j)
		}
		where = append(where, cond)
	}
	sb.joins = joins.done()
	if len(where) > 0 {
		sb.where = and(where)
	}
	if len(s.GroupBy) > 0 {
		gs := make([]string, len(s.GroupBy))
		for i, e := range s.GroupBy {
			if gs[i], err = r.groupTerm(s, e); err != nil { // scalar.go
				return engine.Frag{}, err
			}
		}
		sb.groupBy = gs
	}
	if s.Having != nil {
		h, err := r.pred(s.Having)
		if err != nil {
			return engine.Frag{}, err
		}
		sb.having = paren(h)
	}
	if len(s.OrderBy) > 0 {
		var ob fb
		for i, o := range s.OrderBy {
			if i > 0 {
				ob.s(", ")
			}
			if err := r.orderTerm(&ob, s, o.X); err != nil { // scalar.go
				return engine.Frag{}, err
			}
			if o.Desc {
				ob.s(" DESC")
			}
		}
		sb.orderBy = ob.done()
	}
	sb.limit, sb.offset = s.Limit, s.Offset
	return sb.frag(), nil
}

// selectText holds the clauses of one rendered SELECT; frag joins them in
// SQL order.
type selectText struct {
	distinct                         bool
	cols, from, joins, where, having engine.Frag
	orderBy                          engine.Frag
	groupBy                          []string
	limit, offset                    int64 // negative: none
}

func (t *selectText) frag() engine.Frag {
	var f fb
	// Sized once: the clauses, their keywords and two numbers.
	f.grow(64+len(t.cols.SQL)+len(t.from.SQL)+len(t.joins.SQL)+len(t.where.SQL)+len(t.having.SQL)+len(t.orderBy.SQL)+16*len(t.groupBy),
		len(t.cols.Args)+len(t.from.Args)+len(t.joins.Args)+len(t.where.Args)+len(t.having.Args)+len(t.orderBy.Args))
	f.s("SELECT ")
	if t.distinct {
		f.s("DISTINCT ")
	}
	f.frag(t.cols)
	f.s(" FROM ")
	f.frag(t.from)
	f.clause(" ", t.joins)
	f.clause(" WHERE ", t.where)
	if len(t.groupBy) > 0 {
		f.s(" GROUP BY ", strings.Join(t.groupBy, ", "))
	}
	f.clause(" HAVING ", t.having)
	f.clause(" ORDER BY ", t.orderBy)
	if t.limit >= 0 {
		f.s(" LIMIT ", strconv.FormatInt(t.limit, 10))
	}
	if t.offset >= 0 {
		f.s(" OFFSET ", strconv.FormatInt(t.offset, 10))
	}
	return f.done()
}

// clause writes lead and x unless x is empty.
func (f *fb) clause(lead string, x engine.Frag) {
	if !x.IsZero() {
		f.s(lead)
		f.frag(x)
	}
}

// markGuarded records a reference whose guard is provided otherwise
// (elided or path-joined).
func (r *renderer) markGuarded(ref *sqlast.Ref) error {
	if r.seen[ref] {
		return fmt.Errorf("%w: table reference %s rendered twice", ErrInternal, ref.Alias)
	}
	r.seen[ref] = true
	return nil
}

// finish adds the scope prelude when the statement tests the scope, and
// converts placeholders to the dialect's format.
func (r *renderer) prelude() (engine.Frag, bool) {
	if !r.usedScope {
		return engine.Frag{}, false
	}
	p := r.d.Prelude(r.sc.Doc)
	return p, !p.IsZero()
}

// preludeInto writes the prelude, and a space, to f when the statement
// tests the scope.
func (r *renderer) preludeInto(f *fb) {
	if pre, ok := r.prelude(); ok {
		f.frag(pre)
		f.s(" ")
	}
}

func (r *renderer) selectPlan(s *sqlast.Select) (Plan, error) {
	if len(s.Outer) > 0 {
		return Plan{}, fmt.Errorf("%w: correlated subquery (uses %s) run as a statement", ErrInvalid, s.Outer[0].Alias)
	}
	with, err := r.with(s.With)
	if err != nil {
		return Plan{}, err
	}
	body, err := r.selectBuilder(s)
	if err != nil {
		return Plan{}, err
	}
	lock, err := r.lockClause(s)
	if err != nil {
		return Plan{}, err
	}
	pre, ok := r.prelude()
	if pre, ok, err = withPrefix(pre, ok, with); err != nil {
		return Plan{}, err
	}
	var f fb
	f.grow(len(pre.SQL)+1+len(body.SQL)+1+len(lock), len(pre.Args)+len(body.Args))
	if ok {
		f.frag(pre)
		f.s(" ")
	}
	f.frag(body)
	if lock != "" {
		f.s(" ", lock)
	}
	text, err := r.d.Placeholders().ReplacePlaceholders(f.b.String())
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	lockFn, err := r.keyedLock(s) // keyed.go
	if err != nil {
		return Plan{}, err
	}
	return Plan{Kind: Select, Steps: []Step{{SQL: text, Args: f.args}}, Lock: lockFn}, nil
}
