package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/dialect"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Errors; guardedsql re-exports them.
var (
	ErrNotFound   = errors.New("guardedsql: not found")
	ErrOutOfScope = errors.New("guardedsql: row outside the tenant scope")
	ErrReadOnly   = errors.New("guardedsql: global table is read-only through the guard")
	ErrRefused    = errors.New("guardedsql: statement refused")
	ErrInvalid    = errors.New("guardedsql: invalid statement")
	ErrInternal   = errors.New("guardedsql: internal guard error")
)

// Kind is the statement kind.
type Kind int

const (
	Select Kind = iota
	Insert
	Update
	Delete
)

func (k Kind) String() string {
	return [...]string{"select", "insert", "update", "delete"}[k]
}

// Expect says how many rows a step must affect.
type Expect int

const (
	ExpectAny Expect = iota
	ExpectOne
)

// Step is one SQL statement of a plan.
type Step struct {
	SQL    string
	Args   []any
	Expect Expect
	// Fail is the error for a step affecting no row when ExpectOne.
	Fail error
	// Returning: the step is an INSERT ... RETURNING the table's key, run
	// as a query; its rows count as affected and the last integer key is
	// the insert id (dialects without a last-insert id, see
	// dialect.Returner).
	Returning bool
}

// Plan is what guardedsql runs for one statement.
type Plan struct {
	Kind  Kind
	Steps []Step
	// Atomic: the steps (or the single step's row-count expectation) need a
	// transaction, or a savepoint inside one, so that a failure undoes them.
	Atomic bool
	// Returns and Run: a write with RETURNING or an upsert (writes.go).
	// Run, when set, executes the plan in place of Steps (which then only
	// show its statements); Returns names the columns of the rows it
	// returns.
	Returns []string
	Run     func(ctx context.Context, env Env) (Output, error)
}

// Options tune rendering.
type Options struct {
	// PredicatesOnly disables the two join-aware rewrites (elision and
	// path joins, see selectBuilder) so that every tenant-bound reference
	// carries its own predicate. Tests use it for textual checks.
	PredicatesOnly bool
	// EngineEnforcesReads leaves the read predicates (SELECT references,
	// UPDATE and DELETE targets, the parent checks of writes) to the
	// engine: PostgreSQL configured RLS-only, whose row-level security
	// policies filter every table reference. Write checks on values
	// (level columns, root rows) stay. guardedsql sets it only for a
	// dialect that implements dialect.ReadEnforcer and reports true.
	EngineEnforcesReads bool
	// NoIntersectExcept: the engine lacks INTERSECT and EXCEPT (MySQL
	// before 8.0.31); set operations using them are refused (compound.go).
	NoIntersectExcept bool
}

// Render renders st for dialect d and scope sc.
func Render(d dialect.Dialect, st sqlast.Stmt, sc dialect.Scope, opt Options) (Plan, error) {
	r := &renderer{d: d, sc: sc, seen: map[*sqlast.Ref]bool{}, opt: opt}
	var (
		p   Plan
		err error
	)
	var refs []*sqlast.Ref
	switch s := st.(type) {
	case *sqlast.Select:
		refs = s.Refs
		p, err = r.selectPlan(s)
	case *sqlast.Insert:
		refs = s.Refs
		p, err = r.insertPlan(s)
	case *sqlast.Update:
		refs = s.Refs
		p, err = r.updatePlan(s)
	case *sqlast.Delete:
		refs = s.Refs
		p, err = r.deletePlan(s)
	default:
		return Plan{}, fmt.Errorf("%w: statement of type %T", ErrInvalid, st)
	}
	if err != nil {
		return Plan{}, err
	}
	if len(r.seen) != len(refs) {
		return Plan{}, fmt.Errorf("%w: guarded %d table references, statement has %d", ErrInternal, len(r.seen), len(refs))
	}
	for _, ref := range refs {
		if !r.seen[ref] {
			return Plan{}, fmt.Errorf("%w: table reference %s (%s) was not guarded", ErrInternal, ref.Alias, ref.Table.Name)
		}
	}
	return p, nil
}

type renderer struct {
	opt       Options
	d         dialect.Dialect
	sc        dialect.Scope
	n         int
	seen      map[*sqlast.Ref]bool
	usedScope bool
	ctes      []*sqlast.CTE // declared so far (compound.go)
	windowed  bool          // a window function or scalar subquery was rendered (scalar.go)
	from      *sqlast.Ref   // FROM of the SELECT being rendered (scalar.go)
}

// fb accumulates SQL text and its arguments in textual order.
type fb struct {
	b    strings.Builder
	args []any
}

func (f *fb) s(parts ...string) {
	for _, p := range parts {
		f.b.WriteString(p)
	}
}

func (f *fb) frag(x dialect.Frag) {
	f.b.WriteString(x.SQL)
	f.args = append(f.args, x.Args...)
}

func (f *fb) arg(v any) {
	f.b.WriteByte('?')
	f.args = append(f.args, v)
}

func (f *fb) done() dialect.Frag { return dialect.Frag{SQL: f.b.String(), Args: f.args} }

var (
	fragFalse = dialect.Frag{SQL: "(1=0)"}
	fragTrue  = dialect.Frag{SQL: "(1=1)"}
)

func (r *renderer) q(id string) string { return r.d.Quote(id) }

func (r *renderer) col(alias, c string) string { return r.q(alias) + "." + r.q(c) }

func (r *renderer) cols(alias string, cs []string) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = r.col(alias, c)
	}
	return strings.Join(parts, ", ")
}

func (r *renderer) newAlias() string {
	r.n++
	return "_tm" + strconv.Itoa(r.n)
}

func (r *renderer) table(ref *sqlast.Ref) string {
	return r.q(ref.Table.Name) + " AS " + r.q(ref.Alias)
}

func (r *renderer) inScope(x dialect.Frag, lvl *sqlast.Level) dialect.Frag {
	r.usedScope = true
	return r.d.InScope(x, lvl, r.sc.Doc)
}

// guardRef returns the read predicate for one declared table reference, or
// a zero Frag for a global table, and records the reference as guarded.
func (r *renderer) guardRef(ref *sqlast.Ref) (dialect.Frag, error) {
	if r.seen[ref] {
		return dialect.Frag{}, fmt.Errorf("%w: table reference %s rendered twice", ErrInternal, ref.Alias)
	}
	r.seen[ref] = true
	if ref.Table.Global {
		return dialect.Frag{}, nil
	}
	return r.readGuard(ref.Table, ref.Alias), nil
}

// term is one disjunct of a table's read guard: a plain level tested at
// its anchor, or a shape of grants confined to ancestors, tested as one
// tuple over the anchors of all its levels, so that a grant admits a row
// only where every level it names agrees with the data.
type term struct {
	anchors []sqlast.Anchor // one per level of the term, in shape order
	shape   *dialect.Shape  // nil for a plain level
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
func (r *renderer) render(tm term, colOf func(sqlast.Anchor) string) dialect.Frag {
	if tm.shape == nil {
		a := tm.anchors[0]
		return r.inScope(dialect.Frag{SQL: colOf(a)}, a.Level)
	}
	xs := make([]dialect.Frag, len(tm.anchors))
	for i, a := range tm.anchors {
		xs[i] = dialect.Frag{SQL: colOf(a)}
	}
	r.usedScope = true
	return r.d.InTuples(xs, *tm.shape, r.sc.Doc)
}

// readGuard is true for a row of t (under alias) that lies under one of the
// scope's grants: one of its own level columns holds a granted id, or its
// scope parent chain reaches a column that does; for a grant confined to
// ancestors, every level it names holds the grant's id at once.
func (r *renderer) readGuard(t *sqlast.Table, alias string) dialect.Frag {
	if guardfault.Dropped(t.Name) || r.opt.EngineEnforcesReads || r.exprFault() {
		return fragTrue
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
// tuple; none of its ids is tested on its own level (dialect.Scope.Active
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
	for _, a := range t.Anchors {
		if r.sc.Has(a.Level) {
			add(term{anchors: []sqlast.Anchor{a}})
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

// pathPred follows t's parent chain deep hops and tests the path terms. A
// shape term that also reads one of t's own columns refers to alias from
// inside the subquery (correlated); all others keep it uncorrelated.
func (r *renderer) pathPred(t *sqlast.Table, alias string, path []term, deep int) dialect.Frag {
	hops := t.Chain[:deep]
	as := make([]string, deep)
	for i := range as {
		as[i] = r.newAlias()
	}
	var from strings.Builder
	from.WriteString(r.q(hops[0].To.Name) + " AS " + r.q(as[0]))
	for i := 1; i < deep; i++ {
		h := hops[i]
		from.WriteString(" JOIN " + r.q(h.To.Name) + " AS " + r.q(as[i]) + " ON " + r.eqs(as[i], h.RefCols, as[i-1], h.Cols))
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
	case dialect.PathExists:
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
	parts := make([]string, len(acs))
	for i := range acs {
		parts[i] = r.col(a, acs[i]) + " = " + r.col(b, bcs[i])
	}
	return strings.Join(parts, " AND ")
}

// expr renders e with its bound values, in textual order.
func (r *renderer) expr(e sqlast.Expr) (dialect.Frag, error) {
	if c, ok := e.(*sqlast.Col); ok { // the common case, without a builder
		return dialect.Frag{SQL: r.col(c.Ref.Alias, c.Name)}, nil
	}
	var f fb
	if err := r.exprInto(&f, e); err != nil {
		return dialect.Frag{}, err
	}
	return f.done(), nil
}

func (r *renderer) exprInto(f *fb, e sqlast.Expr) error {
	switch x := e.(type) {
	case *sqlast.Col:
		f.s(r.col(x.Ref.Alias, x.Name))
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

func (r *renderer) pred(p sqlast.Pred) (dialect.Frag, error) {
	var f fb
	if err := r.predInto(&f, p); err != nil {
		return dialect.Frag{}, err
	}
	return f.done(), nil
}

func (r *renderer) predInto(f *fb, p sqlast.Pred) error {
	switch x := p.(type) {
	case *sqlast.CmpVal:
		e, err := r.expr(x.X)
		if err != nil {
			return err
		}
		if err := checkValue(x.V); err != nil {
			return err
		}
		if x.V.V == nil && (x.Op == sqlast.Eq || x.Op == sqlast.Ne) {
			f.frag(e)
			if x.Op == sqlast.Eq {
				f.s(" IS NULL")
			} else {
				f.s(" IS NOT NULL")
			}
			return nil
		}
		f.frag(e)
		f.s(" ", string(x.Op), " ")
		f.arg(x.V.V)
	case *sqlast.CmpExpr:
		a, err := r.expr(x.X)
		if err != nil {
			return err
		}
		b, err := r.expr(x.Y)
		if err != nil {
			return err
		}
		f.frag(a)
		f.s(" ", string(x.Op), " ")
		f.frag(b)
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
		f.arg(x.Lo.V)
		f.s(" AND ")
		f.arg(x.Hi.V)
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
		for i, v := range x.Vals {
			if err := checkValue(v); err != nil {
				return err
			}
			if i > 0 {
				f.s(", ")
			}
			f.arg(v.V)
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
		f.arg(x.Pattern.V)
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

func (r *renderer) conj(f *fb, ps []sqlast.Pred, sep string, empty dialect.Frag) error {
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

func paren(x dialect.Frag) dialect.Frag {
	return dialect.Frag{SQL: "(" + x.SQL + ")", Args: x.Args}
}

func (r *renderer) subquery(s *sqlast.Select) (dialect.Frag, error) {
	sb, err := r.selectBuilder(s)
	if err != nil {
		return dialect.Frag{}, err
	}
	text, args, err := sb.ToSql() // '?' placeholders; converted once at the top
	if err != nil {
		return dialect.Frag{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	return dialect.Frag{SQL: text, Args: args}, nil
}

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
	modes := map[*sqlast.Ref]refMode{}
	if r.opt.PredicatesOnly || r.opt.EngineEnforcesReads {
		return modes
	}
	mand := []*sqlast.Ref{s.From}
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
		if slices.ContainsFunc(append(own, path...), func(tm term) bool { return tm.ownLevelCol(t) }) {
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
			modes[x] = modeElided
			continue
		}
		if deep == 0 {
			continue // a plain "fk IN (scope)": already the cheapest form
		}
		if !slices.ContainsFunc(t.Chain[:deep], func(h *sqlast.FK) bool { return !slices.Equal(h.RefCols, h.To.PK) }) {
			modes[x] = modePathJoin
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
func (r *renderer) pathJoin(ref *sqlast.Ref) ([]dialect.Frag, dialect.Frag) {
	t := ref.Table
	own, path, deep := r.activeTerms(t)
	as := make([]string, deep)
	var joins []dialect.Frag
	prev := ref.Alias
	for i, h := range t.Chain[:deep] {
		as[i] = r.newAlias()
		joins = append(joins, dialect.Frag{SQL: "JOIN " + r.q(h.To.Name) + " AS " + r.q(as[i]) + " ON " + r.eqs(as[i], h.RefCols, prev, h.Cols)})
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

// selectBuilder renders s. Clauses are accumulated as text and handed to
// squirrel once per clause: every squirrel builder call copies its
// persistent map, so one call per clause keeps rendering cheap.
func (r *renderer) selectBuilder(s *sqlast.Select) (sq.SelectBuilder, error) {
	defer r.enterSelect(s)()
	sb := sq.Select()
	if s.Distinct {
		sb = sb.Distinct()
	}
	var cols fb
	for i, it := range s.Items {
		if i > 0 {
			cols.s(", ")
		}
		if err := r.exprInto(&cols, it.X); err != nil {
			return sb, err
		}
		if it.As != "" {
			cols.s(" AS " + r.q(it.As))
		}
	}
	sb = sb.Column(cols.done())
	if s.From == nil {
		return sb, fmt.Errorf("%w: SELECT without FROM", ErrInvalid)
	}
	modes := r.refModes(s)
	var pathJoined []*sqlast.Ref
	var joins fb
	from, err := r.fromItem(s.From)
	if err != nil {
		return sb, err
	}
	if len(from.Args) == 0 {
		sb = sb.From(from.SQL)
	} else {
		// squirrel's From takes no arguments: a derived table with bound
		// values goes first in the join clause, which follows FROM's place.
		joins.s("FROM ")
		joins.frag(from)
	}
	for _, j := range s.Joins {
		on, err := r.pred(j.On)
		if err != nil {
			return sb, err
		}
		var g dialect.Frag
		switch modes[j.Ref] {
		case modePredicate:
			if g, err = r.guardRef(j.Ref); err != nil {
				return sb, err
			}
		case modePathJoin:
			pathJoined = append(pathJoined, j.Ref)
			fallthrough
		default:
			if err := r.markGuarded(j.Ref); err != nil {
				return sb, err
			}
		}
		if joins.b.Len() > 0 {
			joins.s(" ")
		}
		if j.Kind == sqlast.LeftJoin {
			joins.s("LEFT ")
		}
		item, err := r.fromItem(j.Ref)
		if err != nil {
			return sb, err
		}
		joins.s("JOIN ")
		joins.frag(item)
		joins.s(" ON (")
		joins.frag(on)
		joins.s(")")
		if !g.IsZero() {
			joins.s(" AND ")
			joins.frag(g)
		}
	}
	var where []dialect.Frag
	if s.Where != nil {
		w, err := r.pred(s.Where)
		if err != nil {
			return sb, err
		}
		where = append(where, paren(w))
	}
	switch modes[s.From] {
	case modePredicate:
		g, err := r.guardRef(s.From)
		if err != nil {
			return sb, err
		}
		if !g.IsZero() {
			where = append(where, g)
		}
	case modePathJoin:
		pathJoined = append([]*sqlast.Ref{s.From}, pathJoined...)
		fallthrough
	default:
		if err := r.markGuarded(s.From); err != nil {
			return sb, err
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
	if joins.b.Len() > 0 {
		sb = sb.JoinClause(joins.done())
	}
	if len(where) > 0 {
		sb = sb.Where(and(where))
	}
	if len(s.GroupBy) > 0 {
		gs := make([]string, len(s.GroupBy))
		for i, e := range s.GroupBy {
			if gs[i], err = r.groupTerm(s, e); err != nil { // scalar.go
				return sb, err
			}
		}
		sb = sb.GroupBy(gs...)
	}
	if s.Having != nil {
		h, err := r.pred(s.Having)
		if err != nil {
			return sb, err
		}
		sb = sb.Having(paren(h))
	}
	if len(s.OrderBy) > 0 {
		var ob fb
		for i, o := range s.OrderBy {
			if i > 0 {
				ob.s(", ")
			}
			if err := r.orderTerm(&ob, s, o.X); err != nil { // scalar.go
				return sb, err
			}
			if o.Desc {
				ob.s(" DESC")
			}
		}
		sb = sb.OrderByClause(ob.done())
	}
	if s.Limit >= 0 {
		sb = sb.Limit(uint64(s.Limit))
	}
	if s.Offset >= 0 {
		sb = sb.Offset(uint64(s.Offset))
	}
	return sb, nil
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
func (r *renderer) prelude() (dialect.Frag, bool) {
	if !r.usedScope {
		return dialect.Frag{}, false
	}
	p := r.d.Prelude(r.sc.Doc)
	return p, !p.IsZero()
}

func (r *renderer) selectPlan(s *sqlast.Select) (Plan, error) {
	if len(s.Outer) > 0 {
		return Plan{}, fmt.Errorf("%w: correlated subquery (uses %s) run as a statement", ErrInvalid, s.Outer[0].Alias)
	}
	with, err := r.with(s.With)
	if err != nil {
		return Plan{}, err
	}
	sb, err := r.selectBuilder(s)
	if err != nil {
		return Plan{}, err
	}
	lock, err := r.lockClause(s)
	if err != nil {
		return Plan{}, err
	}
	if lock != "" {
		sb = sb.Suffix(lock)
	}
	pre, ok := r.prelude()
	if pre, ok, err = withPrefix(pre, ok, with); err != nil {
		return Plan{}, err
	}
	if ok {
		sb = sb.PrefixExpr(pre)
	}
	text, args, err := sb.PlaceholderFormat(r.d.Placeholders()).ToSql()
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	return Plan{Kind: Select, Steps: []Step{{SQL: text, Args: args}}}, nil
}

// valueInScope is true when the bound value v is a granted id at lvl: a
// plain grant's. A grant confined to ancestors never makes a bare value of
// one of its levels grantable (it holds only together with the others), so
// writing such a value needs a plain grant.
func (r *renderer) valueInScope(lvl *sqlast.Level, v sqlast.Value) dialect.Frag {
	if !r.sc.Has(lvl) {
		return fragFalse
	}
	nv, ok := dialect.LevelValue(lvl, v.V)
	if !ok {
		return fragFalse
	}
	return r.inScope(dialect.Frag{SQL: "?", Args: []any{nv}}, lvl)
}

// parentCheck is true when the row of fk.To keyed by vals is in scope.
//
// Invariant: each key value is bound as the kind of the referenced column
// (or, if the schema does not know it, of the referencing one), so the
// engine compares like with like and never converts the stored keys (MySQL
// would match '7eleven' for 7, or fail quoting a stored key); a value that
// cannot be of that kind references no row.
func (r *renderer) parentCheck(fk *sqlast.FK, vals map[string]sqlast.Value) dialect.Frag {
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
	f.frag(r.readGuard(fk.To, a))
	f.s(")")
	return f.done()
}

// writeChecks returns the conditions a written row must meet, given the
// values assigned (all columns for INSERT, the SET columns for UPDATE),
// and whether any of them follows a foreign key. insert selects the
// INSERT-only rules (unset scope parent refused, the row itself in scope).
func (r *renderer) writeChecks(t *sqlast.Table, vals map[string]sqlast.Value, insert bool) ([]dialect.Frag, bool, error) {
	var checks []dialect.Frag
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
		default:
			checks = append(checks, r.parentCheck(fk, vals))
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
	if insert && t.Parent == nil {
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

func and(fs []dialect.Frag) dialect.Frag {
	var f fb
	for i, x := range fs {
		if i > 0 {
			f.s(" AND ")
		}
		f.frag(x)
	}
	return f.done()
}

// insertRowChecks types one inserted row's values by column and renders
// its write checks. Invariant: an inserted row always has at least one
// scope check (its parent, a tenant foreign key, a level column, or the
// row itself for a root); none is an internal error, never an unchecked
// insert.
func (r *renderer) insertRowChecks(t *sqlast.Table, cols []string, row []sqlast.Value) (map[string]sqlast.Value, []dialect.Frag, bool, error) {
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
	if len(checks) == 0 {
		return nil, nil, false, fmt.Errorf("%w: no scope check for INSERT into %s", ErrInternal, t.Name)
	}
	return vals, checks, viaFK, nil
}

func (r *renderer) insertPlan(s *sqlast.Insert) (Plan, error) {
	t := s.Ref.Table
	r.seen[s.Ref] = true
	if t.Global {
		return Plan{}, fmt.Errorf("%w: INSERT into %s", ErrReadOnly, t.Name)
	}
	if s.Upsert != nil || s.Returning != nil || s.Source != nil {
		return r.insertWrites(s)
	}
	cols := make([]string, len(s.Cols))
	for i, c := range s.Cols {
		cols[i] = r.q(c)
	}
	p := Plan{Kind: Insert, Atomic: len(s.Rows) > 1}
	for _, row := range s.Rows {
		_, checks, viaFK, err := r.insertRowChecks(t, s.Cols, row)
		if err != nil {
			return Plan{}, err
		}
		sel := sq.Select()
		for _, v := range row {
			sel = sel.Column(dialect.Frag{SQL: "?", Args: []any{v.V}})
		}
		if dual := r.d.DualTable(); dual != "" {
			sel = sel.From(dual)
		}
		sel = sel.Where(and(checks))
		ib := sq.Insert(r.q(t.Name)).Columns(cols...).Select(sel)
		if pre, ok := r.prelude(); ok {
			ib = ib.PrefixExpr(pre)
		}
		returning := false
		if rt, ok := r.d.(dialect.Returner); ok && rt.Returning() && len(t.PK) == 1 {
			ib = ib.Suffix("RETURNING " + r.q(t.PK[0]))
			returning = true
		}
		text, args, err := ib.PlaceholderFormat(r.d.Placeholders()).ToSql()
		if err != nil {
			return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
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
	if t.Global {
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
	w, err := r.pred(s.Where)
	if err != nil {
		return Plan{}, err
	}
	ub = ub.Where(paren(w))
	g, err := r.guardRef(s.Ref)
	if err != nil {
		return Plan{}, err
	}
	ub = ub.Where(g)
	checks, _, err := r.writeChecks(t, vals, false)
	if err != nil {
		return Plan{}, err
	}
	for _, c := range checks {
		ub = ub.Where(c)
	}
	if s.Returning != nil {
		return r.updateReturning(s, ub, w, g, checks)
	}
	if pre, ok := r.prelude(); ok {
		ub = ub.PrefixExpr(pre)
	}
	text, args, err := ub.PlaceholderFormat(r.d.Placeholders()).ToSql()
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	st := Step{SQL: text, Args: args, Fail: ErrNotFound}
	if s.ExpectOne {
		st.Expect = ExpectOne
	}
	return Plan{Kind: Update, Steps: []Step{st}, Atomic: s.ExpectOne}, nil
}

func (r *renderer) deletePlan(s *sqlast.Delete) (Plan, error) {
	t := s.Ref.Table
	if t.Global {
		r.seen[s.Ref] = true
		return Plan{}, fmt.Errorf("%w: DELETE from %s", ErrReadOnly, t.Name)
	}
	if s.Where == nil {
		return Plan{}, fmt.Errorf("%w: DELETE without WHERE", ErrInvalid)
	}
	w, err := r.pred(s.Where)
	if err != nil {
		return Plan{}, err
	}
	g, err := r.guardRef(s.Ref)
	if err != nil {
		return Plan{}, err
	}
	db := sq.Delete(r.q(t.Name)).Where(paren(w)).Where(g)
	if s.Returning != nil {
		return r.deleteReturning(s, db, w, g)
	}
	if pre, ok := r.prelude(); ok {
		db = db.PrefixExpr(pre)
	}
	text, args, err := db.PlaceholderFormat(r.d.Placeholders()).ToSql()
	if err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInternal, err)
	}
	st := Step{SQL: text, Args: args, Fail: ErrNotFound}
	if s.ExpectOne {
		st.Expect = ExpectOne
	}
	return Plan{Kind: Delete, Steps: []Step{st}, Atomic: s.ExpectOne}, nil
}
