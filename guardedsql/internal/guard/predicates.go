package guard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Read predicates (the guard of one table reference, along its scope path)
// and the rendering of expressions, predicates and subqueries.

// term is one disjunct of a table's read guard: a plain level tested at
// its anchor, or a shape of grants confined to ancestors, tested as one
// tuple over the anchors of all its levels, so that a grant admits a row
// only where every level it names agrees with the data.
type term struct {
	anchors []sqlast.Anchor // one per level of the term, in shape order
	shape   *engine.Shape   // nil for a plain level
}

// depth is the number of parent hops the term reads through.
func (tm term) depth() int {
	d := 0
	for _, a := range tm.anchors {
		d = max(d, len(a.Hops))
	}
	return d
}

// ownLevelCol reports whether the term reads one of t's own level columns
// (not a foreign-key shortcut to a parent's).
func (tm term) ownLevelCol(t *sqlast.Table) bool {
	return slices.ContainsFunc(tm.anchors, func(a sqlast.Anchor) bool { return len(a.Hops) == 0 && t.LevelOf(a.Col) != nil })
}

// render renders the term, reading each anchor at the column colOf names.
func (r *renderer) render(tm term, colOf func(sqlast.Anchor) string) engine.Frag {
	if tm.shape == nil {
		a := tm.anchors[0]
		return r.inScope(engine.Frag{SQL: colOf(a)}, a.Level)
	}
	xs := make([]engine.Frag, len(tm.anchors))
	for i, a := range tm.anchors {
		xs[i] = engine.Frag{SQL: colOf(a)}
	}
	if is, ok := r.d.(engine.InlineScoper); ok && r.inline {
		return is.InTuplesInline(xs, *tm.shape, r.sc.Doc)
	}
	r.usedScope = true
	return r.d.InTuples(xs, *tm.shape, r.sc.Doc)
}

// readGuard is true for a row of t (under alias) that lies under one of the
// scope's grants: one of its own level columns holds a granted id, or its
// scope parent chain reaches a column that does; for a grant confined to
// ancestors, every level it names holds the grant's id at once.
func (r *renderer) readGuard(t *sqlast.Table, alias string) engine.Frag {
	if guardfault.Dropped(t.Name) || r.opt.EngineEnforcesReads || r.exprFault() {
		return fragTrue
	}
	if t.ByRef {
		return r.byRefGuard(t, alias) // byref.go
	}
	own, path, deep := r.activeTerms(t)
	if len(own) == 0 && len(path) == 0 {
		return fragFalse
	}
	var f fb
	f.s("(")
	for i, tm := range own {
		if i > 0 {
			f.s(" OR ")
		}
		f.frag(r.render(tm, func(a sqlast.Anchor) string { return r.col(alias, a.Col) }))
	}
	if len(path) > 0 {
		if len(own) > 0 {
			f.s(" OR ")
		}
		f.frag(r.pathPred(t, alias, path, deep))
	}
	f.s(")")
	return f.done()
}

// activeTerms splits t's terms for the scope into those read on t itself
// (own level columns and foreign-key shortcuts) and those read along the
// parent chain, and returns the chain depth needed. A plain level counts
// when the scope holds ids at it; a shape when t has an anchor for every
// one of its levels (otherwise the grants of that shape cannot be checked
// on t and admit none of its rows).
//
// Invariant: a grant confined to ancestors is only ever tested as its whole
// tuple; none of its ids is tested on its own level (engine.Scope.Active
// holds plain grants only).
func (r *renderer) activeTerms(t *sqlast.Table) (own, path []term, deep int) {
	add := func(tm term) {
		if d := tm.depth(); d == 0 {
			own = append(own, tm)
		} else {
			path = append(path, tm)
			deep = max(deep, d)
		}
	}
	for i, a := range t.Anchors {
		if r.sc.Has(a.Level) {
			// A one-anchor view of the schema's slice, capped so that no
			// append can write into it; terms only read their anchors.
			add(term{anchors: t.Anchors[i : i+1 : i+1]})
		}
	}
shapes:
	for i := range r.sc.Shapes {
		sh := &r.sc.Shapes[i]
		tm := term{shape: sh}
		for _, l := range sh.Levels {
			k := slices.IndexFunc(t.Anchors, func(a sqlast.Anchor) bool { return a.Level == l })
			if k < 0 {
				continue shapes
			}
			tm.anchors = append(tm.anchors, t.Anchors[k])
		}
		add(tm)
	}
	return own, path, deep
}

// innerSafe reports whether inner joins along t's chain keep every row a
// term of the given lists admits: each hop past a shallower term's (which
// that term does not read, but a deeper one does) is a table that carries
// every level of that term, so that a grant of those levels sees the row the
// join needs. PostgreSQL's row-level security hides a project, which
// carries only its organization, from an environment grant: a scope of
// an organization and another's environment, joined inner to the
// project, would lose that environment's rows.
func innerSafe(t *sqlast.Table, deep int, terms ...[]term) bool {
	for _, path := range terms {
		for _, tm := range path {
			for i := tm.depth(); i < deep; i++ {
				to := t.Chain[i].To
				for _, a := range tm.anchors {
					if !slices.ContainsFunc(to.Anchors, func(b sqlast.Anchor) bool { return b.Level == a.Level }) {
						return false
					}
				}
			}
		}
	}
	return true
}

// pathPred follows t's parent chain deep hops and tests the path terms. A
// shape term that also reads one of t's own columns refers to alias from
// inside the subquery (correlated); all others keep it uncorrelated.
func (r *renderer) pathPred(t *sqlast.Table, alias string, path []term, deep int) engine.Frag {
	hops := t.Chain[:deep]
	as := make([]string, deep)
	for i := range as {
		as[i] = r.newAlias()
	}
	// A hop a shallower term's grant may not see is joined outer, so
	// that the engine hiding it does not take that term's rows with it.
	join := " JOIN "
	if !innerSafe(t, deep, path) {
		join = " LEFT JOIN "
	}
	var from strings.Builder
	from.WriteString(r.q(hops[0].To.Name) + " AS " + r.q(as[0]))
	for i := 1; i < deep; i++ {
		h := hops[i]
		from.WriteString(join + r.q(h.To.Name) + " AS " + r.q(as[i]) + " ON " + r.eqs(as[i], h.RefCols, as[i-1], h.Cols))
	}
	first := hops[0]
	var cond fb
	for i, tm := range path {
		if i > 0 {
			cond.s(" OR ")
		}
		cond.frag(r.render(tm, func(a sqlast.Anchor) string {
			if len(a.Hops) > 0 {
				return r.col(as[len(a.Hops)-1], a.Col)
			}
			// A foreign-key column of the first hop equals the parent's
			// key it references: read that, keeping the subquery
			// uncorrelated (rooms.hotel_id is hotels.id).
			if k := slices.Index(first.Cols, a.Col); k >= 0 {
				return r.col(as[0], first.RefCols[k])
			}
			return r.col(alias, a.Col)
		}))
	}
	c := cond.done()
	var f fb
	switch r.d.PathStyle() {
	case engine.PathExists:
		f.s("EXISTS (SELECT 1 FROM ", from.String(), " WHERE ", r.eqs(as[0], first.RefCols, alias, first.Cols), " AND (")
		f.frag(c)
		f.s("))")
	default:
		lhs := r.cols(alias, first.Cols)
		if len(first.Cols) > 1 {
			lhs = "(" + lhs + ")"
		}
		f.s(lhs, " IN (SELECT ", r.cols(as[0], first.RefCols), " FROM ", from.String(), " WHERE (")
		f.frag(c)
		f.s("))")
	}
	return f.done()
}

func (r *renderer) eqs(a string, acs []string, b string, bcs []string) string {
	var f fb
	f.grow(32*len(acs), 0)
	for i := range acs {
		if i > 0 {
			f.s(" AND ")
		}
		f.col(r, a, acs[i])
		f.s(" = ")
		f.col(r, b, bcs[i])
	}
	return f.b.String()
}

// operand is an expression about to be written: a column, kept as the
// node and written straight into the caller's builder, or the rendering of
// any other expression.
type operand struct {
	col *sqlast.Col
	f   engine.Frag
}

// operand renders e unless it is a column, which renders without error and
// without touching the renderer's state, so writing it later is the same as
// writing it now.
func (r *renderer) operand(e sqlast.Expr) (operand, error) {
	if c, ok := e.(*sqlast.Col); ok {
		return operand{col: c}, nil
	}
	x, err := r.expr(e)
	return operand{f: x}, err
}

func (o operand) into(f *fb, r *renderer) {
	if o.col != nil {
		f.col(r, o.col.Ref.Alias, o.col.Name)
		return
	}
	f.frag(o.f)
}

// expr renders e with its bound values, in textual order.
func (r *renderer) expr(e sqlast.Expr) (engine.Frag, error) {
	if c, ok := e.(*sqlast.Col); ok { // the common case, without a builder
		return engine.Frag{SQL: r.col(c.Ref.Alias, c.Name)}, nil
	}
	var f fb
	if err := r.exprInto(&f, e); err != nil {
		return engine.Frag{}, err
	}
	return f.done(), nil
}

func (r *renderer) exprInto(f *fb, e sqlast.Expr) error {
	switch x := e.(type) {
	case *sqlast.Col:
		f.col(r, x.Ref.Alias, x.Name)
		return nil
	case *sqlast.Agg:
		f.s(string(x.Fn), "(")
		if x.Arg == nil {
			f.s("*")
		} else {
			if x.Distinct {
				f.s("DISTINCT ")
			}
			if err := r.exprInto(f, x.Arg); err != nil {
				return err
			}
		}
		f.s(")")
		return nil
	}
	return r.scalarInto(f, e) // scalar.go
}

func checkValue(v sqlast.Value) error {
	switch v.V.(type) {
	case nil, bool, int64, float64, string, []byte:
		return nil
	}
	if _, ok := v.V.(time.Time); ok {
		return nil
	}
	return fmt.Errorf("%w: bind value of type %T", ErrInvalid, v.V)
}

func (r *renderer) pred(p sqlast.Pred) (engine.Frag, error) {
	var f fb
	if err := r.predInto(&f, p); err != nil {
		return engine.Frag{}, err
	}
	return f.done(), nil
}

func (r *renderer) predInto(f *fb, p sqlast.Pred) error {
	switch x := p.(type) {
	case *sqlast.CmpVal:
		e, err := r.operand(x.X)
		if err != nil {
			return err
		}
		if err := checkValue(x.V); err != nil {
			return err
		}
		if x.V.V == nil && (x.Op == sqlast.Eq || x.Op == sqlast.Ne) {
			e.into(f, r)
			if x.Op == sqlast.Eq {
				f.s(" IS NULL")
			} else {
				f.s(" IS NOT NULL")
			}
			return nil
		}
		e.into(f, r)
		f.s(" ", string(x.Op), " ")
		f.arg(r.bound(&x.V))
	case *sqlast.CmpExpr:
		a, err := r.operand(x.X)
		if err != nil {
			return err
		}
		b, err := r.operand(x.Y)
		if err != nil {
			return err
		}
		a.into(f, r)
		f.s(" ", string(x.Op), " ")
		b.into(f, r)
	case *sqlast.Between:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		if err := errors.Join(checkValue(x.Lo), checkValue(x.Hi)); err != nil {
			return err
		}
		f.frag(e)
		f.s(" BETWEEN ")
		f.arg(r.bound(&x.Lo))
		f.s(" AND ")
		f.arg(r.bound(&x.Hi))
	case *sqlast.InList:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		if len(x.Vals) == 0 {
			if x.Not {
				f.frag(fragTrue)
			} else {
				f.frag(fragFalse)
			}
			return nil
		}
		f.frag(e)
		if x.Not {
			f.s(" NOT")
		}
		f.s(" IN (")
		for i := range x.Vals {
			if err := checkValue(x.Vals[i]); err != nil {
				return err
			}
			if i > 0 {
				f.s(", ")
			}
			f.arg(r.bound(&x.Vals[i]))
		}
		f.s(")")
	case *sqlast.InSelect:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		sub, err := r.subquery(x.Sub)
		if err != nil {
			return err
		}
		f.frag(e)
		if x.Not {
			f.s(" NOT")
		}
		f.s(" IN (")
		f.frag(sub)
		f.s(")")
	case *sqlast.Exists:
		sub, err := r.subquery(x.Sub)
		if err != nil {
			return err
		}
		if x.Not {
			f.s("NOT ")
		}
		f.s("EXISTS (")
		f.frag(sub)
		f.s(")")
	case *sqlast.Like:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		f.frag(e)
		if x.Not {
			f.s(" NOT")
		}
		f.s(" LIKE ")
		f.arg(r.boundRaw(&x.Pattern))
		f.s(" ESCAPE ", r.d.LikeEscape())
	case *sqlast.IsNull:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		f.frag(e)
		if x.Not {
			f.s(" IS NOT NULL")
		} else {
			f.s(" IS NULL")
		}
	case *sqlast.And:
		return r.conj(f, x.Ps, " AND ", fragTrue)
	case *sqlast.Or:
		return r.conj(f, x.Ps, " OR ", fragFalse)
	case *sqlast.Not:
		f.s("NOT (")
		if err := r.predInto(f, x.P); err != nil {
			return err
		}
		f.s(")")
	default:
		return fmt.Errorf("%w: predicate %T", ErrInvalid, p)
	}
	return nil
}

func (r *renderer) conj(f *fb, ps []sqlast.Pred, sep string, empty engine.Frag) error {
	if len(ps) == 0 {
		f.frag(empty)
		return nil
	}
	f.s("(")
	for i, p := range ps {
		if i > 0 {
			f.s(sep)
		}
		f.s("(")
		if err := r.predInto(f, p); err != nil {
			return err
		}
		f.s(")")
	}
	f.s(")")
	return nil
}

func paren(x engine.Frag) engine.Frag {
	return engine.Frag{SQL: "(" + x.SQL + ")", Args: x.Args}
}

func (r *renderer) subquery(s *sqlast.Select) (engine.Frag, error) {
	return r.selectBuilder(s) // '?' placeholders; converted once at the top
}
